/**
 * bincode 1.3 default configuration (fixed-width little-endian ints, bool one
 * byte, u64 length prefixes, Option as a 0/1 byte, enums as u32 tags) — what
 * Talon's serde types serialize to.
 *
 * u64 values are JS numbers: the writer refuses anything that is not a safe
 * non-negative integer and the reader reports values above 2^53-1 as a
 * DecodeError rather than silently rounding.
 */
import { Either } from "effect"
import { DecodeError } from "./errors.js"

const TWO_32 = 0x1_0000_0000

export class BincodeWriter {
  private buf: Buffer
  private pos: number

  /** `reserve` leaves room at the front (e.g. for a frame header written afterwards). */
  constructor(initialCapacity = 128, reserve = 0) {
    this.buf = Buffer.allocUnsafe(Math.max(initialCapacity, reserve + 16))
    this.pos = reserve
  }

  get length(): number {
    return this.pos
  }

  private ensure(n: number): void {
    const need = this.pos + n
    if (need <= this.buf.length) return
    const next = Buffer.allocUnsafe(Math.max(need, this.buf.length * 2))
    this.buf.copy(next, 0, 0, this.pos)
    this.buf = next
  }

  u8(v: number): this {
    if (!Number.isInteger(v) || v < 0 || v > 0xff) throw new RangeError(`bincode u8 out of range: ${v}`)
    this.ensure(1)
    this.buf[this.pos++] = v
    return this
  }

  u16(v: number): this {
    if (!Number.isInteger(v) || v < 0 || v > 0xffff) throw new RangeError(`bincode u16 out of range: ${v}`)
    this.ensure(2)
    this.buf[this.pos++] = v & 0xff
    this.buf[this.pos++] = v >>> 8
    return this
  }

  u32(v: number): this {
    if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new RangeError(`bincode u32 out of range: ${v}`)
    this.ensure(4)
    this.put32(v)
    return this
  }

  /** Little-endian u32 by hand: cheaper than the native writeUInt32LE call on short messages. */
  private put32(v: number): void {
    const buf = this.buf
    let p = this.pos
    buf[p++] = v & 0xff
    buf[p++] = (v >>> 8) & 0xff
    buf[p++] = (v >>> 16) & 0xff
    buf[p++] = (v >>> 24) & 0xff
    this.pos = p
  }

  u64(v: number): this {
    if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`bincode u64 must be a safe non-negative integer: ${v}`)
    this.ensure(8)
    this.put32(v % TWO_32)
    this.put32(Math.floor(v / TWO_32))
    return this
  }

  bool(v: boolean): this {
    this.ensure(1)
    this.buf[this.pos++] = v ? 1 : 0
    return this
  }

  /** u64 byte length, then UTF-8 bytes (the prefix counts bytes, not characters). */
  string(s: string): this {
    const len = s.length
    // ASCII fast path: short ids, buckets and keys are copied char by char,
    // avoiding two native calls (byteLength + write) per string.
    if (len <= 64) {
      this.ensure(8 + len)
      const buf = this.buf
      const start = this.pos + 8
      let i = 0
      for (; i < len; i++) {
        const c = s.charCodeAt(i)
        if (c >= 0x80) break
        buf[start + i] = c
      }
      if (i === len) {
        this.u64(len)
        this.pos += len
        return this
      }
    }
    const n = Buffer.byteLength(s, "utf8")
    this.u64(n)
    this.ensure(n)
    this.buf.write(s, this.pos, n, "utf8")
    this.pos += n
    return this
  }

  option<A>(v: A | null | undefined, write: (w: this, a: A) => void): this {
    if (v === null || v === undefined) return this.u8(0)
    this.u8(1)
    write(this, v)
    return this
  }

  vec<A>(items: ReadonlyArray<A>, write: (w: this, a: A) => void): this {
    this.u64(items.length)
    for (const item of items) write(this, item)
    return this
  }

  /** The bytes written so far (including any reserved prefix); a view, not a copy. */
  finish(): Buffer {
    return this.buf.subarray(0, this.pos)
  }
}

