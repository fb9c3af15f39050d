/**
 * The S3 front end: HeadBucket, GetBucketLocation (answered locally), ListObjects V1/V2
 * (one bounded page, passed to the origin), HeadObject, GetObject (one range,
 * conditions), PutObject (plain or aws-chunked), DeleteObject. Bucket from the path
 * or a `<bucket>.localhost` Host (resolved by the shared target split). Everything else
 * is refused with NotImplemented rather than guessed at.
 */
import { createHash } from "node:crypto"
import { Either } from "effect"
import { quoteEtag } from "../backend/etag.js"
import { errorDocument } from "../backend/xml.js"
import { Backend, type ObjectId } from "../core/ids.js"
import { AwsChunkedDecoder, AwsChunkedError } from "../origin/awsChunked.js"
import { decodePath, discardBody, header, sendEmpty, sendXml } from "../origin/context.js"
import { isValidBucket } from "../origin/layout.js"
import { s3Error, s3ReadFailure } from "../origin/s3.js"
import { algorithmsFor, Digester, DigestMismatch, verifyDigests } from "../origin/upload.js"
import { S3_XMLNS, XML_DECL_S3 } from "../origin/xml.js"
import { BodyTooLarge, type GwCtx, readBody, run } from "./context.js"
import { answerBackendError, answerWriteError, type Dialect, NO_HEADERS, serveRead } from "./objectOps.js"

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

const bucketOp = async (ctx: GwCtx, bucket: string) => {
  if (ctx.method === "GET" && ctx.query.has("location")) {
    discardBody(ctx)
    if (unexpectedKeys(ctx, new Set(["location"]))) return s3NotImplemented(ctx, "unsupported query on GetBucketLocation")
    return location(ctx)
  }
  if (ctx.method === "GET") {
    discardBody(ctx)
    if (unexpectedKeys(ctx, LIST_KEYS)) return s3NotImplemented(ctx, `bucket sub-resource ?${[...ctx.query.keys()].join("&")}`)
    return list(ctx, bucket)
  }
  if (ctx.method === "HEAD") {
    discardBody(ctx)
    if (unexpectedKeys(ctx, NONE)) return s3NotImplemented(ctx, "query on HeadBucket")
    const r = await run(ctx, ctx.g.origin.headBucket(bucket))
    if (Either.isLeft(r)) return answerBackendError(ctx, s3Dialect, r.left, undefined)
    const status = r.right.status
    if (status === 200) return sendEmpty(ctx, 200, { "x-amz-bucket-region": ctx.g.options.region })
    if (status === 404 || status === 403) return sendEmpty(ctx, status)
    return sendEmpty(ctx, 503)
  }
  if (ctx.method === "PUT" || ctx.method === "DELETE" || ctx.method === "POST") {
    return s3NotImplemented(ctx, `${ctx.method} on a bucket (create buckets and delete objects in bulk at the origin)`)
  }
  return methodNotAllowed(ctx)
}

const ECHOED_CHECKSUMS = ["x-amz-checksum-crc32", "x-amz-checksum-sha1", "x-amz-checksum-sha256"]
const HEX_SHA256 = /^[0-9a-f]{64}$/

