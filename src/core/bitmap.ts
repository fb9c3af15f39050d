/**
 * Which pages of a paged block are on disk. Backed by 32-bit words so range
 * checks, counts and missing-run scans touch one word per 32 pages.
 * Bits past `size` are always zero: `set` ignores out-of-range pages and
 * `setAll` masks the last word, so word-wise scans need no special casing.
 */

const FULL = 0xffffffff

/** Index of the lowest set bit of a non-zero 32-bit value. */
const ctz = (x: number): number => 31 - Math.clz32(x & -x)

const popcount = (x: number): number => {
  x = x - ((x >>> 1) & 0x55555555)
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333)
  x = (x + (x >>> 4)) & 0x0f0f0f0f
  return Math.imul(x, 0x01010101) >>> 24
}

/** Bits `[from, 31]` of a word. */
const maskFrom = (from: number): number => (FULL << from) >>> 0
/** Bits `[0, to]` (inclusive) of a word. */
const maskTo = (to: number): number => FULL >>> (31 - to)

export class PresentBitmap {
  readonly size: number
  readonly words: Uint32Array

  constructor(pages: number) {
    this.size = pages > 0 ? Math.floor(pages) : 0
    this.words = new Uint32Array((this.size + 31) >>> 5)
  }

  set(i: number): void {
    if (i >= 0 && i < this.size) this.words[i >>> 5]! |= 1 << (i & 31)
  }

  clear(i: number): void {
    if (i >= 0 && i < this.size) this.words[i >>> 5]! &= ~(1 << (i & 31))
  }

  isPresent(i: number): boolean {
    return i >= 0 && i < this.size && (this.words[i >>> 5]! & (1 << (i & 31))) !== 0
  }

  /**
   * Whether every page in `[start, end)` is present. An empty range is
   * vacuously present; a range reaching outside `[0, size)` is not.
   */
  rangePresent(start: number, end: number): boolean {
    if (start >= end) return true
    if (start < 0 || end > this.size) return false
    const words = this.words
    const sw = start >>> 5
    const last = end - 1
    const ew = last >>> 5
    if (sw === ew) {
      const m = (maskFrom(start & 31) & maskTo(last & 31)) >>> 0
      return ((words[sw]! & m) >>> 0) === m
    }
    const first = maskFrom(start & 31)
    if (((words[sw]! & first) >>> 0) !== first) return false
    for (let w = sw + 1; w < ew; w++) if (words[w] !== FULL) return false
    const tail = maskTo(last & 31)
    return ((words[ew]! & tail) >>> 0) === tail
  }

  /** Number of present pages (popcount per word). */
  count(): number {
    const words = this.words
    let n = 0
    for (let w = 0; w < words.length; w++) n += popcount(words[w]!)
    return n
  }

  isComplete(): boolean {
    return this.rangePresent(0, this.size)
  }

  setAll(): void {
    const words = this.words
    if (words.length === 0) return
    words.fill(FULL)
    const rem = this.size & 31
    if (rem !== 0) words[words.length - 1] = maskTo(rem - 1)
  }

  clearAll(): void {
    this.words.fill(0)
  }

  /** First absent page in `[from, end)`, or `end` when all are present. */
  nextMissing(from: number, end: number = this.size): number {
    end = Math.min(end, this.size)
    if (from < 0) from = 0
    if (from >= end) return end
    const words = this.words
    let w = from >>> 5
    let bits = ~words[w]! & maskFrom(from & 31)
    while (bits === 0) {
      w++
      if (w << 5 >= end) return end
      bits = ~words[w]!
    }
    return Math.min((w << 5) + ctz(bits), end)
  }

  /** First present page in `[from, end)`, or `end` when none is. */
  nextPresent(from: number, end: number = this.size): number {
    end = Math.min(end, this.size)
    if (from < 0) from = 0
    if (from >= end) return end
    const words = this.words
    let w = from >>> 5
    let bits = words[w]! & maskFrom(from & 31)
    while (bits === 0) {
      w++
      if (w << 5 >= end) return end
      bits = words[w]!
    }
    return Math.min((w << 5) + ctz(bits), end)
  }

  /** Maximal runs `[start, end)` of absent pages within `[start, end)` (clamped to the bitmap), ascending. */
  missingRuns(start = 0, end: number = this.size): Array<[number, number]> {
    const runs: Array<[number, number]> = []
    end = Math.min(end, this.size)
    let i = Math.max(0, start)
    while (i < end) {
      const s = this.nextMissing(i, end)
      if (s >= end) break
      const e = this.nextPresent(s, end)
      runs.push([s, e])
      i = e
    }
    return runs
  }

  /** Persistent form: u32 LE page count, then the words little-endian. */
  toBytes(): Uint8Array {
    const out = new Uint8Array(4 + this.words.length * 4)
    const view = new DataView(out.buffer)
    view.setUint32(0, this.size, true)
    for (let w = 0; w < this.words.length; w++) view.setUint32(4 + w * 4, this.words[w]!, true)
    return out
  }

  /** Inverse of `toBytes`; `undefined` when the bytes are not a well-formed bitmap. */
  static fromBytes(bytes: Uint8Array): PresentBitmap | undefined {
    if (bytes.length < 4) return undefined
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    const size = view.getUint32(0, true)
    const bitmap = new PresentBitmap(size)
    if (bytes.length !== 4 + bitmap.words.length * 4) return undefined
    for (let w = 0; w < bitmap.words.length; w++) bitmap.words[w] = view.getUint32(4 + w * 4, true)
    const rem = size & 31
    if (rem !== 0 && (bitmap.words[bitmap.words.length - 1]! & ~maskTo(rem - 1)) !== 0) return undefined
    return bitmap
  }

  clone(): PresentBitmap {
    const copy = new PresentBitmap(this.size)
    copy.words.set(this.words)
    return copy
  }
}
