/**
 * The Azure Blob front end, path-style `/<account>/<container>/<blob>`: Get Blob
 * Properties, Get Blob (`x-ms-range` wins over `Range`), List Blobs (one bounded page,
 * passed to the origin), Put Blob (BlockBlob), Delete Blob. Anything else is refused
 * with NotImplemented.
 */
import { Either } from "effect"
import { quoteEtag } from "../backend/etag.js"
import { header as originHeader } from "../backend/http.js"
import { errorDocument } from "../backend/xml.js"
import { Backend, type ObjectId } from "../core/ids.js"
import { azureError, azureReadFailure } from "../origin/azure.js"
import { decodePath, discardBody, header, sendEmpty, sendXml } from "../origin/context.js"
import { isValidBucket } from "../origin/layout.js"
import { algorithmsFor, Digester, DigestMismatch, verifyDigests } from "../origin/upload.js"
import { escapeXml } from "../origin/xml.js"
import { BodyTooLarge, type GwCtx, readBody, run } from "./context.js"
import { answerBackendError, answerWriteError, type Dialect, serveRead } from "./objectOps.js"

const containerExists = async (ctx: GwCtx, container: string): Promise<boolean | undefined> => {
  const r = await run(ctx, ctx.g.origin.headContainer(container))
  return Either.isRight(r) ? (r.right.status === 404 ? false : r.right.status === 200 ? true : undefined) : undefined
}

export const azureDialect: Dialect = {
  readHeaders: { "x-ms-blob-type": "BlockBlob", "x-ms-lease-status": "unlocked", "x-ms-lease-state": "available" },
  error: (ctx, status, code, message, headers = {}) => azureError(ctx, status, code, message, headers),
  readFailure: (ctx, failure, _key, size) => azureReadFailure(ctx, failure, size),
  notFound: async (ctx, object) => {
    const code = (await containerExists(ctx, object.bucket)) === false ? "ContainerNotFound" : "BlobNotFound"
    if (ctx.method === "HEAD") return sendEmpty(ctx, 404, { "x-ms-error-code": code })
    azureError(ctx, 404, code, code === "BlobNotFound" ? "The specified blob does not exist." : "The specified container does not exist.")
  },
  codes: {
    busy: "ServerBusy",
    unavailable: "ServerBusy",
    timeout: "OperationTimedOut",
    internal: "InternalError",
    notImplemented: "NotImplemented",
    precondition: "ConditionNotMet"
  }
}

export const azureNotImplemented = (ctx: GwCtx, what: string) =>
  azureError(ctx, 501, "NotImplemented", `The requested operation is not implemented by the Talon gateway: ${what}`)

const unsupportedVerb = (ctx: GwCtx) =>
  azureError(ctx, 405, "UnsupportedHttpVerb", "The resource doesn't support the specified HTTP verb.")

/** Query keys beyond `allowed` (`timeout` is a server-side hint every operation accepts). */
const unexpectedKeys = (ctx: GwCtx, allowed: ReadonlySet<string>): boolean => {
  for (const k of ctx.query.keys()) if (!allowed.has(k) && k !== "timeout") return true
  return false
}

const LIST_KEYS = new Set(["restype", "comp", "prefix", "delimiter", "marker", "maxresults", "include"])
const MAX_RESULTS = 5000

