/**
 * The Azure Blob REST front end of the origin stub, Azurite-style path addressing:
 * `/<account>/<container>/<blob>`. Any account name is accepted and all accounts share
 * one namespace with S3 (container = bucket); `devstoreaccount1` is the conventional one.
 *
 * The stub does NOT verify Shared Key or SAS signatures: any credentials (or none) are
 * accepted. It is a local test origin, never an access-control boundary.
 */
import { decodePath, discardBody, header, sendEmpty, sendXml } from "../http/context.js"
import type { Ctx } from "./context.js"
import { azureError, azureReadFailure } from "../http/azureErrors.js"
import { isValidBucket } from "../http/names.js"
import { compareKeys, keyProblem } from "./layout.js"
import { serveObject, type ReadDialect } from "./objectRead.js"
import * as store from "./store.js"
import { getBlockList, putBlock, putBlockList } from "./azureBlocks.js"
import { copyBlob, propsHeaders, readProps, setProps, writeProps } from "./blobProps.js"
import { md5Hex } from "./s3Body.js"
import { algorithmsFor, Digester, DigestMismatch, verifyDigests } from "./upload.js"
import { el, escapeXml, XML_DECL_AZURE } from "../http/xml.js"

const blobNotFound = (ctx: Ctx) => azureError(ctx, 404, "BlobNotFound", "The specified blob does not exist.")
const containerNotFound = (ctx: Ctx) => azureError(ctx, 404, "ContainerNotFound", "The specified container does not exist.")
const conditionNotMet = (ctx: Ctx) =>
  azureError(ctx, 412, "ConditionNotMet", "The condition specified using HTTP conditional header(s) is not met.")
const notImplemented = (ctx: Ctx) =>
  azureError(ctx, 501, "NotImplemented", "The requested operation is not implemented by the Talon origin stub.")

const blobHeaders = (obj: store.ObjectInfo): Record<string, string> => ({
  "x-ms-blob-type": "BlockBlob",
  "x-ms-creation-time": obj.created.toUTCString(),
  "x-ms-lease-status": "unlocked",
  "x-ms-lease-state": "available",
  "x-ms-server-encrypted": "true",
  "x-ms-access-tier": "Hot",
  "x-ms-access-tier-inferred": "true"
})

/** Azure's answer to a read refused by its conditions or range (shared with the gateway). */
const dialect: ReadDialect = {
  objectHeaders: blobHeaders,
  fail: (ctx, failure, obj) => azureReadFailure(ctx, failure, obj.size)
}

const unquote = (etag: string) => etag.replace(/^"|"$/g, "")
const toMarker = (s: string) => Buffer.from(s, "utf8").toString("base64url")
const fromMarker = (m: string): string | undefined => (/^[A-Za-z0-9_-]+$/.test(m) ? Buffer.from(m, "base64url").toString("utf8") : undefined)

const parseMaxResults = (ctx: Ctx): number | undefined => {
  const raw = ctx.query.get("maxresults")
  if (raw === null) return 5000
  if (!/^\d+$/.test(raw) || Number(raw) === 0) return undefined
  return Math.min(Number(raw), 5000)
}

const invalidQuery = (ctx: Ctx, name: string) =>
  azureError(ctx, 400, "InvalidQueryParameterValue", `Value for one of the query parameters specified in the request URI is invalid (${name}).`)

const serviceEndpoint = (ctx: Ctx, account: string) => `${ctx.state.url}/${account}/`

const listBlobs = async (ctx: Ctx, account: string, container: string) => {
  const maxResults = parseMaxResults(ctx)
  if (maxResults === undefined) return invalidQuery(ctx, "maxresults")
  const marker = ctx.query.get("marker")
  const after = marker === null || marker === "" ? "" : fromMarker(marker)
  if (after === undefined) return invalidQuery(ctx, "marker")
  const prefix = ctx.query.get("prefix") ?? ""
  const delimiter = ctx.query.get("delimiter") ?? ""
  const page = await store.listObjects(ctx.state.root, container, { prefix, delimiter, after, maxKeys: maxResults })
  // Azure interleaves blobs and prefixes in name order; both are sorted already.
  const items = [
    ...page.objects.map((o) => ({ name: o.key, xml: blobXml(o) })),
    ...page.prefixes.map((p) => ({ name: p, xml: `<BlobPrefix>${el("Name", p)}</BlobPrefix>` }))
  ].sort((a, b) => compareKeys(a.name, b.name))
  const body =
    `${XML_DECL_AZURE}<EnumerationResults ServiceEndpoint="${escapeXml(serviceEndpoint(ctx, account))}" ContainerName="${escapeXml(container)}">` +
    (prefix === "" ? "" : el("Prefix", prefix)) +
    (marker === null ? "" : el("Marker", marker)) +
    (ctx.query.has("maxresults") ? el("MaxResults", maxResults) : "") +
    (delimiter === "" ? "" : el("Delimiter", delimiter)) +
    `<Blobs>${items.map((i) => i.xml).join("")}</Blobs>` +
    (page.nextMarker === undefined ? "<NextMarker />" : el("NextMarker", toMarker(page.nextMarker))) +
    `</EnumerationResults>`
  sendXml(ctx, 200, body)
}

