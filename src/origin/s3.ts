/**
 * The S3 REST front end of the origin stub. Path-style (`/bucket/key`) and virtual-host
 * (`bucket.localhost`) addressing are resolved by the server before this runs.
 *
 * The stub does NOT verify signatures: any credentials (and unsigned requests) are
 * accepted. It is a local test origin, never an access-control boundary.
 */
import { XMLParser } from "fast-xml-parser"
import { decodePath, discardBody, header, sendEmpty, sendXml } from "../http/context.js"
import type { Ctx } from "./context.js"
import { isValidBucket } from "../http/names.js"
import { s3Error, s3ReadFailure } from "../http/s3Errors.js"
import { keyProblem } from "./layout.js"
import { serveObject, type ReadDialect } from "./objectRead.js"
import * as store from "./store.js"
import { abortUpload, completeUpload, createUpload, listParts, listUploads, uploadPart } from "./multipart.js"
import { bodyError, md5Hex, s3Body } from "./s3Body.js"
import { copyObject } from "./s3Copy.js"
import { el, S3_XMLNS, XML_DECL_S3 } from "../http/xml.js"
import { metadataFromHeaders, metadataHeaders, S3_META_PREFIX, s3MetadataProblem } from "../core/userMetadata.js"
import { readProps, saveProps } from "./blobProps.js"

const OWNER = `<Owner><ID>talon-origin-stub</ID><DisplayName>talon</DisplayName></Owner>`

const noSuchBucket = (ctx: Ctx, bucket: string) =>
  s3Error(ctx, 404, "NoSuchBucket", "The specified bucket does not exist", { BucketName: bucket })

const dialect: ReadDialect = {
  objectHeaders: () => ({ "x-amz-storage-class": "STANDARD" }),
  fail: (ctx, failure, obj, range) => s3ReadFailure(ctx, failure, obj.key, obj.size, range)
}

/** `encoding-type=url`: S3 form-encodes names but leaves `/` readable. */
const encoder = (ctx: Ctx) =>
  ctx.query.get("encoding-type") === "url"
    ? (s: string) => encodeURIComponent(s).replace(/%2F/gi, "/").replace(/%20/g, "+")
    : (s: string) => s

const parseMaxKeys = (ctx: Ctx, name: string): number | undefined => {
  const raw = ctx.query.get(name)
  if (raw === null) return 1000
  if (!/^\d+$/.test(raw)) return undefined
  return Math.min(Number(raw), 1000)
}

const toToken = (marker: string) => Buffer.from(marker, "utf8").toString("base64url")
const fromToken = (token: string): string | undefined => {
  if (!/^[A-Za-z0-9_-]*$/.test(token)) return undefined
  return Buffer.from(token, "base64url").toString("utf8")
}

const listV2 = async (ctx: Ctx, bucket: string) => {
  const maxKeys = parseMaxKeys(ctx, "max-keys")
  if (maxKeys === undefined) return s3Error(ctx, 400, "InvalidArgument", "Provided max-keys not an integer or within integer range")
  const token = ctx.query.get("continuation-token")
  const after = token === null ? undefined : fromToken(token)
  if (token !== null && (after === undefined || token === "")) {
    return s3Error(ctx, 400, "InvalidArgument", "The continuation token provided is incorrect")
  }
  const prefix = ctx.query.get("prefix") ?? ""
  const delimiter = ctx.query.get("delimiter") ?? ""
  const startAfter = ctx.query.get("start-after") ?? undefined
  const enc = encoder(ctx)
  const page = await store.listObjects(ctx.state.root, bucket, {
    prefix,
    delimiter,
    after: after ?? startAfter ?? "",
    maxKeys
  })
  const body =
    `${XML_DECL_S3}<ListBucketResult xmlns="${S3_XMLNS}">` +
    el("Name", bucket) +
    el("Prefix", enc(prefix)) +
    (delimiter === "" ? "" : el("Delimiter", enc(delimiter))) +
    el("MaxKeys", maxKeys) +
    (ctx.query.get("encoding-type") === "url" ? el("EncodingType", "url") : "") +
    el("KeyCount", page.objects.length + page.prefixes.length) +
    el("IsTruncated", page.truncated) +
    (token === null ? "" : el("ContinuationToken", token)) +
    (page.nextMarker === undefined ? "" : el("NextContinuationToken", toToken(page.nextMarker))) +
    (startAfter === undefined ? "" : el("StartAfter", enc(startAfter))) +
    contents(page.objects, enc, ctx.query.get("fetch-owner") === "true") +
    page.prefixes.map((p) => `<CommonPrefixes>${el("Prefix", enc(p))}</CommonPrefixes>`).join("") +
    `</ListBucketResult>`
  sendXml(ctx, 200, body)
}

