/**
 * S3 multipart uploads in the origin stub: Create, UploadPart, UploadPartCopy, Complete,
 * Abort, ListParts, ListMultipartUploads. Parts stream to files under
 * `<root>/.talon-tmp/uploads/<uploadId>/` (named `p<number>.<md5>`, the md5 being the part's
 * ETag, as S3's is); Complete concatenates them, streaming, into the object through the same
 * atomic rename as PutObject. Uploads nobody completes or aborts expire (sweepUploads).
 */
import { createHash, randomBytes } from "node:crypto"
import { createWriteStream } from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import { XMLParser } from "fast-xml-parser"
import { sendXml } from "../http/context.js"
import type { Ctx } from "./context.js"
import { TMP_DIR } from "./layout.js"
import { parseRange } from "../http/ranges.js"
import { bodyError, s3Body } from "./s3Body.js"
import { s3Error } from "../http/s3Errors.js"
import { copySourceOf } from "./s3Copy.js"
import { putObject, PutConflict } from "./store.js"
import { saveProps } from "./blobProps.js"
import { metadataFromHeaders, S3_META_PREFIX } from "../core/userMetadata.js"
import { concatFiles, Digester, readBounded } from "./upload.js"
import { el, S3_XMLNS, XML_DECL_S3 } from "../http/xml.js"

/** S3's rules: parts 1..10000, every part but the last at least 5 MiB. */
export const MIN_PART_BYTES = 5 * 1024 * 1024
const MAX_PARTS = 10_000

interface UploadMeta {
  readonly bucket: string
  readonly key: string
  readonly initiated: string
  /** The `x-amz-meta-*` of CreateMultipartUpload: the object's once completed. */
  readonly metadata?: Record<string, string>
}

export const uploadsDir = (root: string) => path.join(root, TMP_DIR, "uploads")
const uploadDir = (root: string, id: string) => path.join(uploadsDir(root), id)

const readMeta = async (root: string, id: string): Promise<UploadMeta | undefined> => {
  if (!/^[0-9a-f]{32}$/.test(id)) return undefined
  try {
    return JSON.parse(await fs.readFile(path.join(uploadDir(root, id), "meta.json"), "utf8")) as UploadMeta
  } catch {
    return undefined
  }
}

interface Part {
  readonly number: number
  readonly etag: string
  readonly size: number
  readonly file: string
  readonly modified: Date
}

const listPartFiles = async (dir: string): Promise<Array<Part>> => {
  const out: Array<Part> = []
  for (const name of await fs.readdir(dir).catch(() => [] as Array<string>)) {
    const m = /^p(\d{5})\.([0-9a-f]{32})$/.exec(name)
    if (!m) continue
    const s = await fs.stat(path.join(dir, name)).catch(() => undefined)
    if (s) out.push({ number: Number(m[1]), etag: `"${m[2]}"`, size: s.size, file: path.join(dir, name), modified: s.mtime })
  }
  return out.sort((a, b) => a.number - b.number)
}

const noSuchUpload = (ctx: Ctx) =>
  s3Error(ctx, 404, "NoSuchUpload", "The specified multipart upload does not exist. The upload ID might be invalid, or the upload might have been aborted, completed or expired.")

/** The upload named by `?uploadId`, if it exists and belongs to this bucket and key. */
const theUpload = async (ctx: Ctx, bucket: string, key: string): Promise<string | undefined> => (await theUploadMeta(ctx, bucket, key))?.id

const theUploadMeta = async (ctx: Ctx, bucket: string, key: string): Promise<(UploadMeta & { readonly id: string }) | undefined> => {
  const id = ctx.query.get("uploadId") ?? ""
  const meta = await readMeta(ctx.state.root, id)
  return meta !== undefined && meta.bucket === bucket && meta.key === key ? { ...meta, id } : undefined
}