const putObject = async (ctx: GwCtx, object: ObjectId) => {
  const g = ctx.g
  for (const name of ["x-amz-copy-source", "if-match", "if-none-match", "x-amz-tagging", "x-amz-website-redirect-location"]) {
    if (header(ctx, name) !== undefined) return s3NotImplemented(ctx, `${name} on PutObject`)
  }
  if (Object.keys(ctx.req.headers).some((h) => h.startsWith("x-amz-meta-") || h.startsWith("x-amz-server-side-encryption"))) {
    return s3NotImplemented(ctx, "user metadata or server-side encryption headers on PutObject")
  }
  const sha = header(ctx, "x-amz-content-sha256") ?? ""
  if (g.options.auth && sha.startsWith("STREAMING-") && sha !== "STREAMING-UNSIGNED-PAYLOAD-TRAILER") {
    // Chunk signatures would have to be verified one by one; the SDKs' default needs none.
    return s3NotImplemented(ctx, `chunk-signed uploads (${sha}); send STREAMING-UNSIGNED-PAYLOAD-TRAILER or a signed payload hash`)
  }
  const chunked = sha.startsWith("STREAMING-") || (header(ctx, "content-encoding") ?? "").includes("aws-chunked")
  const limit = g.options.maxBodyBytes
  const declared = Number(header(ctx, chunked ? "x-amz-decoded-content-length" : "content-length") ?? 0)
  const tooLarge = () =>
    s3Error(ctx, 400, "EntityTooLarge", `Your proposed upload exceeds the maximum allowed object size (${limit} bytes through this gateway)`, {
      MaxSizeAllowed: limit
    })
  if (declared > limit) return tooLarge()
  const decoder = chunked ? new AwsChunkedDecoder() : undefined
  const digester = new Digester(algorithmsFor(ctx.req.headers))
  let body: Buffer
  try {
    body = await readBody(ctx.req, limit, decoder ? [decoder, digester] : [digester])
    const decodedLength = header(ctx, "x-amz-decoded-content-length")
    if (decodedLength !== undefined && Number(decodedLength) !== body.length) {
      throw new AwsChunkedError(`decoded ${body.length} bytes, x-amz-decoded-content-length says ${decodedLength}`)
    }
    verifyDigests(digester, ctx.req.headers, decoder?.trailers ?? new Map())
  } catch (e) {
    if (e instanceof BodyTooLarge) return tooLarge()
    if (e instanceof AwsChunkedError) return s3Error(ctx, 400, "IncompleteBody", e.message)
    if (e instanceof DigestMismatch) return s3Error(ctx, 400, "BadDigest", e.message)
    if (ctx.req.destroyed || ctx.req.readableAborted) return
    throw e
  }
  if (HEX_SHA256.test(sha) && createHash("sha256").update(body).digest("hex") !== sha) {
    return s3Error(ctx, 400, "XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.")
  }
  const r = await run(ctx, g.backend.put(object, body))
  if (Either.isLeft(r)) {
    if (r.left._tag === "BackendNotFound") g.stats.written(object)
    return r.left._tag === "BackendNotFound"
      ? s3Error(ctx, 404, "NoSuchBucket", "The specified bucket does not exist", { BucketName: object.bucket })
      : answerWriteError(ctx, s3Dialect, r.left, object)
  }
  g.stats.written(object)
  const echo: Record<string, string> = {}
  for (const name of ECHOED_CHECKSUMS) {
    const v = decoder?.trailers.get(name) ?? header(ctx, name)
    if (v !== undefined) echo[name] = v
  }
  sendEmpty(ctx, 200, { ETag: quoteEtag(r.right.version), ...echo })
}

const deleteObject = async (ctx: GwCtx, object: ObjectId) => {
  discardBody(ctx)
  for (const name of ["if-match", "x-amz-mfa"]) {
    if (header(ctx, name) !== undefined) return s3NotImplemented(ctx, `${name} on DeleteObject`)
  }
  const r = await run(ctx, ctx.g.backend.delete(object))
  if (Either.isLeft(r)) return answerWriteError(ctx, s3Dialect, r.left, object)
  ctx.g.stats.written(object)
  sendEmpty(ctx, 204)
}

const objectOp = async (ctx: GwCtx, bucket: string, key: string) => {
  if (unexpectedKeys(ctx, NONE)) {
    discardBody(ctx)
    return s3NotImplemented(ctx, `object sub-resource or option ?${[...ctx.query.keys()].join("&")}`)
  }
  const object: ObjectId = { backend: Backend.S3, bucket, objectPath: key }
  switch (ctx.method) {
    case "GET":
    case "HEAD":
      discardBody(ctx)
      return serveRead(ctx, s3Dialect, object, header(ctx, "range"))
    case "PUT":
      return putObject(ctx, object)
    case "DELETE":
      return deleteObject(ctx, object)
    case "POST":
      discardBody(ctx)
      return s3NotImplemented(ctx, "POST on an object (multipart uploads, restores, selects)")
    default:
      discardBody(ctx)
      return methodNotAllowed(ctx)
  }
}

/** Entry point: `bucket` from the Host or the first path segment, `rawKey` still percent-encoded. */
export const handleS3 = async (ctx: GwCtx, bucket: string | undefined, rawKey: string | undefined): Promise<void> => {
  if (bucket === undefined || bucket === "") {
    discardBody(ctx)
    return s3NotImplemented(ctx, "ListBuckets (list buckets at the origin)")
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
