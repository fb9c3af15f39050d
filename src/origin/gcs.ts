/**
 * The GCS JSON API front end of the origin stub, over the same stored objects as S3 and
 * Azure (bucket = directory):
 *  - `GET /storage/v1/b/<bucket>/o/<object>`: the object resource; with `alt=media` (or under
 *    `/download/storage/v1/…`) its bytes, honouring Range and `ifGenerationMatch`;
 *  - `GET /storage/v1/b/<bucket>/o`: listing with prefix, delimiter, maxResults, pageToken;
 *  - `POST /upload/storage/v1/b/<bucket>/o?uploadType=media&name=<object>`: a media upload;
 *  - `DELETE /storage/v1/b/<bucket>/o/<object>`.
 * Object names are one percent-encoded path segment (`/` is `%2F`), as the JSON API wants.
 * A generation is the object's mtime in microseconds (store.ts), so every overwrite changes it.
 *
 * Unlike the S3 and Azure front ends, every request needs a bearer token the stub issued
 * (identity.ts) and still honours; without one the answer is 401, as GCS gives.
 */
import { decodePath, header, sendEmpty } from "../http/context.js"
import { isValidBucket } from "../http/names.js"
import type { ReadFailure } from "../http/readDecision.js"
import type { Ctx } from "./context.js"
import type { RequestKind } from "./faults.js"
import { keyProblem } from "./layout.js"
import { serveObject, type ReadDialect } from "./objectRead.js"
import * as store from "./store.js"

export const GCS_PREFIXES = ["/storage/v1/", "/download/storage/v1/", "/upload/storage/v1/"] as const

export const isGcsPath = (pathname: string): boolean => GCS_PREFIXES.some((p) => pathname.startsWith(p))

const sendJson = (ctx: Ctx, status: number, value: unknown, headers: Record<string, string> = {}) => {
  const body = Buffer.from(JSON.stringify(value))
  ctx.res.writeHead(status, { ...headers, "Content-Type": "application/json; charset=UTF-8", "Content-Length": body.length })
  ctx.res.end(ctx.method === "HEAD" ? undefined : body)
}

export const gcsError = (ctx: Ctx, status: number, reason: string, message: string, headers: Record<string, string> = {}) => {
  ctx.req.resume()
  sendJson(ctx, status, { error: { code: status, message, errors: [{ message, domain: "global", reason }] } }, headers)
}

const readFailure = (ctx: Ctx, failure: ReadFailure, size: number) =>
  failure === "unsatisfiable"
    ? gcsError(ctx, 416, "requestedRangeNotSatisfiable", "The requested range cannot be satisfied.", { "Content-Range": `bytes */${size}` })
    : failure === "multiple-ranges"
      ? gcsError(ctx, 400, "invalid", "Multiple ranges are not supported.")
      : gcsError(ctx, 412, "conditionNotMet", "At least one of the pre-conditions you specified did not hold.")

const generationHeaders = (obj: store.ObjectInfo): Record<string, string> => ({
  "x-goog-generation": obj.generation,
  "x-goog-metageneration": "1",
  "x-goog-stored-content-length": String(obj.size),
  "x-goog-storage-class": "STANDARD"
})

const dialect: ReadDialect = {
  objectHeaders: generationHeaders,
  fail: (ctx, failure, obj) => readFailure(ctx, failure, obj.size)
}

