/**
 * Azure block blobs in the origin stub: Put Block stages a block in
 * `<root>/.talon-tmp/blocks/<hash of container/blob>/<hex of block id>`; Put Block List
 * concatenates the listed blocks (streaming) into the blob through the atomic rename and
 * records the committed list; Get Block List reports both. Staged blocks that are never
 * committed expire (sweepBlocks), as Azure discards them.
 */
import { createHash, randomBytes } from "node:crypto"
import { createWriteStream } from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { pipeline } from "node:stream/promises"
import { XMLParser } from "fast-xml-parser"
import { azureError } from "../http/azureErrors.js"
import { writeFailed } from "./azure.js"
import { writeProps } from "./blobProps.js"
import { header, sendEmpty, sendXml } from "../http/context.js"
import type { Ctx } from "./context.js"
import { TMP_DIR } from "./layout.js"
import { putObject, statObject } from "./store.js"
import { algorithmsFor, concatFiles, Digester, readBounded, verifyDigests } from "./upload.js"
import { el, XML_DECL_AZURE } from "../http/xml.js"

/** Azure's limits: 50,000 blocks per blob, ids up to 64 bytes (base64 in the list). */
const MAX_BLOCK_LIST_BYTES = 8 * 1024 * 1024

export const blocksRoot = (root: string) => path.join(root, TMP_DIR, "blocks")
const stagingDir = (root: string, container: string, blob: string) =>
  path.join(blocksRoot(root), createHash("sha256").update(`${container}/${blob}`).digest("hex"))
const committedFile = (root: string, container: string, blob: string) =>
  path.join(root, TMP_DIR, "blocklists", `${createHash("sha256").update(`${container}/${blob}`).digest("hex")}.json`)
const blockName = (id: string) => Buffer.from(id, "utf8").toString("hex")
const blockIdOf = (name: string) => (/^[0-9a-f]+$/.test(name) ? Buffer.from(name, "hex").toString("utf8") : undefined)

const invalidQuery = (ctx: Ctx, name: string) =>
  azureError(ctx, 400, "InvalidQueryParameterValue", `Value for one of the query parameters specified in the request URI is invalid (${name}).`)

export const putBlock = async (ctx: Ctx, container: string, blob: string) => {
  const blockId = ctx.query.get("blockid")
  if (blockId === null || blockId === "" || Buffer.byteLength(blockId) > 100) return invalidQuery(ctx, "blockid")
  const dir = stagingDir(ctx.state.root, container, blob)
  await fs.mkdir(dir, { recursive: true })
  const tmp = path.join(dir, `tmp-${randomBytes(6).toString("hex")}`)
  const digester = new Digester(algorithmsFor(ctx.req.headers))
  try {
    await pipeline(ctx.req, digester, createWriteStream(tmp, { flags: "wx" }))
    verifyDigests(digester, ctx.req.headers, new Map())
    await fs.rename(tmp, path.join(dir, blockName(blockId)))
    ctx.state.stats.bytesReceived += digester.length
    sendEmpty(ctx, 201, { "Content-MD5": digester.digest("md5") ?? "", "x-ms-request-server-encrypted": "true" })
  } catch (e) {
    await fs.rm(tmp, { force: true })
    writeFailed(ctx, e)
  }
}

const parser = new XMLParser({ preserveOrder: true, parseTagValue: false, trimValues: true })

type Entry = { readonly kind: "Latest" | "Committed" | "Uncommitted"; readonly id: string }

/** The listed blocks, in order; `undefined` when the document is not a block list. */
const parseBlockList = (text: string): Array<Entry> | undefined => {
  let doc: Array<Record<string, unknown>>
  try {
    doc = parser.parse(text) as Array<Record<string, unknown>>
  } catch {
    return undefined
  }
  const roots = doc.filter((n) => !("?xml" in n))
  if (roots.length !== 1 || !("BlockList" in roots[0]!)) return undefined
  const out: Array<Entry> = []
  for (const node of roots[0]!.BlockList as Array<Record<string, unknown>>) {
    const kind = Object.keys(node).find((k) => k !== ":@")
    if (kind !== "Latest" && kind !== "Committed" && kind !== "Uncommitted") return undefined
    const inner = node[kind] as Array<Record<string, unknown>>
    const id = inner.length === 1 && "#text" in inner[0]! ? String(inner[0]!["#text"]) : ""
    if (id === "") return undefined
    out.push({ kind, id })
  }
  return out
}

interface Committed {
  readonly etag: string
  readonly blocks: ReadonlyArray<{ readonly id: string; readonly size: number }>
}

const readCommitted = async (ctx: Ctx, container: string, blob: string): Promise<Committed | undefined> => {
  const current = await statObject(ctx.state.root, container, blob)
  if (current === undefined) return undefined
  try {
    const c = JSON.parse(await fs.readFile(committedFile(ctx.state.root, container, blob), "utf8")) as Committed
    // A blob replaced by Put Blob or a copy since has no block list of its own: one implicit block.
    return c.etag === current.etag ? c : { etag: current.etag, blocks: [] }
  } catch {
    return { etag: current.etag, blocks: [] }
  }
}