export const createUpload = async (ctx: Ctx, bucket: string, key: string): Promise<void> => {
  ctx.req.resume()
  const id = randomBytes(16).toString("hex")
  const dir = uploadDir(ctx.state.root, id)
  await fs.mkdir(dir, { recursive: true })
  const meta: UploadMeta = { bucket, key, initiated: new Date().toISOString(), metadata: { ...metadataFromHeaders(ctx.req.headers, S3_META_PREFIX) } }
  await fs.writeFile(path.join(dir, "meta.json"), JSON.stringify(meta))
  sendXml(ctx, 200, `${XML_DECL_S3}<InitiateMultipartUploadResult xmlns="${S3_XMLNS}">${el("Bucket", bucket)}${el("Key", key)}${el("UploadId", id)}</InitiateMultipartUploadResult>`)
}

const partNumberOf = (ctx: Ctx): number | undefined => {
  const raw = ctx.query.get("partNumber") ?? ""
  const n = /^\d{1,5}$/.test(raw) ? Number(raw) : NaN
  return n >= 1 && n <= MAX_PARTS ? n : undefined
}

/** Writes a part's bytes to a temp file, then renames it over any earlier part with that number. */
const storePart = async (dir: string, number: number, source: Readable, transforms: ReadonlyArray<NodeJS.ReadWriteStream>, md5: () => string, verify: () => void) => {
  const tmp = path.join(dir, `tmp-${randomBytes(6).toString("hex")}`)
  try {
    await pipeline([source, ...transforms, createWriteStream(tmp, { flags: "wx" })])
    verify()
    const hex = Buffer.from(md5(), "base64").toString("hex")
    const prefix = `p${String(number).padStart(5, "0")}.`
    for (const old of await fs.readdir(dir)) if (old.startsWith(prefix)) await fs.rm(path.join(dir, old), { force: true })
    await fs.rename(tmp, path.join(dir, `${prefix}${hex}`))
    return `"${hex}"`
  } finally {
    await fs.rm(tmp, { force: true }).catch(() => undefined)
  }
}

export const uploadPart = async (ctx: Ctx, bucket: string, key: string): Promise<void> => {
  const number = partNumberOf(ctx)
  if (number === undefined) return s3Error(ctx, 400, "InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive")
  const id = await theUpload(ctx, bucket, key)
  if (id === undefined) return noSuchUpload(ctx)
  const dir = uploadDir(ctx.state.root, id)
  if (ctx.req.headers["x-amz-copy-source"] !== undefined) return uploadPartCopy(ctx, dir, number)
  const body = s3Body(ctx)
  try {
    const etag = await storePart(dir, number, ctx.req, body.transforms, () => body.digester.digest("md5")!, body.verify)
    ctx.state.stats.bytesReceived += body.digester.length
    ctx.res.writeHead(200, { ETag: etag, "Content-Length": 0, ...body.echo() })
    ctx.res.end()
  } catch (e) {
    const bad = bodyError(e)
    if (bad) return s3Error(ctx, bad.status, bad.code, bad.message)
    if (ctx.req.destroyed || ctx.req.readableAborted) return
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return noSuchUpload(ctx)
    throw e
  }
}

const uploadPartCopy = async (ctx: Ctx, dir: string, number: number): Promise<void> => {
  ctx.req.resume()
  const source = await copySourceOf(ctx)
  if ("error" in source) return s3Error(ctx, source.status, source.error, source.message)
  const { obj } = source
  try {
    let start = 0
    let end = obj.size - 1
    const range = ctx.req.headers["x-amz-copy-source-range"]
    if (typeof range === "string") {
      const r = parseRange(range, obj.size)
      if (r._tag !== "Partial") {
        return s3Error(ctx, 400, "InvalidArgument", `The x-amz-copy-source-range value must be of the form bytes=first-last within the source object (size ${obj.size})`)
      }
      ;({ start, end } = r)
    }
    const digester = new Digester(new Set(["md5"]))
    const stream = end < start ? Readable.from([]) : obj.handle.createReadStream({ start, end, autoClose: false })
    const etag = await storePart(dir, number, stream, [digester], () => digester.digest("md5")!, () => undefined)
    const modified = new Date()
    sendXml(ctx, 200, `${XML_DECL_S3}<CopyPartResult xmlns="${S3_XMLNS}">${el("LastModified", modified.toISOString())}${el("ETag", etag)}</CopyPartResult>`)
  } finally {
    await obj.handle.close()
  }
}

