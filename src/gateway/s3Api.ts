/**
 * The S3 front end. Reads go through the route: HeadObject, GetObject (one range,
 * conditions); ListObjects V1/V2 (one bounded page) and HeadBucket ask the origin;
 * GetBucketLocation is answered locally. Every other request (PutObject, multipart
 * uploads, CopyObject, DeleteObject(s), CreateBucket, ListBuckets, ListParts, bucket
 * sub-resources) is forwarded to the origin with the body streaming through
 * (passThrough.ts), and invalidates the objects it may change. Bucket from the path or a
 * `<bucket>.localhost` Host (resolved by the shared target split).
 */
import { Either } from "effect"
import { errorDocument } from "../backend/xml.js"
import { Backend, type ObjectId } from "../core/ids.js"
import { metadataFromHeaders, S3_META_PREFIX, s3MetadataProblem } from "../core/userMetadata.js"
import { decodePath, discardBody, header, sendEmpty, sendXml } from "../http/context.js"
import { isValidBucket } from "../http/names.js"
import { s3Error, s3ReadFailure } from "../http/s3Errors.js"
import { S3_XMLNS, XML_DECL_S3 } from "../http/xml.js"
import { BodyTooLarge, type GwCtx, readBody, run } from "./context.js"
import { answerBackendError, type Dialect, NO_HEADERS, serveRead } from "./objectOps.js"
import { MAX_PART_BYTES, passThrough } from "./passThrough.js"
import { grantedNamespaces, onlyGranted } from "./identities.js"

/** Presigned URLs carry their signature (and hoisted x-amz-* headers) as query parameters. */
const isPresignKey = (k: string) => k.length > 6 && k.slice(0, 6).toLowerCase() === "x-amz-"
/** The AWS SDKs tag object requests with `?x-id=<Operation>`; it selects nothing. */
const IGNORED_KEYS = new Set(["x-id"])
const LIST_KEYS = new Set([
  "list-type",
  "prefix",
  "delimiter",
  "max-keys",
  "continuation-token",
  "start-after",
  "marker",
  "encoding-type",
  "fetch-owner"
])

/** Query keys beyond those an operation understands (presign and SDK tags aside). */
const unexpectedKeys = (ctx: GwCtx, allowed: ReadonlySet<string>): boolean => {
  for (const k of ctx.query.keys()) if (!allowed.has(k) && !isPresignKey(k) && !IGNORED_KEYS.has(k)) return true
  return false
}

const NONE = new Set<string>()

const bucketExists = async (ctx: GwCtx, bucket: string): Promise<boolean | undefined> => {
  const r = await run(ctx, ctx.g.origin.headBucket(bucket))
  return Either.isRight(r) ? (r.right.status === 404 ? false : r.right.status === 200 ? true : undefined) : undefined
}

export const s3Dialect: Dialect = {
  readHeaders: NO_HEADERS,
  metaPrefix: S3_META_PREFIX,
  error: (ctx, status, code, message, headers = {}) => s3Error(ctx, status, code, message, {}, headers),
  readFailure: (ctx, failure, key, size, range) => s3ReadFailure(ctx, failure, key, size, range),
  notFound: async (ctx, object) => {
    if (ctx.method === "HEAD") return sendEmpty(ctx, 404)
    if ((await bucketExists(ctx, object.bucket)) === false) {
      return s3Error(ctx, 404, "NoSuchBucket", "The specified bucket does not exist", { BucketName: object.bucket })
    }
    s3Error(ctx, 404, "NoSuchKey", "The specified key does not exist.", { Key: object.objectPath })
  },
  codes: {
    busy: "SlowDown",
    unavailable: "ServiceUnavailable",
    timeout: "ServiceUnavailable",
    internal: "InternalError",
    notImplemented: "NotImplemented",
    precondition: "PreconditionFailed"
  }
}

export const s3NotImplemented = (ctx: GwCtx, what: string) =>
  s3Error(ctx, 501, "NotImplemented", `A header or query you provided implies functionality the Talon gateway does not implement: ${what}`)

const methodNotAllowed = (ctx: GwCtx) =>
  s3Error(ctx, 405, "MethodNotAllowed", `The specified method ${ctx.method} is not allowed against this resource.`)