const contents = (
  objects: ReadonlyArray<{ key: string; lastModified: Date; etag: string; size: number }>,
  enc: (s: string) => string,
  owner: boolean
) =>
  objects
    .map(
      (o) =>
        `<Contents>${el("Key", enc(o.key))}${el("LastModified", o.lastModified.toISOString())}${el("ETag", o.etag)}${el("Size", o.size)}${owner ? OWNER : ""}<StorageClass>STANDARD</StorageClass></Contents>`
    )
    .join("")

const listV1 = async (ctx: Ctx, bucket: string) => {
  const maxKeys = parseMaxKeys(ctx, "max-keys")
  if (maxKeys === undefined) return s3Error(ctx, 400, "InvalidArgument", "Provided max-keys not an integer or within integer range")
  const prefix = ctx.query.get("prefix") ?? ""
  const delimiter = ctx.query.get("delimiter") ?? ""
  const marker = ctx.query.get("marker") ?? ""
  const enc = encoder(ctx)
  const page = await store.listObjects(ctx.state.root, bucket, { prefix, delimiter, after: marker, maxKeys })
  const body =
    `${XML_DECL_S3}<ListBucketResult xmlns="${S3_XMLNS}">` +
    el("Name", bucket) +
    el("Prefix", enc(prefix)) +
    el("Marker", enc(marker)) +
    el("MaxKeys", maxKeys) +
    (delimiter === "" ? "" : el("Delimiter", enc(delimiter))) +
    (ctx.query.get("encoding-type") === "url" ? el("EncodingType", "url") : "") +
    el("IsTruncated", page.truncated) +
    (page.nextMarker === undefined ? "" : el("NextMarker", enc(page.nextMarker))) +
    contents(page.objects, enc, true) +
    page.prefixes.map((p) => `<CommonPrefixes>${el("Prefix", enc(p))}</CommonPrefixes>`).join("") +
    `</ListBucketResult>`
  sendXml(ctx, 200, body)
}

const deleteMany = async (ctx: Ctx, bucket: string) => {
  const chunks: Buffer[] = []
  let size = 0
  for await (const c of ctx.req) {
    size += (c as Buffer).length
    if (size > 2 * 1024 * 1024) return s3Error(ctx, 400, "MalformedXML", "The Delete request body is too large")
    chunks.push(c as Buffer)
  }
  let doc: unknown
  try {
    doc = new XMLParser({ isArray: (name) => name === "Object" }).parse(Buffer.concat(chunks).toString("utf8"))
  } catch {
    return s3Error(ctx, 400, "MalformedXML", "The XML you provided was not well-formed")
  }
  const del = (doc as { Delete?: { Object?: Array<{ Key?: unknown }>; Quiet?: unknown } }).Delete
  if (!del || !Array.isArray(del.Object)) return s3Error(ctx, 400, "MalformedXML", "The XML you provided was not well-formed")
  const quiet = String(del.Quiet) === "true"
  let out = ""
  for (const o of del.Object) {
    const key = String(o.Key ?? "")
    if (keyProblem(key) !== undefined) {
      out += `<Error>${el("Key", key)}<Code>InvalidArgument</Code><Message>Invalid key</Message></Error>`
      continue
    }
    await store.deleteObject(ctx.state.root, bucket, key)
    if (!quiet) out += `<Deleted>${el("Key", key)}</Deleted>`
  }
  sendXml(ctx, 200, `${XML_DECL_S3}<DeleteResult xmlns="${S3_XMLNS}">${out}</DeleteResult>`)
}

