/**
 * The stub's disk operations (plain async, behind the OriginStub service). One
 * namespace for both protocols: an S3 bucket and an Azure container of the same name
 * are the same directory. See layout.ts for how keys map to paths.
 */
import { randomBytes } from "node:crypto"
import { constants as fsc, createWriteStream } from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import type { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import { evaluateConditions, type ConditionHeaders } from "../http/conditions.js"
import { isValidBucket } from "../http/names.js"
import {
  bucketDir,
  compareKeys,
  decodeSegment,
  encodeSegment,
  etagOf,
  nextMtime,
  objectPath,
  rememberContentEtag,
  TMP_DIR
} from "./layout.js"

export interface ObjectInfo {
  readonly key: string
  readonly size: number
  readonly etag: string
  readonly lastModified: Date
  readonly created: Date
  /**
   * GCS's generation: the modification time in microseconds, as GCS's own are. Every write
   * through the stub sets a strictly later mtime (layout.ts `nextMtime`), so an overwrite
   * always yields a new generation.
   */
  readonly generation: string
}

/** An object opened for reading: its metadata and the handle the body streams from. */
export interface OpenObject extends ObjectInfo {
  readonly handle: fs.FileHandle
}

const isMissing = (e: unknown): boolean => {
  const code = (e as NodeJS.ErrnoException).code
  return code === "ENOENT" || code === "ENOTDIR" || code === "EISDIR" || code === "ENAMETOOLONG"
}

const infoFrom = (key: string, s: import("node:fs").BigIntStats): ObjectInfo => ({
  key,
  size: Number(s.size),
  etag: etagOf({ ino: s.ino, size: s.size, mtimeNs: s.mtimeNs }),
  lastModified: new Date(Number(s.mtimeMs)),
  created: new Date(Number(s.birthtimeMs) > 0 ? Number(s.birthtimeMs) : Number(s.mtimeMs)),
  generation: (s.mtimeNs / 1000n).toString()
})

export const bucketExists = async (root: string, bucket: string): Promise<boolean> => {
  if (!isValidBucket(bucket)) return false
  try {
    return (await fs.stat(bucketDir(root, bucket))).isDirectory()
  } catch {
    return false
  }
}

export const listBuckets = async (root: string): Promise<Array<{ name: string; created: Date }>> => {
  const entries = await fs.readdir(root, { withFileTypes: true }).catch(() => [])
  const out: Array<{ name: string; created: Date }> = []
  for (const e of entries) {
    if (!e.isDirectory() || !isValidBucket(e.name)) continue
    const s = await fs.stat(path.join(root, e.name)).catch(() => undefined)
    if (s) out.push({ name: e.name, created: s.birthtimeMs > 0 ? s.birthtime : s.mtime })
  }
  return out.sort((a, b) => compareKeys(a.name, b.name))
}

export const createBucket = async (root: string, bucket: string): Promise<"created" | "exists"> => {
  await fs.mkdir(root, { recursive: true })
  try {
    await fs.mkdir(bucketDir(root, bucket))
    return "created"
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return "exists"
    throw e
  }
}

/** S3 semantics: only an empty bucket can be deleted (`force` for Azure, which drops its blobs). */
export const deleteBucket = async (
  root: string,
  bucket: string,
  force: boolean
): Promise<"deleted" | "missing" | "not-empty"> => {
  if (!(await bucketExists(root, bucket))) return "missing"
  const dir = bucketDir(root, bucket)
  if (force) {
    await fs.rm(dir, { recursive: true, force: true })
    return "deleted"
  }
  if ((await walkKeys(dir, "")).length > 0) return "not-empty"
  await fs.rm(dir, { recursive: true, force: true })
  return "deleted"
}

/** Opens the object; `undefined` when there is no such object. The caller owns the handle. */
export const openObject = async (root: string, bucket: string, key: string): Promise<OpenObject | undefined> => {
  let handle: fs.FileHandle
  try {
    handle = await fs.open(objectPath(root, bucket, key), fsc.O_RDONLY)
  } catch (e) {
    if (isMissing(e)) return undefined
    throw e
  }
  try {
    // Metadata comes from the open descriptor, so it always describes the bytes served
    // even if a writer renames a new version into place meanwhile.
    const s = await handle.stat({ bigint: true })
    if (!s.isFile()) {
      await handle.close()
      return undefined
    }
    return { ...infoFrom(key, s), handle }
  } catch (e) {
    await handle.close().catch(() => undefined)
    throw e
  }
}

export const statObject = async (root: string, bucket: string, key: string): Promise<ObjectInfo | undefined> => {
  try {
    const s = await fs.stat(objectPath(root, bucket, key), { bigint: true })
    return s.isFile() ? infoFrom(key, s) : undefined
  } catch (e) {
    if (isMissing(e)) return undefined
    throw e
  }
}

export class PutConflict extends Error {}
export class PutPreconditionFailed extends Error {}

export interface PutOptions {
  /** Stages the body may pass through before hitting the file (decoders, hashers). */
  readonly transforms?: ReadonlyArray<NodeJS.ReadWriteStream>
  /** Runs after the body is fully written, before it becomes visible; throw to abort. */
  readonly verify?: () => void
  readonly conditions?: ConditionHeaders
  /** The object's content ETag (unquoted), known once the body is written (see layout.ts). */
  readonly contentEtag?: () => string | undefined
}

/**
 * Writes the body to a temp file and renames it into place, so a reader sees either
 * the old object or the whole new one, never a prefix.
 */
export const putObject = async (
  root: string,
  bucket: string,
  key: string,
  body: Readable,
  options: PutOptions = {}
): Promise<ObjectInfo> => {
  const target = objectPath(root, bucket, key)
  const tmpDir = path.join(root, TMP_DIR)
  await fs.mkdir(tmpDir, { recursive: true })
  const tmp = path.join(tmpDir, `put-${process.pid}-${randomBytes(8).toString("hex")}`)
  let renamed = false
  try {
    await pipeline([body, ...(options.transforms ?? []), createWriteStream(tmp, { flags: "wx" })])
    options.verify?.()
    const mtime = nextMtime()
    await fs.utimes(tmp, mtime, mtime)
    const s = await fs.stat(tmp, { bigint: true })
    const content = options.contentEtag?.()
    if (content !== undefined) rememberContentEtag(s, content)
    if (options.conditions) {
      const existing = await statObject(root, bucket, key)
      const outcome = evaluateConditions(options.conditions, existing?.etag, existing?.lastModified.getTime(), false)
      if (outcome !== "proceed") throw new PutPreconditionFailed("precondition failed")
    }
    await renameIntoPlace(tmp, target, path.join(root, bucket))
    renamed = true
    return infoFrom(key, s)
  } finally {
    if (!renamed) await fs.rm(tmp, { force: true }).catch(() => undefined)
  }
}

const renameIntoPlace = async (tmp: string, target: string, bucketRoot: string): Promise<void> => {
  // A concurrent delete may prune the parent directory between mkdir and rename: retry.
  for (let attempt = 0; ; attempt++) {
    try {
      await fs.mkdir(path.dirname(target), { recursive: true })
      await fs.rename(tmp, target)
      return
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code
      if (code === "ENOENT" && attempt < 5) continue
      if (code === "ENOTDIR" || code === "EISDIR" || code === "EEXIST" || code === "ENOTEMPTY") {
        const rel = path.relative(bucketRoot, target)
        throw new PutConflict(
          `key ${JSON.stringify(rel)} conflicts with an existing object or prefix: this stub stores keys as paths, so "a" and "a/b" cannot both exist`
        )
      }
      throw e
    }
  }
}

/** Removes the object and any directories it leaves empty; `false` if there was none. */
export const deleteObject = async (root: string, bucket: string, key: string): Promise<boolean> => {
  const target = objectPath(root, bucket, key)
  try {
    const s = await fs.stat(target)
    if (!s.isFile()) return false
    await fs.unlink(target)
  } catch (e) {
    if (isMissing(e)) return false
    throw e
  }
  const stop = path.resolve(root, bucket)
  for (let dir = path.dirname(target); dir.startsWith(stop + path.sep); dir = path.dirname(dir)) {
    try {
      await fs.rmdir(dir)
    } catch {
      break
    }
  }
  return true
}

/** All keys under `dir` (a bucket directory or a subdirectory at key prefix `base`). */
const walkKeys = async (dir: string, base: string): Promise<string[]> => {
  const out: string[] = []
  const visit = async (d: string, prefix: string): Promise<void> => {
    let entries: import("node:fs").Dirent[]
    try {
      entries = await fs.readdir(d, { withFileTypes: true })
    } catch (e) {
      if (isMissing(e)) return
      throw e
    }
    for (const e of entries) {
      const seg = decodeSegment(e.name)
      if (seg === undefined) continue
      let isDir = e.isDirectory()
      let isFile = e.isFile()
      if (e.isSymbolicLink()) {
        const s = await fs.stat(path.join(d, e.name)).catch(() => undefined)
        isDir = s?.isDirectory() ?? false
        isFile = s?.isFile() ?? false
      }
      if (isDir) await visit(path.join(d, e.name), `${prefix}${seg}/`)
      else if (isFile) out.push(`${prefix}${seg}`)
    }
  }
  await visit(dir, base)
  return out
}

export interface ListQuery {
  readonly prefix: string
  readonly delimiter: string
  /** Exclusive lower bound (a start-after, marker or decoded continuation token). */
  readonly after: string
  readonly maxKeys: number
}

export interface ListResult {
  readonly objects: ReadonlyArray<ObjectInfo>
  readonly prefixes: ReadonlyArray<string>
  readonly truncated: boolean
  /** The last key or common prefix returned, when truncated. */
  readonly nextMarker: string | undefined
}

/**
 * One listing page in UTF-8 key order. Objects and common prefixes both count toward
 * `maxKeys`; a marker equal to a common prefix skips that whole prefix, which is how
 * a page that ended on a prefix continues.
 */
export const listObjects = async (root: string, bucket: string, q: ListQuery): Promise<ListResult> => {
  const segments = q.prefix.split("/")
  segments.pop() // the last segment is only a name prefix
  const startDir = path.join(bucketDir(root, bucket), ...segments.map(encodeSegment))
  const base = segments.length === 0 ? "" : `${segments.join("/")}/`
  if (segments.some((s) => s === "." || s === "..")) return { objects: [], prefixes: [], truncated: false, nextMarker: undefined }
  const keys = (await walkKeys(startDir, base)).filter((k) => k.startsWith(q.prefix)).sort(compareKeys)

  const picked: Array<{ key: string } | { prefix: string }> = []
  let truncated = false
  let lastPrefix: string | undefined
  for (const key of keys) {
    if (q.after !== "" && compareKeys(key, q.after) <= 0) continue
    let item: { key: string } | { prefix: string } = { key }
    if (q.delimiter !== "") {
      const at = key.indexOf(q.delimiter, q.prefix.length)
      if (at >= 0) {
        const cp = key.slice(0, at + q.delimiter.length)
        if (cp === lastPrefix || cp === q.after) continue
        lastPrefix = cp
        item = { prefix: cp }
      }
    }
    if (picked.length >= q.maxKeys) {
      truncated = q.maxKeys > 0
      break
    }
    picked.push(item)
  }

  const objects: ObjectInfo[] = []
  const prefixes: string[] = []
  for (const item of picked) {
    if ("prefix" in item) prefixes.push(item.prefix)
    else {
      // A key deleted between the walk and this stat simply drops out of the page.
      const info = await statObject(root, bucket, item.key)
      if (info) objects.push(info)
    }
  }
  const last = picked[picked.length - 1]
  return {
    objects,
    prefixes,
    truncated,
    nextMarker: truncated && last ? ("prefix" in last ? last.prefix : last.key) : undefined
  }
}

/** Removes temp files left by writers that died mid-upload (their pid no longer runs). */
export const cleanStaleTemps = async (root: string): Promise<number> => {
  const dir = path.join(root, TMP_DIR)
  const names = await fs.readdir(dir).catch(() => [] as string[])
  let removed = 0
  for (const name of names) {
    const m = /^put-(\d+)-/.exec(name)
    if (!m || Number(m[1]) === process.pid) continue
    try {
      process.kill(Number(m[1]), 0)
      continue // still alive: another stub on the same root is writing it
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ESRCH") continue
    }
    await fs.rm(path.join(dir, name), { force: true })
    removed++
  }
  return removed
}