const location = (ctx: GwCtx) => {
  const region = ctx.g.options.region
  sendXml(
    ctx,
    200,
    region === "us-east-1"
      ? `${XML_DECL_S3}<LocationConstraint xmlns="${S3_XMLNS}"/>`
      : `${XML_DECL_S3}<LocationConstraint xmlns="${S3_XMLNS}">${region}</LocationConstraint>`
  )
}

const list = async (ctx: GwCtx, bucket: string) => {
  const cap = ctx.g.options.maxListKeys
  const query: Record<string, string> = {}
  for (const [k, v] of ctx.query) if (LIST_KEYS.has(k)) query[k] = v
  const asked = query["max-keys"]
  // One bounded page: the origin is never asked for more than the cap.
  if (asked === undefined || (/^\d+$/.test(asked) && Number(asked) > cap)) query["max-keys"] = String(cap)
  const r = await run(ctx, ctx.g.origin.listS3(bucket, query))
  if (Either.isLeft(r)) return answerBackendError(ctx, s3Dialect, r.left, undefined)
  const { status, body } = r.right
  if (status === 200) return sendXml(ctx, 200, body.toString("utf8"))
  const doc = errorDocument(body.toString("utf8"))
  if (status === 401 || status === 403) {
    return s3Error(ctx, 500, "InternalError", `The origin refused the gateway's own credentials (${doc.code ?? status}); fix TALON_S3_* on the gateway.`)
  }
  const extra = status === 404 ? { BucketName: bucket } : {}
  s3Error(ctx, status, doc.code ?? "InternalError", doc.message ?? `origin answered ${status}`, extra)
}

/** The keys a DeleteObjects body names (small: S3 caps it at 1000 keys), read whole so each can be invalidated. */
const MAX_DELETE_BODY = 2 * 1024 * 1024

const deleteObjects = async (ctx: GwCtx, bucket: string) => {
  let body: Buffer
  try {
    body = await readBody(ctx.req, MAX_DELETE_BODY, [])
  } catch (e) {
    if (e instanceof BodyTooLarge) return s3Error(ctx, 400, "MalformedXML", `The Delete request body is larger than ${MAX_DELETE_BODY} bytes; delete at most 1000 keys per request`)
    if (ctx.req.destroyed || ctx.req.readableAborted) return
    throw e
  }
  const keys = [...body.toString("utf8").matchAll(/<Key>([^<]*)<\/Key>/g)].map((m) => unescapeXml(m[1]!))
  const invalidate = keys.map((objectPath): ObjectId => ({ backend: Backend.S3, bucket, objectPath }))
  return passThrough(ctx, s3Dialect, { provider: "s3", bucket, key: undefined, body, invalidate })
}