const parser = new XMLParser({ isArray: (name) => name === "Part", parseTagValue: false })
/** ETags as listed in a Complete body: quoted, or with the quotes as entities (Go's encoder writes `&#34;`). */
const unquote = (s: string) => s.trim().replace(/&#34;|&#x22;|&quot;|"/gi, "")

export const completeUpload = async (ctx: Ctx, bucket: string, key: string): Promise<void> => {
  const upload = await theUploadMeta(ctx, bucket, key)
  if (upload === undefined) return noSuchUpload(ctx)
  const id = upload.id
  const text = (await readBounded(ctx.req, 4 * 1024 * 1024))?.toString("utf8")
  if (text === undefined) return s3Error(ctx, 400, "MalformedXML", "The CompleteMultipartUpload body is larger than 4 MiB")
  let listed: Array<{ PartNumber?: unknown; ETag?: unknown }>
  try {
    const doc = parser.parse(text) as { CompleteMultipartUpload?: { Part?: Array<{ PartNumber?: unknown; ETag?: unknown }> } }
    listed = doc.CompleteMultipartUpload?.Part ?? []
  } catch {
    return s3Error(ctx, 400, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema")
  }
  if (listed.length === 0) return s3Error(ctx, 400, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema: CompleteMultipartUpload names no Part")
  const dir = uploadDir(ctx.state.root, id)
  const parts = new Map((await listPartFiles(dir)).map((p) => [p.number, p]))
  const chosen: Array<Part> = []
  for (const [i, p] of listed.entries()) {
    const number = Number(p.PartNumber)
    if (i > 0 && !(number > chosen[i - 1]!.number)) return s3Error(ctx, 400, "InvalidPartOrder", "The list of parts was not in ascending order. Parts must be ordered by part number.")
    const part = parts.get(number)
    if (part === undefined || unquote(String(p.ETag ?? "")) !== unquote(part.etag)) {
      return s3Error(ctx, 400, "InvalidPart", `One or more of the specified parts could not be found (part ${number}): upload it again or check its ETag.`, { UploadId: id, PartNumber: number })
    }
    chosen.push(part)
  }
  for (const p of chosen.slice(0, -1)) {
    if (p.size < MIN_PART_BYTES) {
      return s3Error(ctx, 400, "EntityTooSmall", `Your proposed upload is smaller than the minimum allowed size: part ${p.number} is ${p.size} bytes, every part but the last must be at least 5 MiB.`, { PartNumber: p.number, ProposedSize: p.size, MinSizeAllowed: MIN_PART_BYTES })
    }
  }
  try {
    const partMd5s = Buffer.concat(chosen.map((p) => Buffer.from(unquote(p.etag), "hex")))
    const contentEtag = `${createHash("md5").update(partMd5s).digest("hex")}-${chosen.length}`
    const info = await putObject(ctx.state.root, bucket, key, concatFiles(chosen.map((p) => p.file)), { contentEtag: () => contentEtag })
    await saveProps(ctx.state.root, bucket, key, { etag: info.etag, metadata: upload.metadata ?? {}, headers: {} })
    await fs.rm(dir, { recursive: true, force: true })
    sendXml(ctx, 200, `${XML_DECL_S3}<CompleteMultipartUploadResult xmlns="${S3_XMLNS}">${el("Location", `${ctx.state.url}/${bucket}/${key.split("/").map(encodeURIComponent).join("/")}`)}${el("Bucket", bucket)}${el("Key", key)}${el("ETag", info.etag)}</CompleteMultipartUploadResult>`)
  } catch (e) {
    if (e instanceof PutConflict) return s3Error(ctx, 409, "KeyConflict", e.message, { Key: key })
    throw e
  }
}

export const abortUpload = async (ctx: Ctx, bucket: string, key: string): Promise<void> => {
  ctx.req.resume()
  const id = await theUpload(ctx, bucket, key)
  if (id === undefined) return noSuchUpload(ctx)
  await fs.rm(uploadDir(ctx.state.root, id), { recursive: true, force: true })
  ctx.res.writeHead(204, { "Content-Length": 0 })
  ctx.res.end()
}

export const listParts = async (ctx: Ctx, bucket: string, key: string): Promise<void> => {
  ctx.req.resume()
  const id = await theUpload(ctx, bucket, key)
  if (id === undefined) return noSuchUpload(ctx)
  const max = Math.min(1000, Number(ctx.query.get("max-parts") ?? 1000) || 1000)
  const after = Number(ctx.query.get("part-number-marker") ?? 0) || 0
  const all = (await listPartFiles(uploadDir(ctx.state.root, id))).filter((p) => p.number > after)
  const page = all.slice(0, max)
  const truncated = all.length > max
  sendXml(
    ctx,
    200,
    `${XML_DECL_S3}<ListPartsResult xmlns="${S3_XMLNS}">${el("Bucket", bucket)}${el("Key", key)}${el("UploadId", id)}` +
      `${el("PartNumberMarker", after)}${truncated ? el("NextPartNumberMarker", page[page.length - 1]!.number) : ""}${el("MaxParts", max)}${el("IsTruncated", truncated)}` +
      `<StorageClass>STANDARD</StorageClass>` +
      page.map((p) => `<Part>${el("PartNumber", p.number)}${el("LastModified", p.modified.toISOString())}${el("ETag", p.etag)}${el("Size", p.size)}</Part>`).join("") +
      `</ListPartsResult>`
  )
}

export const listUploads = async (ctx: Ctx, bucket: string): Promise<void> => {
  const prefix = ctx.query.get("prefix") ?? ""
  const out: Array<{ id: string; meta: UploadMeta }> = []
  for (const id of await fs.readdir(uploadsDir(ctx.state.root)).catch(() => [] as Array<string>)) {
    const meta = await readMeta(ctx.state.root, id)
    if (meta && meta.bucket === bucket && meta.key.startsWith(prefix)) out.push({ id, meta })
  }
  out.sort((a, b) => (a.meta.key < b.meta.key ? -1 : a.meta.key > b.meta.key ? 1 : a.meta.initiated < b.meta.initiated ? -1 : 1))
  sendXml(
    ctx,
    200,
    `${XML_DECL_S3}<ListMultipartUploadsResult xmlns="${S3_XMLNS}">${el("Bucket", bucket)}${el("Prefix", prefix)}<KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker>` +
      `${el("MaxUploads", 1000)}<IsTruncated>false</IsTruncated>` +
      out.map((u) => `<Upload>${el("Key", u.meta.key)}${el("UploadId", u.id)}${el("Initiated", u.meta.initiated)}<StorageClass>STANDARD</StorageClass></Upload>`).join("") +
      `</ListMultipartUploadsResult>`
  )
}

/** Removes uploads started more than `ttlMs` ago and never completed or aborted; returns how many. */
// Ages are file mtimes (the OS's wall clock), so `now` defaults to the wall clock, not the Effect Clock.
export const sweepUploads = async (root: string, ttlMs: number, now = Date.now()): Promise<number> => {
  let removed = 0
  for (const id of await fs.readdir(uploadsDir(root)).catch(() => [] as Array<string>)) {
    const meta = await readMeta(root, id)
    const started = meta === undefined ? (await fs.stat(uploadDir(root, id)).catch(() => undefined))?.mtimeMs : Date.parse(meta.initiated)
    if (started !== undefined && now - started > ttlMs) {
      await fs.rm(uploadDir(root, id), { recursive: true, force: true })
      removed++
    }
  }
  return removed
}
