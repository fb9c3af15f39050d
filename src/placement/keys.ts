import type { BlockId, NodeInfo } from "../core/ids.js"
import { prefixState, sha256Into as importedSha256Into, sha256IntoAfterPrefix as importedAfterPrefix } from "./sha256.js"

// Hot-path imports are re-bound locally: under vitest (vite-node) every access to an imported
// binding is a getter call on the module namespace, which a per-lookup path should not pay.
const sha256Into = importedSha256Into
const sha256IntoAfterPrefix = importedAfterPrefix

/**
 * Canonical byte layouts hashed by placement (DESIGN.md "Placement"): a field is a u64 LE
 * byte length followed by the UTF-8 bytes, so every language derives the same hashes.
 */

const BLOCK_DOMAIN = Buffer.from("talon-cache-maglev-block-v1\0", "latin1")
/** The domain is exactly 28 bytes, so SHA-256 rounds 0–6 of every block key are constant. */
const BLOCK_MID = prefixState(BLOCK_DOMAIN)
const WORKER_DOMAIN = Buffer.from("talon-cache-maglev-worker-v1\0", "latin1")
const MEMBERSHIP_DOMAIN = Buffer.from("talon-cache-membership-v1\0", "latin1")
/** Our own domain for HRW worker seeds; HRW is not part of the wire contract. */
const HRW_WORKER_DOMAIN = Buffer.from("talon-ts-hrw-worker-v1\0", "latin1")

/** 2^-32: multiplying by it is exact and cheaper than dividing by 2^32. */
const INV_TWO_32 = 1 / 0x1_0000_0000

/** Byte-swap a 32-bit word: digest words are big-endian, Talon reads the digest little-endian. */
const bswap = (x: number): number =>
  (((x & 0xff) << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24)) >>> 0

/** Writes a u64 LE at `off` (any safe non-negative integer). */
const writeU64 = (buf: Uint8Array, off: number, v: number): void => {
  const lo = v >>> 0
  const hi = Math.floor(v * INV_TWO_32) >>> 0
  buf[off] = lo
  buf[off + 1] = lo >>> 8
  buf[off + 2] = lo >>> 16
  buf[off + 3] = lo >>> 24
  buf[off + 4] = hi
  buf[off + 5] = hi >>> 8
  buf[off + 6] = hi >>> 16
  buf[off + 7] = hi >>> 24
}

/**
 * Writes field(s) at `off` and returns the offset after it. ASCII is copied by hand (ids,
 * buckets and ETags almost always are); anything else goes through the UTF-8 encoder. The
 * caller guarantees room for 8 + 3 × s.length bytes.
 */
const writeField = (buf: Buffer, off: number, s: string): number => {
  const start = off + 8
  const n = s.length
  let i = 0
  for (; i < n; i++) {
    const c = s.charCodeAt(i)
    if (c >= 0x80) break
    buf[start + i] = c
  }
  const len = i === n ? n : i + buf.write(s.slice(i), start + i, "utf8")
  // A JS string's UTF-8 length is far below 2^32: the high word is zero.
  buf[off] = len
  buf[off + 1] = len >>> 8
  buf[off + 2] = len >>> 16
  buf[off + 3] = len >>> 24
  buf[off + 4] = 0
  buf[off + 5] = 0
  buf[off + 6] = 0
  buf[off + 7] = 0
  return start + len
}

/**
 * Hashes blocks into a reusable scratch buffer: one SHA-256, no allocation unless a key is
 * longer than any seen before. Single-threaded JS makes one shared instance safe; results
 * are read from the public fields right after `hash` returns.
 */
export class BlockHasher {
  private buf: Buffer = Buffer.alloc(512)
  private readonly digest = new Int32Array(8)
  /** Digest bytes 0–3 read little-endian: the low 32 bits of Talon's `low64`. */
  lo = 0
  /** Digest bytes 4–7 read little-endian: the high 32 bits of `low64`. */
  lo2 = 0
  /** Digest bytes 8–11 read little-endian: the low 32 bits of Talon's second u64 (`step`). */
  hi = 0

