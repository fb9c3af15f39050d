/**
 * The hit path's decoder of GetRange bodies. A client reads many ranges of
 * few objects, so the bincode ObjectId at the front of a body is nearly always
 * one seen a moment ago: compared byte for byte against the last few, it
 * yields the same ObjectId object, its validation result and its object key
 * string, without decoding two UTF-8 strings, building a path for validation
 * or concatenating (and re-hashing) a fresh key per request. Only the two u64
 * fields after it are read. Anything not cached takes the full decoder.
 *
 * A GetCachedRange body is the same shape with the version string after the ObjectId: its
 * cache (a separate instance) matches ObjectId and version bytes together.
 */
import type { ObjectId } from "../../core/ids.js"

export interface KnownObject {
  readonly object: ObjectId
  /** `objectKey(object)`: the version cache's key. */
  readonly key: string
  /** Why the object id is refused (empty/`.`/`..` components), or undefined when valid. */
  readonly problem: string | undefined
  /** The ObjectId's bincode bytes (a private copy); for a GetCachedRange, ObjectId and version. */
  readonly bytes: Uint8Array
  /** The version a GetCachedRange body names (undefined for GetRange). */
  readonly version?: string | undefined
}

/** Trailing `offset: u64, len: u64` of a RangeRequest body. */
const TAIL = 16
/** Most-recent entries compared; a miss costs this many length checks at most. */
const SIZE = 16
const TWO_32 = 4294967296
/** Above this a u64 is not an exact JS number; the full decoder reports it. */
const MAX_HI = 0x1fffff

export class ObjectIdCache {
  readonly #entries: Array<KnownObject> = []
  /** Set by a successful `match`: the body's offset and len. */
  offset = 0
  len = 0

  /** The cached object whose bytes start `body` (followed by exactly offset and len), else undefined. */
  match(body: Uint8Array): KnownObject | undefined {
    return this.matchAt(body, 0, body.length)
  }

  /** `match` of the body at `buf[start, end)`, read in place (the serve loop's read buffer is reused). */
  matchAt(buf: Uint8Array, start: number, end: number): KnownObject | undefined {
    const n = end - start - TAIL
    if (n <= 0) return undefined
    const entries = this.#entries
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!
      const b = e.bytes
      if (b.length !== n) continue
      let j = 0
      while (j < n && b[j] === buf[start + j]) j++
      if (j !== n) continue
      const t = start + n
      const offHi = readU32LE(buf, t + 4)
      const lenHi = readU32LE(buf, t + 12)
      if (offHi > MAX_HI || lenHi > MAX_HI) return undefined
      this.offset = offHi * TWO_32 + readU32LE(buf, t)
      this.len = lenHi * TWO_32 + readU32LE(buf, t + 8)
      if (i > 0) {
        entries[i] = entries[0]!
        entries[0] = e
      }
      return e
    }
    return undefined
  }

  /** Remembers a body's decoded object (call after a full decode that succeeded). */
  remember(body: Uint8Array, object: ObjectId, key: string, problem: string | undefined, version?: string): void {
    const n = body.length - TAIL
    if (n <= 0) return
    this.#entries.unshift({ object, key, problem, bytes: Uint8Array.prototype.slice.call(body, 0, n), version })
    if (this.#entries.length > SIZE) this.#entries.pop()
  }
}

const readU32LE = (b: Uint8Array, at: number): number => (b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16)) + b[at + 3]! * 16777216
