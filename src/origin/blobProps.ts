/**
 * Blob metadata and HTTP properties in the origin stub (Set Blob Metadata, Set Blob
 * Properties, and the `x-ms-meta-*` / `x-ms-blob-content-*` of Put Blob and Put Block List),
 * kept in a small record beside the blob: `<root>/.talon-tmp/props/<hash>.json`, tagged with
 * the ETag it belongs to, so a later overwrite that did not set any leaves none behind.
 * Setting them touches the blob's mtime, which gives it a new ETag, as Azure does.
 * Also Copy Blob (synchronous, from a blob of this stub). The S3 front end keeps its
 * `x-amz-meta-*` in the same record (one namespace: S3 metadata reads back as `x-ms-meta-*`).
 */
import { createHash, randomUUID } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { azureError } from "../http/azureErrors.js"
import { writeFailed } from "./azure.js"
import { header, sendEmpty } from "../http/context.js"
import type { Ctx } from "./context.js"
import { nextMtime, objectPath, TMP_DIR } from "./layout.js"
import { openObject, putObject, statObject } from "./store.js"

export interface BlobProps {
  readonly etag: string
  readonly metadata: Record<string, string>
  /** Response header name → value (Content-Type, Cache-Control, …). */
  readonly headers: Record<string, string>
}

const propsFile = (root: string, container: string, blob: string) =>
  path.join(root, TMP_DIR, "props", `${createHash("sha256").update(`${container}/${blob}`).digest("hex")}.json`)

/** Request header → the response header it sets. */
const PROPERTY_HEADERS: Record<string, string> = {
  "x-ms-blob-content-type": "Content-Type",
  "x-ms-blob-content-encoding": "Content-Encoding",
  "x-ms-blob-content-language": "Content-Language",
  "x-ms-blob-cache-control": "Cache-Control",
  "x-ms-blob-content-disposition": "Content-Disposition",
  "x-ms-blob-content-md5": "Content-MD5"
}

const fromRequest = (ctx: Ctx): { metadata: Record<string, string>; headers: Record<string, string> } => {
  const metadata: Record<string, string> = {}
  const headers: Record<string, string> = {}
  for (const [k, v] of Object.entries(ctx.req.headers)) {
    if (typeof v !== "string") continue
    if (k.startsWith("x-ms-meta-")) metadata[k.slice("x-ms-meta-".length)] = v
    const target = PROPERTY_HEADERS[k]
    if (target !== undefined) headers[target] = v
  }
  return { metadata, headers }
}

export const readProps = async (root: string, container: string, blob: string, etag: string): Promise<BlobProps | undefined> => {
  try {
    const p = JSON.parse(await fs.readFile(propsFile(root, container, blob), "utf8")) as BlobProps
    return p.etag === etag ? p : undefined
  } catch {
    return undefined
  }
}

/**
 * Records what belongs to the object's ETag now; a write that sets nothing removes the old
 * record (rewriting the same bytes keeps a content ETag, which must not revive old metadata).
 */
export const saveProps = async (root: string, container: string, blob: string, props: BlobProps) => {
  const file = propsFile(root, container, blob)
  if (Object.keys(props.metadata).length === 0 && Object.keys(props.headers).length === 0) {
    await fs.rm(file, { force: true })
    return
  }
  await fs.mkdir(path.dirname(file), { recursive: true })
  await fs.writeFile(file, JSON.stringify(props))
}

/** After a write: the request's metadata and properties now belong to the blob's new ETag. */
export const writeProps = async (ctx: Ctx, container: string, blob: string, etag: string) => {
  const { metadata, headers } = fromRequest(ctx)
  await saveProps(ctx.state.root, container, blob, { etag, metadata, headers })
}

/** The headers a read of the blob carries from its stored metadata and properties. */
export const propsHeaders = (props: BlobProps | undefined): Record<string, string> => {
  if (props === undefined) return {}
  const out: Record<string, string> = { ...props.headers }
  for (const [k, v] of Object.entries(props.metadata)) out[`x-ms-meta-${k}`] = v
  return out
}