const bucketOp = async (ctx: Ctx, bucket: string) => {
  const root = ctx.state.root
  switch (ctx.method) {
    case "PUT": {
      discardBody(ctx)
      if ([...ctx.query.keys()].length > 0) return notImplemented(ctx)
      await store.createBucket(root, bucket)
      // us-east-1 semantics: re-creating a bucket you own succeeds.
      return sendEmpty(ctx, 200, { Location: `/${bucket}` })
    }
    case "DELETE": {
      const r = await store.deleteBucket(root, bucket, false)
      if (r === "missing") return noSuchBucket(ctx, bucket)
      if (r === "not-empty") {
        return s3Error(ctx, 409, "BucketNotEmpty", "The bucket you tried to delete is not empty", { BucketName: bucket })
      }
      return sendEmpty(ctx, 204)
    }
    case "HEAD":
      if (!(await store.bucketExists(root, bucket))) return sendEmpty(ctx, 404)
      return sendEmpty(ctx, 200, { "x-amz-bucket-region": "us-east-1" })
    case "GET": {
      if (!(await store.bucketExists(root, bucket))) return noSuchBucket(ctx, bucket)
      if (ctx.query.has("location")) {
        return sendXml(ctx, 200, `${XML_DECL_S3}<LocationConstraint xmlns="${S3_XMLNS}"/>`)
      }
      if (ctx.query.has("uploads")) return listUploads(ctx, bucket)
      for (const sub of ["acl", "policy", "versioning", "tagging", "versions", "lifecycle", "cors"]) {
        if (ctx.query.has(sub)) return notImplemented(ctx)
      }
      return ctx.query.get("list-type") === "2" ? listV2(ctx, bucket) : listV1(ctx, bucket)
    }
    case "POST":
      if (!(await store.bucketExists(root, bucket))) return noSuchBucket(ctx, bucket)
      if (ctx.query.has("delete")) return deleteMany(ctx, bucket)
      return notImplemented(ctx)
    default:
      return methodNotAllowed(ctx)
  }
}

const notImplemented = (ctx: Ctx) =>
  s3Error(ctx, 501, "NotImplemented", "A header or query you provided implies functionality the Talon origin stub does not implement")

const methodNotAllowed = (ctx: Ctx) =>
  s3Error(ctx, 405, "MethodNotAllowed", `The specified method ${ctx.method} is not allowed against this resource.`)