const listBlobs = async (ctx: GwCtx, account: string, container: string) => {
  const query: Record<string, string> = {}
  for (const k of ["prefix", "delimiter", "marker", "maxresults", "include"]) {
    const v = ctx.query.get(k)
    if (v !== null) query[k] = v
  }
  const asked = query.maxresults
  if (asked === undefined || (/^\d+$/.test(asked) && Number(asked) > MAX_RESULTS)) query.maxresults = String(MAX_RESULTS)
  const r = await run(ctx, ctx.g.origin.listAzure(container, query))
  if (Either.isLeft(r)) return answerBackendError(ctx, azureDialect, r.left, undefined)
  const { status, headers, body } = r.right
  if (status === 200) {
    // The listing names its service endpoint: the gateway's, not the origin's.
    const endpoint = escapeXml(`${ctx.g.url}/${account}/`)
    return sendXml(ctx, 200, body.toString("utf8").replace(/ServiceEndpoint="[^"]*"/, `ServiceEndpoint="${endpoint}"`))
  }
  const doc = errorDocument(body.toString("utf8"))
  const code = doc.code ?? originHeader(headers, "x-ms-error-code") ?? "InternalError"
  if (status === 401 || status === 403) {
    return azureError(ctx, 500, "InternalError", `The origin refused the gateway's own credentials (${code}); fix TALON_AZURE_* on the gateway.`)
  }
  azureError(ctx, status, code, doc.message ?? `origin answered ${status}`)
}

const containerOp = async (ctx: GwCtx, account: string, container: string) => {
  discardBody(ctx)
  if (ctx.method === "GET" && ctx.query.get("restype") === "container" && ctx.query.get("comp") === "list") {
    if (unexpectedKeys(ctx, LIST_KEYS)) return azureNotImplemented(ctx, "unsupported List Blobs option")
    return listBlobs(ctx, account, container)
  }
  return azureNotImplemented(ctx, `${ctx.method} on a container (create and manage containers at the origin)`)
}

const CONDITIONS = ["if-match", "if-none-match", "if-modified-since", "if-unmodified-since", "x-ms-if-tags", "x-ms-lease-id"]

const putBlob = async (ctx: GwCtx, object: ObjectId) => {
  const g = ctx.g
  const type = header(ctx, "x-ms-blob-type")
  if (type !== "BlockBlob") {
    return azureError(ctx, 400, "InvalidHeaderValue", `Only x-ms-blob-type: BlockBlob is supported (got ${type ?? "none"}).`)
  }
  for (const name of CONDITIONS) if (header(ctx, name) !== undefined) return azureNotImplemented(ctx, `${name} on Put Blob`)
  if (Object.keys(ctx.req.headers).some((h) => h.startsWith("x-ms-meta-") || h === "x-ms-tags" || h === "x-ms-encryption-key")) {
    return azureNotImplemented(ctx, "metadata, tags or customer-provided keys on Put Blob")
  }
  const limit = g.options.maxBodyBytes
  const tooLarge = () => azureError(ctx, 413, "RequestBodyTooLarge", `The request body is too large and exceeds the maximum permissible limit (${limit} bytes through this gateway).`)
  if (Number(header(ctx, "content-length") ?? 0) > limit) return tooLarge()
  const digester = new Digester(algorithmsFor(ctx.req.headers))
  let body: Buffer
  try {
    body = await readBody(ctx.req, limit, [digester])
    verifyDigests(digester, ctx.req.headers, new Map())
  } catch (e) {
    if (e instanceof BodyTooLarge) return tooLarge()
    if (e instanceof DigestMismatch) {
      return azureError(ctx, 400, "Md5Mismatch", "The MD5 value specified in the request did not match with the MD5 value calculated by the server.")
    }
    if (ctx.req.destroyed || ctx.req.readableAborted) return
    throw e
  }
  const r = await run(ctx, g.backend.put(object, body))
  if (Either.isLeft(r)) {
    if (r.left._tag === "BackendNotFound") {
      g.stats.written(object)
      return azureError(ctx, 404, "ContainerNotFound", "The specified container does not exist.")
    }
    return answerWriteError(ctx, azureDialect, r.left, object)
  }
  g.stats.written(object)
  sendEmpty(ctx, 201, {
    ETag: quoteEtag(r.right.version),
    "Last-Modified": (r.right.lastModified ?? new Date()).toUTCString(),
    "Content-MD5": digester.digest("md5") ?? ""
  })
}

const deleteBlob = async (ctx: GwCtx, object: ObjectId) => {
  discardBody(ctx)
  for (const name of [...CONDITIONS, "x-ms-delete-snapshots"]) {
    if (header(ctx, name) !== undefined) return azureNotImplemented(ctx, `${name} on Delete Blob`)
  }
  // Azure answers 404 for a blob that is not there (the backend's delete is idempotent).
  const st = await run(ctx, ctx.g.stats.stat(object, true))
  if (Either.isLeft(st)) return answerBackendError(ctx, azureDialect, st.left, object)
  const r = await run(ctx, ctx.g.backend.delete(object))
  if (Either.isLeft(r)) return answerWriteError(ctx, azureDialect, r.left, object)
  ctx.g.stats.written(object)
  sendEmpty(ctx, 202, { "x-ms-delete-type-permanent": "true" })
}

const blobOp = async (ctx: GwCtx, container: string, blob: string) => {
  const object: ObjectId = { backend: Backend.Azure, bucket: container, objectPath: blob }
  if (unexpectedKeys(ctx, new Set())) {
    discardBody(ctx)
    return azureNotImplemented(ctx, `blob operation ?${[...ctx.query.keys()].join("&")}`)
  }
  switch (ctx.method) {
    case "GET":
    case "HEAD":
      discardBody(ctx)
      if (header(ctx, "x-ms-range-get-content-md5") !== undefined || header(ctx, "x-ms-range-get-content-crc64") !== undefined) {
        return azureNotImplemented(ctx, "transactional range hashes")
      }
      return serveRead(ctx, azureDialect, object, header(ctx, "x-ms-range") ?? header(ctx, "range"))
    case "PUT":
      return putBlob(ctx, object)
    case "DELETE":
      return deleteBlob(ctx, object)
    default:
      discardBody(ctx)
      return unsupportedVerb(ctx)
  }
}

/** Entry point: the path's segments (still percent-encoded) after the host. */
export const handleAzure = async (ctx: GwCtx, segments: ReadonlyArray<string>): Promise<void> => {
  const [account = "", rawContainer, ...rest] = segments
  if (!/^[a-z0-9]{3,24}$/.test(account)) {
    discardBody(ctx)
    return azureError(ctx, 400, "InvalidUri", "The requested URI does not represent any resource on the server (expected /<account>/<container>/<blob>).")
  }
  if (rawContainer === undefined || rawContainer === "") {
    discardBody(ctx)
    return azureNotImplemented(ctx, "account-level operations (list containers at the origin)")
  }
  const container = decodePath(rawContainer)
  if (container === undefined || !isValidBucket(container)) {
    discardBody(ctx)
    return azureError(ctx, 400, "InvalidResourceName", "The specified resource name contains invalid characters.")
  }
  if (rest.length === 0 || (rest.length === 1 && rest[0] === "")) return containerOp(ctx, account, container)
  const blob = decodePath(rest.join("/"))
  if (blob === undefined) {
    discardBody(ctx)
    return azureError(ctx, 400, "InvalidUri", "The requested URI does not represent any resource on the server.")
  }
  return blobOp(ctx, container, blob)
}