/** Set Blob Metadata (`comp=metadata`) and Set Blob Properties (`comp=properties`). */
export const setProps = async (ctx: Ctx, container: string, blob: string, what: "metadata" | "properties") => {
  ctx.req.resume()
  const before = await statObject(ctx.state.root, container, blob)
  if (before === undefined) return azureError(ctx, 404, "BlobNotFound", "The specified blob does not exist.")
  const ifMatch = header(ctx, "if-match")
  if (ifMatch !== undefined && ifMatch !== "*" && ifMatch.replace(/"/g, "") !== before.etag.replace(/"/g, "")) {
    return azureError(ctx, 412, "ConditionNotMet", "The condition specified using HTTP conditional header(s) is not met.")
  }
  const old = await readProps(ctx.state.root, container, blob, before.etag)
  const given = fromRequest(ctx)
  // Metadata replaces the whole set; properties replace the HTTP headers and keep the metadata.
  const metadata = what === "metadata" ? given.metadata : (old?.metadata ?? {})
  const headers = what === "properties" ? given.headers : (old?.headers ?? {})
  const mtime = nextMtime()
  await fs.utimes(objectPath(ctx.state.root, container, blob), mtime, mtime)
  const after = await statObject(ctx.state.root, container, blob)
  if (after === undefined) return azureError(ctx, 404, "BlobNotFound", "The specified blob does not exist.")
  await saveProps(ctx.state.root, container, blob, { etag: after.etag, metadata, headers })
  sendEmpty(ctx, 200, { ETag: after.etag, "Last-Modified": after.lastModified.toUTCString(), "x-ms-request-server-encrypted": "true" })
}

/** Copy Blob / Copy Blob From URL, completed before the answer (`x-ms-copy-status: success`). */
export const copyBlob = async (ctx: Ctx, container: string, blob: string) => {
  ctx.req.resume()
  const raw = header(ctx, "x-ms-copy-source") ?? ""
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return azureError(ctx, 400, "InvalidHeaderValue", `x-ms-copy-source must be an absolute URL of a blob (got ${JSON.stringify(raw)}).`)
  }
  const stub = new URL(ctx.state.url)
  if (url.host !== stub.host && url.hostname !== "localhost") {
    return azureError(ctx, 400, "CannotVerifyCopySource", `The copy source must be a blob of this stub (${stub.host}), not ${url.host}.`)
  }
  const [, , rawContainer = "", ...rest] = url.pathname.split("/")
  let source: { container: string; blob: string }
  try {
    source = { container: decodeURIComponent(rawContainer), blob: decodeURIComponent(rest.join("/")) }
  } catch {
    return azureError(ctx, 400, "InvalidHeaderValue", "x-ms-copy-source is not validly percent-encoded.")
  }
  const obj = await openObject(ctx.state.root, source.container, source.blob)
  if (!obj) return azureError(ctx, 404, "CannotVerifyCopySource", "The specified copy source blob does not exist.")
  try {
    const props = await readProps(ctx.state.root, source.container, source.blob, obj.etag)
    const info = await putObject(ctx.state.root, container, blob, obj.handle.createReadStream({ autoClose: false }), {
      conditions: { ifMatch: header(ctx, "if-match"), ifNoneMatch: header(ctx, "if-none-match") }
    })
    const given = fromRequest(ctx)
    const metadata = Object.keys(given.metadata).length > 0 ? given.metadata : (props?.metadata ?? {})
    await saveProps(ctx.state.root, container, blob, { etag: info.etag, metadata, headers: props?.headers ?? {} })
    sendEmpty(ctx, 202, {
      ETag: info.etag,
      "Last-Modified": info.lastModified.toUTCString(),
      "x-ms-copy-id": randomUUID(),
      "x-ms-copy-status": "success"
    })
  } catch (e) {
    writeFailed(ctx, e)
  } finally {
    await obj.handle.close()
  }
}
