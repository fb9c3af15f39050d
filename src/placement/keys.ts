import type { BlockId, NodeInfo } from "../core/ids.js"
import { paddedLength, prefixState, sha256Words as importedSha256Words, sha256WordsAfterPrefix as importedAfterPrefix } from "./sha256.js"

// Hot-path imports are re-bound locally: under vitest (vite-node) every access to an imported
// binding is a getter call on the module namespace, which a per-lookup path should not pay.
const sha256Words = importedSha256Words
const sha256WordsAfterPrefix = importedAfterPrefix

/**
 * Canonical byte layouts hashed by placement (docs/architecture.md "Placement"): a field is a u64 LE
 * byte length followed by the UTF-8 bytes, so every language derives the same hashes.
 *
 * Keys are written straight into the SHA-256 message words: byte i of the key goes to byte
 * `i ^ 3` of a Uint8Array over the word array (see sha256.ts), so there is no byte buffer to
 * convert and nothing is allocated per lookup. The 3 is a literal on purpose: a module
 * constant costs context loads and checks on every lookup (docs/decisions/measured-in-code.md).
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

/** A word array for messages of up to `bytes` bytes (padding included), whole blocks. */
const wordsFor = (bytes: number): Int32Array => new Int32Array(paddedLength(bytes) >>> 2)

/** Writes `domain` at key byte 0 of `b` (a byte view of message words). */
const writeDomain = (b: Uint8Array, domain: Uint8Array): void => {
  for (let i = 0; i < domain.length; i++) b[i ^ 3] = domain[i]!
}

/**
 * Writes field(s) at key byte `off` and returns the offset after it. The loop copies ASCII
 * (ids, buckets and ETags almost always are); anything else continues in `writeUtf8`, kept
 * separate so this stays small enough to inline into `BlockHasher.hash`. The caller
 * guarantees room for 8 + 3 × s.length bytes.
 */
const writeField = (b: Uint8Array, off: number, s: string): number => {
  const start = off + 8
  const n = s.length
  let i = 0
  for (; i < n; i++) {
    const c = s.charCodeAt(i)
    if (c >= 0x80) break
    b[(start + i) ^ 3] = c
  }
  const end = i === n ? start + n : writeUtf8(b, start + i, s, i)
  const len = end - start
  // A JS string's UTF-8 length is far below 2^32: the high word is zero.
  b[off ^ 3] = len
  b[(off + 1) ^ 3] = len >>> 8
  b[(off + 2) ^ 3] = len >>> 16
  b[(off + 3) ^ 3] = len >>> 24
  b[(off + 4) ^ 3] = 0
  b[(off + 5) ^ 3] = 0
  b[(off + 6) ^ 3] = 0
  b[(off + 7) ^ 3] = 0
  return end
}

/** UTF-8 of `s` from index `i` at key byte `o`, lone surrogates as U+FFFD like Buffer's encoder; returns the end. */
const writeUtf8 = (b: Uint8Array, o: number, s: string, i: number): number => {
  const n = s.length
  for (; i < n; i++) {
    let c = s.charCodeAt(i)
    if (c < 0x80) {
      b[o++ ^ 3] = c
    } else if (c < 0x800) {
      b[o++ ^ 3] = 0xc0 | (c >>> 6)
      b[o++ ^ 3] = 0x80 | (c & 0x3f)
    } else {
      if (c >= 0xd800 && c <= 0xdfff) {
        const d = i + 1 < n ? s.charCodeAt(i + 1) : 0
        if (c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) {
          c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00)
          i++
          b[o++ ^ 3] = 0xf0 | (c >>> 18)
          b[o++ ^ 3] = 0x80 | ((c >>> 12) & 0x3f)
          b[o++ ^ 3] = 0x80 | ((c >>> 6) & 0x3f)
          b[o++ ^ 3] = 0x80 | (c & 0x3f)
          continue
        }
        c = 0xfffd
      }
      b[o++ ^ 3] = 0xe0 | (c >>> 12)
      b[o++ ^ 3] = 0x80 | ((c >>> 6) & 0x3f)
      b[o++ ^ 3] = 0x80 | (c & 0x3f)
    }
  }
  return o
}