const blobXml = (o: store.ObjectInfo) =>
  `<Blob>${el("Name", o.key)}<Properties>` +
  el("Creation-Time", o.created.toUTCString()) +
  el("Last-Modified", o.lastModified.toUTCString()) +
  el("Etag", unquote(o.etag)) +
  el("Content-Length", o.size) +
  el("Content-Type", "application/octet-stream") +
  `<BlobType>BlockBlob</BlobType><AccessTier>Hot</AccessTier><AccessTierInferred>true</AccessTierInferred>` +
  `<LeaseStatus>unlocked</LeaseStatus><LeaseState>available</LeaseState><ServerEncrypted>true</ServerEncrypted>` +
  `</Properties></Blob>`

const containerEtag = (created: Date) => `"0x${created.getTime().toString(16).toUpperCase()}"`

const listContainers = async (ctx: Ctx, account: string) => {
  const prefix = ctx.query.get("prefix") ?? ""
  const buckets = (await store.listBuckets(ctx.state.root)).filter((b) => b.name.startsWith(prefix))
  const body =
    `${XML_DECL_AZURE}<EnumerationResults ServiceEndpoint="${escapeXml(serviceEndpoint(ctx, account))}">` +
    (prefix === "" ? "" : el("Prefix", prefix)) +
    `<Containers>${buckets
      .map(
        (b) =>
          `<Container>${el("Name", b.name)}<Properties>${el("Last-Modified", b.created.toUTCString())}${el("Etag", containerEtag(b.created))}` +
          `<LeaseStatus>unlocked</LeaseStatus><LeaseState>available</LeaseState><HasImmutabilityPolicy>false</HasImmutabilityPolicy><HasLegalHold>false</HasLegalHold></Properties></Container>`
      )
      .join("")}</Containers><NextMarker />` +
    `</EnumerationResults>`
  sendXml(ctx, 200, body)
}

const containerOp = async (ctx: Ctx, account: string, container: string) => {
  const root = ctx.state.root
  if (ctx.query.get("restype") !== "container") {
    return azureError(ctx, 400, "InvalidQueryParameterValue", "Container operations need restype=container.")
  }
  const comp = ctx.query.get("comp")
  switch (ctx.method) {
    case "PUT": {
      discardBody(ctx)
      if (comp !== null) return notImplemented(ctx)
      const r = await store.createBucket(root, container)
      if (r === "exists") return azureError(ctx, 409, "ContainerAlreadyExists", "The specified container already exists.")
      const now = new Date()
      return sendEmpty(ctx, 201, { ETag: containerEtag(now), "Last-Modified": now.toUTCString() })
    }
    case "DELETE": {
      const r = await store.deleteBucket(root, container, true)
      if (r === "missing") return containerNotFound(ctx)
      return sendEmpty(ctx, 202)
    }
    case "GET":
    case "HEAD": {
      if (!(await store.bucketExists(root, container))) {
        return ctx.method === "HEAD" ? sendEmpty(ctx, 404, { "x-ms-error-code": "ContainerNotFound" }) : containerNotFound(ctx)
      }
      if (comp === "list") return listBlobs(ctx, account, container)
      if (comp !== null) return notImplemented(ctx)
      const created = (await store.listBuckets(root)).find((b) => b.name === container)?.created ?? new Date(0)
      return sendEmpty(ctx, 200, {
        ETag: containerEtag(created),
        "Last-Modified": created.toUTCString(),
        "x-ms-lease-status": "unlocked",
        "x-ms-lease-state": "available",
        "x-ms-has-immutability-policy": "false",
        "x-ms-has-legal-hold": "false"
      })
    }
    default:
      return azureError(ctx, 405, "UnsupportedHttpVerb", "The resource doesn't support the specified HTTP verb.")
  }
}

const putOptions = (ctx: Ctx, digester: Digester) => ({
  transforms: [digester],
  verify: () => verifyDigests(digester, ctx.req.headers, new Map()),
  contentEtag: () => md5Hex(digester),
  conditions: { ifMatch: header(ctx, "if-match"), ifNoneMatch: header(ctx, "if-none-match") }
})

export const writeFailed = (ctx: Ctx, e: unknown): void => {
  if (e instanceof DigestMismatch) {
    return azureError(ctx, 400, "Md5Mismatch", "The MD5 value specified in the request did not match with the MD5 value calculated by the server.")
  }
  if (e instanceof store.PutPreconditionFailed) return conditionNotMet(ctx)
  if (e instanceof store.PutConflict) return azureError(ctx, 409, "BlobConflict", e.message)
  if (ctx.req.destroyed || ctx.req.readableAborted) return
  throw e
}