const unescapeXml = (s: string) =>
  s.replace(/&(lt|gt|quot|apos|amp|#x?[0-9a-fA-F]+);/g, (m, e: string) =>
    e === "lt" ? "<" : e === "gt" ? ">" : e === "quot" ? '"' : e === "apos" ? "'" : e === "amp" ? "&" : e.startsWith("#x") ? String.fromCodePoint(parseInt(e.slice(2), 16)) : e.startsWith("#") ? String.fromCodePoint(Number(e.slice(1))) : m
  )

const bucketOp = async (ctx: GwCtx, bucket: string) => {
  if (ctx.method === "GET" && ctx.query.has("location")) {
    discardBody(ctx)
    if (unexpectedKeys(ctx, new Set(["location"]))) return s3NotImplemented(ctx, "unsupported query on GetBucketLocation")
    return location(ctx)
  }
  if (ctx.method === "GET" && !unexpectedKeys(ctx, LIST_KEYS)) {
    discardBody(ctx)
    return list(ctx, bucket)
  }
  if (ctx.method === "HEAD") {
    discardBody(ctx)
    if (unexpectedKeys(ctx, NONE)) return s3NotImplemented(ctx, "query on HeadBucket")
    const r = await run(ctx, ctx.g.origin.headBucket(bucket))
    if (Either.isLeft(r)) return answerBackendError(ctx, s3Dialect, r.left, undefined)
    const status = r.right.status
    if (status === 200) return sendEmpty(ctx, 200, { "x-amz-bucket-region": ctx.g.options.region })
    return sendEmpty(ctx, status)
  }
  if (ctx.method === "POST" && ctx.query.has("delete")) return deleteObjects(ctx, bucket)
  if (ctx.method === "GET" || ctx.method === "PUT" || ctx.method === "DELETE" || ctx.method === "POST") {
    // CreateBucket, DeleteBucket, ListMultipartUploads and the other bucket sub-resources are the origin's.
    return passThrough(ctx, s3Dialect, { provider: "s3", bucket, key: undefined, maxBody: MAX_DELETE_BODY })
  }
  discardBody(ctx)
  return methodNotAllowed(ctx)
}

/** Object sub-resources read at the origin rather than through the cache (ListParts and the like). */
const ORIGIN_GET_KEYS = ["uploadId", "tagging", "acl", "attributes"]

const objectOp = async (ctx: GwCtx, bucket: string, key: string) => {
  const object: ObjectId = { backend: Backend.S3, bucket, objectPath: key }
  const pass = (maxBody: number | undefined) =>
    passThrough(ctx, s3Dialect, { provider: "s3", bucket, key, maxBody, invalidate: [object] })
  const sha = header(ctx, "x-amz-content-sha256") ?? ""
  if (ctx.g.options.auth && sha.startsWith("STREAMING-") && sha !== "STREAMING-UNSIGNED-PAYLOAD-TRAILER") {
    discardBody(ctx)
    // Chunk signatures would have to be verified one by one; the SDKs' default needs none.
    return s3NotImplemented(ctx, `chunk-signed uploads (${sha}); send STREAMING-UNSIGNED-PAYLOAD-TRAILER or a signed payload hash`)
  }
  switch (ctx.method) {
    case "GET":
    case "HEAD":
      if (ORIGIN_GET_KEYS.some((k) => ctx.query.has(k))) return pass(undefined)
      discardBody(ctx)
      if (unexpectedKeys(ctx, NONE)) return s3NotImplemented(ctx, `object sub-resource or option ?${[...ctx.query.keys()].join("&")}`)
      return serveRead(ctx, s3Dialect, object, header(ctx, "range"))
    case "PUT": {
      // A part may be as large as S3 allows; a whole object as large as this gateway is configured for.
      const part = ctx.query.has("uploadId") || ctx.query.has("partNumber")
      if (!part && metadataTooLarge(ctx, key)) return
      return pass(part ? MAX_PART_BYTES : ctx.g.options.maxBodyBytes)
    }
    case "POST":
      if (ctx.query.has("uploads") && metadataTooLarge(ctx, key)) return
      return pass(MAX_DELETE_BODY)
    case "DELETE":
      return pass(undefined)
    default:
      discardBody(ctx)
      return methodNotAllowed(ctx)
  }
}

/**
 * S3's 2 KB ceiling on `x-amz-meta-*`, answered here whatever the origin would do, so an object
 * written through the gateway always reads back with all the metadata it was given.
 */
const metadataTooLarge = (ctx: GwCtx, key: string): boolean => {
  const problem = s3MetadataProblem(metadataFromHeaders(ctx.req.headers, S3_META_PREFIX))
  if (problem === undefined) return false
  discardBody(ctx)
  s3Error(ctx, 400, "MetadataTooLarge", problem, { Key: key })
  return true
}

/** Entry point: `bucket` from the Host or the first path segment, `rawKey` still percent-encoded. */
export const handleS3 = async (ctx: GwCtx, bucket: string | undefined, rawKey: string | undefined): Promise<void> => {
  if (bucket === undefined || bucket === "") {
    if (ctx.method !== "GET") {
      discardBody(ctx)
      return methodNotAllowed(ctx)
    }
    // With principals, ListBuckets names only the buckets the caller holds a grant in.
    const visible = grantedNamespaces(ctx.g.principals?.current(), ctx.principal, "s3")
    return passThrough(ctx, s3Dialect, {
      provider: "s3",
      bucket: "",
      key: undefined,
      ...(visible === undefined ? {} : { rewrite: (xml: string) => onlyGranted(xml, "Bucket", visible) })
    })
  }
  if (!isValidBucket(bucket)) {
    discardBody(ctx)
    return s3Error(ctx, 400, "InvalidBucketName", "The specified bucket is not valid.", { BucketName: bucket })
  }
  if (rawKey === undefined || rawKey === "") return bucketOp(ctx, bucket)
  const key = decodePath(rawKey)
  if (key === undefined) {
    discardBody(ctx)
    return s3Error(ctx, 400, "InvalidURI", "Couldn't parse the specified URI.")
  }
  return objectOp(ctx, bucket, key)
}