/**
 * Hashes blocks into reusable scratch words: one SHA-256, no allocation unless a key is
 * longer than any seen before. Single-threaded JS makes one shared instance safe; results
 * are read from the public fields right after `hash` returns.
 */
export class BlockHasher {
  private words: Int32Array = wordsFor(440)
  private bytes: Uint8Array = new Uint8Array(this.words.buffer)
  private readonly digest = new Int32Array(8)
  /** Digest bytes 0–3 read little-endian: the low 32 bits of Talon's `low64`. */
  lo = 0
  /** Digest bytes 4–7 read little-endian: the high 32 bits of `low64`. */
  lo2 = 0
  /** Digest bytes 8–11 read little-endian: the low 32 bits of Talon's second u64 (`step`). */
  hi = 0

  constructor() {
    writeDomain(this.bytes, BLOCK_DOMAIN)
  }

  hash(block: BlockId): void {
    const object = block.object
    const bucket = object.bucket
    const path = object.objectPath
    const version = block.version
    // Worst case UTF-8 is 3 bytes per UTF-16 unit; fixed fields are 1 + 3 × 8 + 4 bytes.
    const worst = 28 + 29 + 8 + 3 * (bucket.length + path.length + version.length)
    if (paddedLength(worst) > this.bytes.length) {
      this.words = wordsFor(Math.max(worst, this.bytes.length * 2))
      this.bytes = new Uint8Array(this.words.buffer)
      writeDomain(this.bytes, BLOCK_DOMAIN)
    }
    const b = this.bytes
    b[28 ^ 3] = object.backend
    let off = writeField(b, 29, bucket)
    off = writeField(b, off, path)
    const offset = block.offset
    const lo = offset >>> 0
    const hi = Math.floor(offset * INV_TWO_32) >>> 0
    b[off ^ 3] = lo
    b[(off + 1) ^ 3] = lo >>> 8
    b[(off + 2) ^ 3] = lo >>> 16
    b[(off + 3) ^ 3] = lo >>> 24
    b[(off + 4) ^ 3] = hi
    b[(off + 5) ^ 3] = hi >>> 8
    b[(off + 6) ^ 3] = hi >>> 16
    b[(off + 7) ^ 3] = hi >>> 24
    const size = block.blockSize
    b[(off + 8) ^ 3] = size
    b[(off + 9) ^ 3] = size >>> 8
    b[(off + 10) ^ 3] = size >>> 16
    b[(off + 11) ^ 3] = size >>> 24
    off = writeField(b, off + 12, version)
    const d = this.digest
    sha256WordsAfterPrefix(this.words, off, d, BLOCK_MID)
    this.lo = bswap(d[0]!)
    this.lo2 = bswap(d[1]!)
    this.hi = bswap(d[2]!)
  }
}

let fieldWords = wordsFor(1024)
let fieldBytes = new Uint8Array(fieldWords.buffer)
const fieldDigest = new Int32Array(8)

/**
 * SHA-256 of `domain ++ field(f) for each f` into `fieldDigest` (cold path: table builds).
 * Reuses one scratch: a fresh array per worker costs more than its hash.
 */
const hashFields = (domain: Buffer, fields: ReadonlyArray<string>): Int32Array => {
  let worst = domain.length
  for (const f of fields) worst += 8 + 3 * f.length
  if (paddedLength(worst) > fieldBytes.length) {
    fieldWords = wordsFor(Math.max(worst, fieldBytes.length * 2))
    fieldBytes = new Uint8Array(fieldWords.buffer)
  }
  const b = fieldBytes
  writeDomain(b, domain)
  let off = domain.length
  for (const f of fields) off = writeField(b, off, f)
  sha256Words(fieldWords, off, fieldDigest)
  return fieldDigest
}

/**
 * Placement step 3: a worker's Maglev permutation, `offset = low64 & mask`,
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