export const putBlockList = async (ctx: Ctx, container: string, blob: string) => {
  const text = (await readBounded(ctx.req, MAX_BLOCK_LIST_BYTES))?.toString("utf8")
  if (text === undefined) {
    ctx.res.setHeader("Connection", "close")
    return azureError(ctx, 413, "RequestBodyTooLarge", `The block list is larger than ${MAX_BLOCK_LIST_BYTES} bytes; a blob has at most 50,000 blocks.`)
  }
  const entries = parseBlockList(text)
  if (entries === undefined) {
    return azureError(ctx, 400, "InvalidXmlDocument", "XML specified is not syntactically valid: expected <BlockList> with <Latest>, <Committed> or <Uncommitted> block ids.")
  }
  const dir = stagingDir(ctx.state.root, container, blob)
  const committed = (await readCommitted(ctx, container, blob))?.blocks ?? []
  const files: Array<{ id: string; file: string; size: number }> = []
  for (const e of entries) {
    const file = path.join(dir, blockName(e.id))
    const staged = e.kind === "Committed" ? undefined : await fs.stat(file).catch(() => undefined)
    if (staged !== undefined) {
      files.push({ id: e.id, file, size: staged.size })
      continue
    }
    // Committed blocks are not kept apart from the blob (the stub stores blobs whole): only staged ones can be listed.
    const why = committed.some((b) => b.id === e.id) ? "re-committing a committed block is not supported by this stub; stage it again" : "no such block was staged (or it expired)"
    return azureError(ctx, 400, "InvalidBlockList", `The specified block list is invalid: block ${e.id}: ${why}.`)
  }
  try {
    const info = await putObject(ctx.state.root, container, blob, concatFiles(files.map((f) => f.file)), {
      conditions: { ifMatch: header(ctx, "if-match"), ifNoneMatch: header(ctx, "if-none-match") }
    })
    await fs.rm(dir, { recursive: true, force: true })
    const record: Committed = { etag: info.etag, blocks: files.map((f) => ({ id: f.id, size: f.size })) }
    await fs.mkdir(path.dirname(committedFile(ctx.state.root, container, blob)), { recursive: true })
    await fs.writeFile(committedFile(ctx.state.root, container, blob), JSON.stringify(record))
    await writeProps(ctx, container, blob, info.etag)
    sendEmpty(ctx, 201, { ETag: info.etag, "Last-Modified": info.lastModified.toUTCString(), "x-ms-request-server-encrypted": "true" })
  } catch (e) {
    writeFailed(ctx, e)
  }
}

export const getBlockList = async (ctx: Ctx, container: string, blob: string) => {
  ctx.req.resume()
  const type = (ctx.query.get("blocklisttype") ?? "committed").toLowerCase()
  if (type !== "committed" && type !== "uncommitted" && type !== "all") return invalidQuery(ctx, "blocklisttype")
  const committed = await readCommitted(ctx, container, blob)
  const dir = stagingDir(ctx.state.root, container, blob)
  const staged: Array<{ id: string; size: number }> = []
  for (const name of await fs.readdir(dir).catch(() => [] as Array<string>)) {
    const id = blockIdOf(name)
    const s = id === undefined ? undefined : await fs.stat(path.join(dir, name)).catch(() => undefined)
    if (id !== undefined && s) staged.push({ id, size: s.size })
  }
  if (committed === undefined && staged.length === 0) return azureError(ctx, 404, "BlobNotFound", "The specified blob does not exist.")
  const list = (blocks: ReadonlyArray<{ id: string; size: number }>) => blocks.map((b) => `<Block>${el("Name", b.id)}${el("Size", b.size)}</Block>`).join("")
  const body =
    `${XML_DECL_AZURE}<BlockList>` +
    (type === "uncommitted" ? "" : `<CommittedBlocks>${list(committed?.blocks ?? [])}</CommittedBlocks>`) +
    (type === "committed" ? "" : `<UncommittedBlocks>${list(staged)}</UncommittedBlocks>`) +
    `</BlockList>`
  const headers: Record<string, string> = committed === undefined ? {} : { ETag: committed.etag }
  sendXml(ctx, 200, body, headers)
}

/** Removes staging directories untouched for `ttlMs` (uncommitted blocks); returns how many. */
// Ages are file mtimes (the OS's wall clock), so `now` defaults to the wall clock, not the Effect Clock.
export const sweepBlocks = async (root: string, ttlMs: number, now = Date.now()): Promise<number> => {
  let removed = 0
  for (const name of await fs.readdir(blocksRoot(root)).catch(() => [] as Array<string>)) {
    const dir = path.join(blocksRoot(root), name)
    let newest = (await fs.stat(dir).catch(() => undefined))?.mtimeMs ?? 0
    for (const f of await fs.readdir(dir).catch(() => [] as Array<string>)) {
      newest = Math.max(newest, (await fs.stat(path.join(dir, f)).catch(() => undefined))?.mtimeMs ?? 0)
    }
    if (now - newest > ttlMs) {
      await fs.rm(dir, { recursive: true, force: true })
      removed++
    }
  }
  return removed
}