  constructor() {
    BLOCK_DOMAIN.copy(this.buf, 0)
  }

  hash(block: BlockId): void {
    const object = block.object
    const bucket = object.bucket
    const path = object.objectPath
    const version = block.version
    // Worst case UTF-8 is 3 bytes per UTF-16 unit; +72 covers fixed fields and padding.
    const worst = BLOCK_DOMAIN.length + 1 + 24 + 12 + 72 + 3 * (bucket.length + path.length + version.length)
    if (worst > this.buf.length) {
      const bigger = Buffer.alloc(Math.max(worst, this.buf.length * 2))
      BLOCK_DOMAIN.copy(bigger, 0)
      this.buf = bigger
    }
    const buf = this.buf
    let off = BLOCK_DOMAIN.length
    buf[off++] = object.backend
    off = writeField(buf, off, bucket)
    off = writeField(buf, off, path)
    writeU64(buf, off, block.offset)
    off += 8
    const size = block.blockSize
    buf[off] = size
    buf[off + 1] = size >>> 8
    buf[off + 2] = size >>> 16
    buf[off + 3] = size >>> 24
    off = writeField(buf, off + 4, version)
    const d = this.digest
    sha256IntoAfterPrefix(buf, off, d, BLOCK_MID)
    this.lo = bswap(d[0]!)
    this.lo2 = bswap(d[1]!)
    this.hi = bswap(d[2]!)
  }
}

let fieldScratch = Buffer.alloc(1024)
const fieldDigest = new Int32Array(8)

/**
 * SHA-256 of `domain ++ field(f) for each f` into `fieldDigest` (cold path: table builds).
 * Reuses one scratch buffer: a fresh zeroed Buffer per worker costs more than its hash.
 */
const hashFields = (domain: Buffer, fields: ReadonlyArray<string>): Int32Array => {
  let worst = domain.length + 72
  for (const f of fields) worst += 8 + 3 * f.length
  if (worst > fieldScratch.length) fieldScratch = Buffer.alloc(Math.max(worst, fieldScratch.length * 2))
  const buf = fieldScratch
  domain.copy(buf, 0)
  let off = domain.length
  for (const f of fields) off = writeField(buf, off, f)
  sha256Into(buf, off, fieldDigest)
  return fieldDigest
}

/**
 * DESIGN.md step 3: a worker's Maglev permutation, `offset = low64 & mask`,
 * `skip = (second u64 | 1) & mask`. `mask < 2^32`, so only the low 32 bits of each u64 matter.
 */
export const workerPermutation = (id: string, mask: number): { offset: number; skip: number } => {
  const d = hashFields(WORKER_DOMAIN, [id])
  return { offset: (bswap(d[0]!) & mask) >>> 0, skip: ((bswap(d[2]!) | 1) & mask) >>> 0 }
}

/** 64 bits of per-worker seed for HRW scoring, as two 32-bit words. */
export const hrwWorkerSeed = (id: string): readonly [number, number] => {
  const d = hashFields(HRW_WORKER_DOMAIN, [id])
  return [bswap(d[0]!), bswap(d[1]!)]
}

/**
 * Talon's `cache_membership_epoch`: SHA-256 over `talon-cache-membership-v1\0` and, per worker
 * in the given order, field(id) ++ field(address); the first 8 bytes big-endian, at least 1.
 */
export const membershipToken = (workers: ReadonlyArray<NodeInfo>): bigint => {
  if (workers.length === 0) return 0n
  const fields: Array<string> = []
  for (const w of workers) fields.push(w.id, w.address)
  const d = hashFields(MEMBERSHIP_DOMAIN, fields)
  const token = (BigInt(d[0]! >>> 0) << 32n) | BigInt(d[1]! >>> 0)
  return token === 0n ? 1n : token
}

/** The single scratch hasher shared by every placement on this thread. */
export const sharedBlockHasher = new BlockHasher()
