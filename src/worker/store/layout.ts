/**
 * On-disk layout of one cache dir. A BlockId holds arbitrary strings (object
 * paths, ETags), so it never becomes a file name directly: each block lives in
 * `v1/<h0h1>/<sha256 of its key>/`, and a small `meta` file in that directory
 * holds the full BlockId so a restart can rebuild the index from disk alone.
 *
 *   v1/ab/abcdef…/meta      JSON BlockMeta (written first, temp + rename)
 *   v1/ab/abcdef…/block     whole mode: the block's bytes
 *   v1/ab/abcdef…/p<i>      paged mode: one file per present page
 *   v1/ab/abcdef…/bitmap    paged mode: PresentBitmap.toBytes() (a hint; page files are the truth)
 *   v1/ab/abcdef…/sums      XXH64 per unit, recorded at fill (checksum.ts); a unit without one is dropped at start-up
 *   tmp/                    fills in progress; emptied at start-up
 */
import { createHash } from "node:crypto"
import * as path from "node:path"
import { Backend, type BlockId } from "../../core/ids.js"

export const LAYOUT_VERSION = "v1"
export const META_FILE = "meta"
export const BLOCK_FILE = "block"
export const BITMAP_FILE = "bitmap"
export const SUMS_FILE = "sums"
export const TMP_DIR = "tmp"

/** Index key of a block: every BlockId field, NUL-separated (NUL cannot occur in a valid key or ETag). */
export const blockKey = (id: BlockId): string =>
  `${id.object.backend}\0${id.object.bucket}\0${id.object.objectPath}\0${id.offset}\0${id.blockSize}\0${id.version}`

/** Persistent description of a block: the BlockId plus the geometry it was stored with. */
export interface BlockMeta {
  readonly id: BlockId
  /** Bytes the block holds (the last block of an object is short). */
  readonly length: number
  /** 0 = whole block (one file); otherwise the page size of its page files. */
  readonly pageSize: number
  /** Size of the object version the block belongs to, so a restart can answer without a HEAD. */
  readonly objectSize: number
}

/** Directory name of a block: the page size is part of the hash so a geometry change never reuses a directory. */
export const blockDirName = (key: string, pageSize: number): string =>
  createHash("sha256").update(key).update(`\0${pageSize}`).digest("hex")

export const blockDirPath = (root: string, dirName: string): string =>
  path.join(root, LAYOUT_VERSION, dirName.slice(0, 2), dirName)

export const pageFileName = (index: number): string => `p${index}`

/** Page index of a `p<i>` file name, or undefined for anything else. */
export const parsePageFileName = (name: string): number | undefined => {
  if (name.length < 2 || name.charCodeAt(0) !== 112 /* p */) return undefined
  const digits = name.slice(1)
  if (!/^(0|[1-9][0-9]{0,9})$/.test(digits)) return undefined
  return Number(digits)
}

export const encodeMeta = (meta: BlockMeta): string =>
  JSON.stringify({
    backend: meta.id.object.backend,
    bucket: meta.id.object.bucket,
    objectPath: meta.id.object.objectPath,
    offset: meta.id.offset,
    blockSize: meta.id.blockSize,
    version: meta.id.version,
    length: meta.length,
    pageSize: meta.pageSize,
    objectSize: meta.objectSize
  })

const isNat = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0

/** Inverse of `encodeMeta`; undefined for anything malformed (the directory is then discarded). */
export const decodeMeta = (text: string): BlockMeta | undefined => {
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch {
    return undefined
  }
  if (typeof raw !== "object" || raw === null) return undefined
  const r = raw as Record<string, unknown>
  if (r.backend !== Backend.S3 && r.backend !== Backend.Gcs && r.backend !== Backend.Azure) return undefined
  if (typeof r.bucket !== "string" || typeof r.objectPath !== "string" || typeof r.version !== "string") return undefined
  if (!isNat(r.offset) || !isNat(r.blockSize) || !isNat(r.length) || !isNat(r.pageSize) || !isNat(r.objectSize)) {
    return undefined
  }
  if (r.blockSize === 0 || r.length > r.blockSize || r.offset + r.length > r.objectSize) return undefined
  return {
    id: {
      object: { backend: r.backend, bucket: r.bucket, objectPath: r.objectPath },
      offset: r.offset,
      blockSize: r.blockSize,
      version: r.version
    },
    length: r.length,
    pageSize: r.pageSize,
    objectSize: r.objectSize
  }
}