const resource = (bucket: string, obj: store.ObjectInfo) => ({
  kind: "storage#object",
  id: `${bucket}/${obj.key}/${obj.generation}`,
  name: obj.key,
  bucket,
  generation: obj.generation,
  metageneration: "1",
  contentType: "application/octet-stream",
  storageClass: "STANDARD",
  size: String(obj.size),
  etag: obj.etag.replace(/"/g, ""),
  timeCreated: obj.created.toISOString(),
  updated: obj.lastModified.toISOString()
})

const toPageToken = (marker: string) => Buffer.from(marker, "utf8").toString("base64url")
const fromPageToken = (token: string): string | undefined =>
  /^[A-Za-z0-9_-]+$/.test(token) ? Buffer.from(token, "base64url").toString("utf8") : undefined

const list = async (ctx: Ctx, bucket: string) => {
  const rawMax = ctx.query.get("maxResults")
  if (rawMax !== null && !/^\d+$/.test(rawMax)) return gcsError(ctx, 400, "invalid", `Invalid value for maxResults: ${rawMax}`)
  const maxKeys = rawMax === null || Number(rawMax) === 0 ? 1000 : Math.min(Number(rawMax), 1000)
  const token = ctx.query.get("pageToken")
  const after = token === null || token === "" ? "" : fromPageToken(token)
  if (after === undefined) return gcsError(ctx, 400, "invalid", "Invalid pageToken.")
  const prefix = ctx.query.get("prefix") ?? ""
  const delimiter = ctx.query.get("delimiter") ?? ""
  const page = await store.listObjects(ctx.state.root, bucket, { prefix, delimiter, after, maxKeys })
  sendJson(ctx, 200, {
    kind: "storage#objects",
    ...(page.prefixes.length === 0 ? {} : { prefixes: page.prefixes }),
    ...(page.objects.length === 0 ? {} : { items: page.objects.map((o) => resource(bucket, o)) }),
    ...(page.nextMarker === undefined ? {} : { nextPageToken: toPageToken(page.nextMarker) })
  })
}

const read = async (ctx: Ctx, bucket: string, key: string, media: boolean) => {
  const wanted = ctx.query.get("ifGenerationMatch")
  if (!media) {
    const info = await store.statObject(ctx.state.root, bucket, key)
    if (info === undefined) return gcsError(ctx, 404, "notFound", `No such object: ${bucket}/${key}`)
    if (wanted !== null && wanted !== info.generation) return readFailure(ctx, "precondition-failed", info.size)
    return sendJson(ctx, 200, resource(bucket, info), generationHeaders(info))
  }
  const obj = await store.openObject(ctx.state.root, bucket, key)
  if (obj === undefined) return gcsError(ctx, 404, "notFound", `No such object: ${bucket}/${key}`)
  // Judged on the opened file, so the bytes served are those of the generation checked.
  if (wanted !== null && wanted !== obj.generation) {
    await obj.handle.close().catch(() => undefined)
    return readFailure(ctx, "precondition-failed", obj.size)
  }
  await serveObject(ctx, obj, header(ctx, "range"), dialect)
}

const upload = async (ctx: Ctx, bucket: string) => {
  if (ctx.query.get("uploadType") !== "media") {
    return gcsError(ctx, 400, "invalid", "The origin stub accepts only uploadType=media.")
  }
  const key = ctx.query.get("name") ?? ""
  if (keyProblem(key) !== undefined) return gcsError(ctx, 400, "invalid", `Invalid object name: ${JSON.stringify(key)}`)
  const wanted = ctx.query.get("ifGenerationMatch")
  if (wanted !== null) {
    const current = await store.statObject(ctx.state.root, bucket, key)
    // 0 means "only if there is no live object", as in GCS.
    if ((wanted === "0" && current !== undefined) || (wanted !== "0" && current?.generation !== wanted)) {
      return readFailure(ctx, "precondition-failed", 0)
    }
  }
  let info: store.ObjectInfo
  try {
    info = await store.putObject(ctx.state.root, bucket, key, ctx.req)
  } catch (e) {
    if (e instanceof store.PutConflict) return gcsError(ctx, 409, "conflict", e.message)
    throw e
  }
  sendJson(ctx, 200, resource(bucket, info), generationHeaders(info))
}

/** `/storage/v1/b/<bucket>/o[/<object>]` (and the download/upload forms) → bucket, object. */
const address = (pathname: string): { readonly prefix: string; readonly bucket: string; readonly rawObject: string | undefined } | undefined => {
  const prefix = GCS_PREFIXES.find((p) => pathname.startsWith(p))
  if (prefix === undefined) return undefined
  const m = /^b\/([^/]+)\/o(?:\/(.*))?$/.exec(pathname.slice(prefix.length))
  if (m === null) return undefined
  return { prefix, bucket: m[1]!, rawObject: m[2] }
}

/** Faults and stats key on the kind: an object resource GET is a stat (a HEAD elsewhere), a media GET a get. */
export const gcsKind = (method: string, pathname: string, query: URLSearchParams): RequestKind => {
  const at = address(pathname)
  if (at === undefined) return "other"
  if (at.prefix === "/upload/storage/v1/") return method === "POST" ? "put" : "other"
  if (at.rawObject === undefined || at.rawObject === "") return method === "GET" ? "list" : "other"
  if (method === "GET") return at.prefix === "/download/storage/v1/" || query.get("alt") === "media" ? "get" : "head"
  if (method === "HEAD") return "head"
  return method === "DELETE" ? "delete" : "other"
}

export const handleGcs = async (ctx: Ctx, pathname: string): Promise<void> => {
  const verdict = ctx.state.tokens.check(header(ctx, "authorization"))
  if (verdict !== "ok") {
    const why =
      verdict === "missing"
        ? "Anonymous caller does not have storage.objects.get access (no bearer token)."
        : verdict === "expired"
          ? "Invalid Credentials: the access token has expired."
          : "Invalid Credentials: the access token was not issued by this origin."
    return gcsError(ctx, 401, verdict === "missing" ? "required" : "authError", why, { "WWW-Authenticate": 'Bearer realm="https://accounts.google.com/"' })
  }
  const at = address(pathname)
  if (at === undefined) return gcsError(ctx, 404, "notFound", `The origin stub has no GCS route ${pathname}`)
  const bucket = decodePath(at.bucket)
  if (bucket === undefined || !isValidBucket(bucket) || !(await store.bucketExists(ctx.state.root, bucket))) {
    return gcsError(ctx, 404, "notFound", `The specified bucket does not exist: ${at.bucket}`)
  }
  if (at.prefix === "/upload/storage/v1/") {
    if (ctx.method !== "POST" || at.rawObject !== undefined) return gcsError(ctx, 405, "methodNotAllowed", "Upload with POST …/o?uploadType=media&name=…")
    return upload(ctx, bucket)
  }
  if (at.rawObject === undefined || at.rawObject === "") {
    if (ctx.method !== "GET") return gcsError(ctx, 405, "methodNotAllowed", `${ctx.method} is not supported on a bucket's object list`)
    return list(ctx, bucket)
  }
  const key = decodePath(at.rawObject)
  if (key === undefined || keyProblem(key) !== undefined) return gcsError(ctx, 400, "invalid", `Invalid object name: ${at.rawObject}`)
  if (ctx.method === "GET" || ctx.method === "HEAD") {
    return read(ctx, bucket, key, at.prefix === "/download/storage/v1/" || ctx.query.get("alt") === "media")
  }
  if (ctx.method === "DELETE") {
    ctx.req.resume()
    return (await store.deleteObject(ctx.state.root, bucket, key))
      ? sendEmpty(ctx, 204)
      : gcsError(ctx, 404, "notFound", `No such object: ${bucket}/${key}`)
  }
  return gcsError(ctx, 405, "methodNotAllowed", `${ctx.method} is not supported by the origin stub's GCS front end`)
}