const putOp = async (ctx: Ctx, bucket: string, key: string) => {
  for (const sub of ["tagging", "acl", "retention", "legal-hold"]) {
    if (ctx.query.has(sub)) return notImplemented(ctx)
  }
  if (ctx.query.has("uploadId") || ctx.query.has("partNumber")) return uploadPart(ctx, bucket, key)
  const metadata = metadataFromHeaders(ctx.req.headers, S3_META_PREFIX)
  const tooLarge = s3MetadataProblem(metadata)
  if (tooLarge !== undefined) {
    discardBody(ctx)
    return s3Error(ctx, 400, "MetadataTooLarge", tooLarge, { Key: key })
  }
  if (header(ctx, "x-amz-copy-source") !== undefined) return copyObject(ctx, bucket, key)
  const body = s3Body(ctx)
  try {
    const info = await store.putObject(ctx.state.root, bucket, key, ctx.req, {
      transforms: body.transforms,
      verify: body.verify,
      conditions: { ifMatch: header(ctx, "if-match"), ifNoneMatch: header(ctx, "if-none-match") },
      contentEtag: () => md5Hex(body.digester)
    })
    ctx.state.stats.bytesReceived += body.digester.length
    await saveProps(ctx.state.root, bucket, key, { etag: info.etag, metadata: metadata ?? {}, headers: {} })
    sendEmpty(ctx, 200, { ETag: info.etag, ...body.echo() })
  } catch (e) {
    const bad = bodyError(e)
    if (bad) return s3Error(ctx, bad.status, bad.code, bad.message)
    if (e instanceof store.PutPreconditionFailed) {
      return s3Error(ctx, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold", { Key: key })
    }
    if (e instanceof store.PutConflict) return s3Error(ctx, 409, "KeyConflict", e.message, { Key: key })
    if (ctx.req.destroyed || ctx.req.readableAborted) return
    throw e
  }
}

/** GetObjectTagging: the stub stores no tags (PutObjectTagging is refused), so every object has none. */
const objectTagging = async (ctx: Ctx, bucket: string, key: string) => {
  const obj = await store.openObject(ctx.state.root, bucket, key)
  if (!obj) return s3Error(ctx, 404, "NoSuchKey", "The specified key does not exist.", { Key: key })
  await obj.handle.close()
  sendXml(ctx, 200, `${XML_DECL_S3}<Tagging xmlns="${S3_XMLNS}"><TagSet></TagSet></Tagging>`)
}

const objectOp = async (ctx: Ctx, bucket: string, key: string) => {
  const root = ctx.state.root
  const problem = keyProblem(key)
  if (problem !== undefined) {
    return problem === "too-long" || problem === "segment-too-long"
      ? s3Error(ctx, 400, "KeyTooLongError", "Your key is too long", { Key: key })
      : s3Error(ctx, 400, "InvalidURI", "Couldn't parse the specified URI: keys with '.' or '..' segments or NUL are rejected")
  }
  if (!(await store.bucketExists(root, bucket))) {
    if (ctx.method === "HEAD") return sendEmpty(ctx, 404)
    return noSuchBucket(ctx, bucket)
  }
  switch (ctx.method) {
    case "GET":
    case "HEAD": {
      if (ctx.query.has("uploadId")) return listParts(ctx, bucket, key)
      if (ctx.query.has("tagging") && ctx.method === "GET") return objectTagging(ctx, bucket, key)
      for (const sub of ["tagging", "acl", "attributes", "retention", "legal-hold", "torrent"]) {
        if (ctx.query.has(sub)) return notImplemented(ctx)
      }
      const obj = await store.openObject(root, bucket, key)
      if (!obj) {
        if (ctx.method === "HEAD") return sendEmpty(ctx, 404)
        return s3Error(ctx, 404, "NoSuchKey", "The specified key does not exist.", { Key: key })
      }
      const props = await readProps(root, bucket, key, obj.etag)
      if (props === undefined || Object.keys(props.metadata).length === 0) return serveObject(ctx, obj, header(ctx, "range"), dialect)
      const meta = metadataHeaders(props.metadata, S3_META_PREFIX)
      return serveObject(ctx, obj, header(ctx, "range"), { ...dialect, objectHeaders: (o) => ({ ...dialect.objectHeaders(o), ...meta }) })
    }
    case "PUT":
      return putOp(ctx, bucket, key)
    case "POST":
      if (ctx.query.has("uploads")) {
        const tooBig = s3MetadataProblem(metadataFromHeaders(ctx.req.headers, S3_META_PREFIX))
        if (tooBig !== undefined) {
          discardBody(ctx)
          return s3Error(ctx, 400, "MetadataTooLarge", tooBig, { Key: key })
        }
        return createUpload(ctx, bucket, key)
      }
      if (ctx.query.has("uploadId")) return completeUpload(ctx, bucket, key)
      discardBody(ctx)
      return notImplemented(ctx)
    case "DELETE":
      discardBody(ctx)
      if (ctx.query.has("uploadId")) return abortUpload(ctx, bucket, key)
      await store.deleteObject(root, bucket, key)
      return sendEmpty(ctx, 204)
    default:
      return methodNotAllowed(ctx)
  }
}

/** Entry point: `bucket` from the host or first path segment, `rawKey` still URL-encoded. */
export const handleS3 = async (ctx: Ctx, bucket: string | undefined, rawKey: string | undefined): Promise<void> => {
  if (bucket === undefined || bucket === "") {
    if (ctx.method !== "GET") return methodNotAllowed(ctx)
    const buckets = await store.listBuckets(ctx.state.root)
    return sendXml(
      ctx,
      200,
      `${XML_DECL_S3}<ListAllMyBucketsResult xmlns="${S3_XMLNS}">${OWNER}<Buckets>${buckets
        .map((b) => `<Bucket>${el("Name", b.name)}${el("CreationDate", b.created.toISOString())}</Bucket>`)
        .join("")}</Buckets></ListAllMyBucketsResult>`
    )
  }
  if (!isValidBucket(bucket)) return s3Error(ctx, 400, "InvalidBucketName", "The specified bucket is not valid.", { BucketName: bucket })
  if (rawKey === undefined || rawKey === "") return bucketOp(ctx, bucket)
  const key = decodePath(rawKey)
  if (key === undefined) return s3Error(ctx, 400, "InvalidURI", "Couldn't parse the specified URI.")
  return objectOp(ctx, bucket, key)
}
