/**
 * The Azure Blob front end, path-style `/<account>/<container>/<blob>`. Reads go through
 * the route: Get Blob Properties, Get Blob (`x-ms-range` wins over `Range`); List Blobs
 * asks the origin (one bounded page). Every other request (Put Blob, Put Block, Put Block
 * List, Get Block List, Copy Blob, Set Blob Metadata/Properties, Delete Blob, container and
 * account operations) is forwarded to the origin with the body streaming through
 * (passThrough.ts), and invalidates the blob it may change.
 */
import { Either } from "effect"
import { header as originHeader } from "../backend/http.js"
import { errorDocument } from "../backend/xml.js"
import { Backend, type ObjectId } from "../core/ids.js"
import { AZURE_META_PREFIX } from "../core/userMetadata.js"
import { azureError, azureReadFailure } from "../http/azureErrors.js"
import { decodePath, discardBody, header, sendEmpty, sendXml } from "../http/context.js"
import { isValidBucket } from "../http/names.js"
import { escapeXml } from "../http/xml.js"
import { type GwCtx, run } from "./context.js"
import { answerBackendError, type Dialect, serveRead } from "./objectOps.js"
import { MAX_PART_BYTES, passThrough } from "./passThrough.js"
import { grantedNamespaces, onlyGranted } from "./identities.js"

const containerExists = async (ctx: GwCtx, container: string): Promise<boolean | undefined> => {
  const r = await run(ctx, ctx.g.origin.headContainer(container))
  return Either.isRight(r) ? (r.right.status === 404 ? false : r.right.status === 200 ? true : undefined) : undefined
}

export const azureDialect: Dialect = {
  readHeaders: { "x-ms-blob-type": "BlockBlob", "x-ms-lease-status": "unlocked", "x-ms-lease-state": "available" },
  metaPrefix: AZURE_META_PREFIX,
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
  if (ctx.method === "GET" && ctx.query.get("restype") === "container" && ctx.query.get("comp") === "list" && !unexpectedKeys(ctx, LIST_KEYS)) {
    discardBody(ctx)
    return listBlobs(ctx, account, container)
  }
  // Create/Delete Container, properties, metadata, ACLs: the origin's.
  return passThrough(ctx, azureDialect, { provider: "azure", bucket: container, key: undefined, maxBody: SMALL_BODY })
}

const SMALL_BODY = 4 * 1024 * 1024

/**
 * A Copy Blob source that names this gateway (as a client knows it) must name the origin
 * instead: the origin cannot read from the gateway, and the client's credentials end here.
 */
const copySource = (ctx: GwCtx): Record<string, string | undefined> => {
  const source = header(ctx, "x-ms-copy-source")
  if (source === undefined) return {}
  let url: URL
  try {
    url = new URL(source)
  } catch {
    return {}
  }
  if (url.host !== header(ctx, "host")) return {}
  const [, , rawContainer, ...rest] = url.pathname.split("/")
  const container = rawContainer === undefined ? undefined : decodePath(rawContainer)
  const blob = decodePath(rest.join("/"))
  if (container === undefined || blob === undefined || blob === "") return {}
  const origin = ctx.g.origin.forward.azureBlobUrl(container, blob)
  return origin === undefined ? {} : { "x-ms-copy-source": origin }
}

const blobOp = async (ctx: GwCtx, container: string, blob: string) => {
  const object: ObjectId = { backend: Backend.Azure, bucket: container, objectPath: blob }
  const pass = (maxBody: number | undefined, headers: Record<string, string | undefined> = {}) =>
    passThrough(ctx, azureDialect, { provider: "azure", bucket: container, key: blob, maxBody, invalidate: [object], headers })
  switch (ctx.method) {
    case "GET":
    case "HEAD":
      // Get Block List, metadata, tags and other sub-resources are the origin's.
      if (ctx.query.has("comp")) return pass(undefined)
      discardBody(ctx)
      if (unexpectedKeys(ctx, new Set())) return azureNotImplemented(ctx, `blob operation ?${[...ctx.query.keys()].join("&")}`)
      if (header(ctx, "x-ms-range-get-content-md5") !== undefined || header(ctx, "x-ms-range-get-content-crc64") !== undefined) {
        return azureNotImplemented(ctx, "transactional range hashes")
      }
      return serveRead(ctx, azureDialect, object, header(ctx, "x-ms-range") ?? header(ctx, "range"))
    case "PUT": {
      const comp = ctx.query.get("comp")
      if (comp === null && header(ctx, "x-ms-copy-source") === undefined && header(ctx, "x-ms-blob-type") !== "BlockBlob") {
        discardBody(ctx)
        return azureError(ctx, 400, "InvalidHeaderValue", `Only x-ms-blob-type: BlockBlob is supported (got ${header(ctx, "x-ms-blob-type") ?? "none"}).`)
      }
      const max = comp === "block" ? MAX_PART_BYTES : comp === null ? ctx.g.options.maxBodyBytes : SMALL_BODY
      return pass(max, copySource(ctx))
    }
    case "DELETE":
      return pass(undefined)
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
    // List Containers, service properties: the origin's, with its endpoint replaced by the gateway's.
    const endpoint = escapeXml(`${ctx.g.url}/${account}/`)
    // With principals, List Containers names only the containers the caller holds a grant in.
    const visible = grantedNamespaces(ctx.g.principals?.current(), ctx.principal, "azure")
    return passThrough(ctx, azureDialect, {
      provider: "azure",
      bucket: "",
      key: undefined,
      maxBody: SMALL_BODY,
      rewrite: (xml: string) => {
        const named = xml.replace(/ServiceEndpoint="[^"]*"/, `ServiceEndpoint="${endpoint}"`)
        return visible === undefined ? named : onlyGranted(named, "Container", visible)
      }
    })
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