/** Thrown inside a BincodeReader and converted to DecodeError at the boundary; never escapes. */
class ReadFailure {
  constructor(readonly reason: string) {}
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

export class BincodeReader {
  pos: number
  readonly end: number

  constructor(
    readonly bytes: Uint8Array,
    offset = 0,
    end = bytes.length
  ) {
    this.pos = offset
    this.end = end
  }

  get remaining(): number {
    return this.end - this.pos
  }

  private need(n: number, what: string): number {
    const at = this.pos
    if (n > this.end - at) throw new ReadFailure(`unexpected end of input reading ${what}: need ${n} bytes at ${at}, have ${this.end - at}`)
    this.pos = at + n
    return at
  }

  fail(reason: string): never {
    throw new ReadFailure(reason)
  }

  u8(): number {
    return this.bytes[this.need(1, "u8")]!
  }

  u16(): number {
    const o = this.need(2, "u16")
    return this.bytes[o]! | (this.bytes[o + 1]! << 8)
  }

  u32(): number {
    const o = this.need(4, "u32")
    const b = this.bytes
    return (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16)) + b[o + 3]! * 0x1000000
  }

  u64(): number {
    const o = this.need(8, "u64")
    const b = this.bytes
    const lo = (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16)) + b[o + 3]! * 0x1000000
    const hi = (b[o + 4]! | (b[o + 5]! << 8) | (b[o + 6]! << 16)) + b[o + 7]! * 0x1000000
    if (hi > 0x1fffff) throw new ReadFailure(`u64 at ${o} exceeds 2^53-1 and cannot be represented exactly`)
    return hi * TWO_32 + lo
  }

  bool(): boolean {
    const v = this.u8()
    if (v > 1) throw new ReadFailure(`invalid bool byte ${v} at ${this.pos - 1}`)
    return v === 1
  }

  string(): string {
    const n = this.u64()
    const o = this.need(n, "string bytes")
    const b = this.bytes
    // ASCII fast path: most ids, buckets and keys are ASCII.
    if (n <= 64) {
      let out = ""
      let i = o
      for (; i < o + n; i++) {
        const c = b[i]!
        if (c >= 0x80) break
        out += String.fromCharCode(c)
      }
      if (i === o + n) return out
    }
    try {
      return utf8.decode(b.subarray(o, o + n))
    } catch {
      throw new ReadFailure(`invalid UTF-8 in string at ${o}`)
    }
  }

  option<A>(read: (r: this) => A): A | null {
    const tag = this.u8()
    if (tag === 0) return null
    if (tag === 1) return read(this)
    throw new ReadFailure(`invalid Option tag ${tag} at ${this.pos - 1}`)
  }

  vec<A>(read: (r: this) => A): Array<A> {
    const n = this.u64()
    // Every item we decode takes at least one byte: reject impossible counts before looping.
    if (n > this.remaining) throw new ReadFailure(`vector length ${n} exceeds the ${this.remaining} remaining bytes`)
    const out = new Array<A>(n)
    for (let i = 0; i < n; i++) out[i] = read(this)
    return out
  }

  expectEnd(): void {
    if (this.pos !== this.end) throw new ReadFailure(`${this.end - this.pos} trailing bytes after the value`)
  }
}

/**
 * Runs `read` over `bytes[offset, end)` and requires it to consume exactly
 * that span. Never throws: every failure becomes a DecodeError naming `what`.
 */
export const decodeWith = <A>(
  bytes: Uint8Array,
  what: string,
  read: (r: BincodeReader) => A,
  offset = 0,
  end = bytes.length
): Either.Either<A, DecodeError> => {
  try {
    const r = new BincodeReader(bytes, offset, end)
    const value = read(r)
    r.expectEnd()
    return Either.right(value)
  } catch (e) {
    return Either.left(new DecodeError({ what, reason: e instanceof ReadFailure ? e.reason : String(e) }))
  }
}