const putBlob = async (ctx: Ctx, container: string, blob: string) => {
  const type = header(ctx, "x-ms-blob-type")
  if (type !== "BlockBlob") {
    return azureError(ctx, 400, "InvalidHeaderValue", `Only x-ms-blob-type: BlockBlob is supported (got ${type ?? "none"}).`)
  }
  const digester = new Digester(algorithmsFor(ctx.req.headers))
  try {
    const info = await store.putObject(ctx.state.root, container, blob, ctx.req, putOptions(ctx, digester))
    ctx.state.stats.bytesReceived += digester.length
    await writeProps(ctx, container, blob, info.etag)
    sendEmpty(ctx, 201, {
      ETag: info.etag,
      "Last-Modified": info.lastModified.toUTCString(),
      "Content-MD5": digester.digest("md5") ?? "",
      "x-ms-request-server-encrypted": "true"
    })
  } catch (e) {
    writeFailed(ctx, e)
  }
}

const blobOp = async (ctx: Ctx, container: string, blob: string) => {
  const root = ctx.state.root
  const problem = keyProblem(blob)
  if (problem !== undefined) {
    return problem === "too-long" || problem === "segment-too-long"
      ? azureError(ctx, 400, "OutOfRangeInput", "The specified blob name is too long.")
      : azureError(ctx, 400, "InvalidUri", "The requested URI does not represent any resource on the server: '.' and '..' segments are rejected.")
  }
  if (!(await store.bucketExists(root, container))) {
    return ctx.method === "HEAD" ? sendEmpty(ctx, 404, { "x-ms-error-code": "ContainerNotFound" }) : containerNotFound(ctx)
  }
  const comp = ctx.query.get("comp")
  switch (ctx.method) {
    case "GET":
    case "HEAD": {
      if (comp === "blocklist" && ctx.method === "GET") return getBlockList(ctx, container, blob)
      if (comp !== null && comp !== "metadata") return notImplemented(ctx)
      const obj = await store.openObject(root, container, blob)
      if (!obj) return ctx.method === "HEAD" ? sendEmpty(ctx, 404, { "x-ms-error-code": "BlobNotFound" }) : blobNotFound(ctx)
      const extra = propsHeaders(await readProps(root, container, blob, obj.etag))
      if (comp === "metadata") {
        await obj.handle.close()
        const meta = Object.fromEntries(Object.entries(extra).filter(([k]) => k.startsWith("x-ms-meta-")))
        return sendEmpty(ctx, 200, { ETag: obj.etag, "Last-Modified": obj.lastModified.toUTCString(), ...meta })
      }
      const withProps: ReadDialect = { ...dialect, objectHeaders: (o) => ({ ...blobHeaders(o), ...extra }) }
      // x-ms-range wins over Range when both are present (Azure's rule).
      return serveObject(ctx, obj, header(ctx, "x-ms-range") ?? header(ctx, "range"), withProps)
    }
    case "PUT":
      if (comp === null) return header(ctx, "x-ms-copy-source") !== undefined ? copyBlob(ctx, container, blob) : putBlob(ctx, container, blob)
      if (comp === "block") return putBlock(ctx, container, blob)
      if (comp === "blocklist") return putBlockList(ctx, container, blob)
      if (comp === "metadata" || comp === "properties") return setProps(ctx, container, blob, comp)
      discardBody(ctx)
      return notImplemented(ctx)
    case "DELETE": {
      discardBody(ctx)
      const ifMatch = header(ctx, "if-match")
      if (ifMatch !== undefined) {
        const obj = await store.openObject(root, container, blob)
        await obj?.handle.close()
        if (!obj) return blobNotFound(ctx)
        if (ifMatch.trim() !== "*" && unquote(ifMatch.trim()) !== unquote(obj.etag)) return conditionNotMet(ctx)
      }
      if (!(await store.deleteObject(root, container, blob))) return blobNotFound(ctx)
      return sendEmpty(ctx, 202, { "x-ms-delete-type-permanent": "true" })
    }
    default:
      return azureError(ctx, 405, "UnsupportedHttpVerb", "The resource doesn't support the specified HTTP verb.")
  }
}

/** Entry point: path segments after the host, still URL-encoded. */
export const handleAzure = async (ctx: Ctx, segments: ReadonlyArray<string>): Promise<void> => {
  const [account = "", rawContainer, ...rest] = segments
  if (!/^[a-z0-9]{3,24}$/.test(account)) {
    return azureError(ctx, 400, "InvalidUri", "The requested URI does not represent any resource on the server (expected /<account>/<container>/<blob>).")
  }
  if (rawContainer === undefined || rawContainer === "") {
    if (ctx.method === "GET" && ctx.query.get("comp") === "list") return listContainers(ctx, account)
    return notImplemented(ctx)
  }
  const container = decodePath(rawContainer)
  if (container === undefined || !isValidBucket(container)) {
    return azureError(ctx, 400, "InvalidResourceName", "The specified resource name contains invalid characters.")
  }
  if (rest.length === 0 || (rest.length === 1 && rest[0] === "")) return containerOp(ctx, account, container)
  const blob = decodePath(rest.join("/"))
  if (blob === undefined) return azureError(ctx, 400, "InvalidUri", "The requested URI does not represent any resource on the server.")
  return blobOp(ctx, container, blob)
}
