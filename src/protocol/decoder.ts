/**
 * Incremental frame decoder for a byte stream. Frames may be split across
 * chunks or packed many to a chunk. Frames are cut eagerly in `push`, so the
 * decoder only ever holds the bytes of one incomplete frame, and a body is
 * allocated only after its header passed the per-type cap.
 *
 * It never throws. Bad magic, bad version, unknown type and over-cap lengths
 * are fatal: frames completed before the fault are still delivered, then
 * `next()` returns the error on every call and further input is ignored (the
 * connection must be dropped — there is no way to resynchronise a stream).
 *
 * A payload that arrived inside one chunk is a zero-copy view of that chunk,
 * so callers must not reuse a chunk's memory after pushing it (Node socket
 * chunks are fresh buffers, so this holds for sockets).
 */
import { OverCap, Truncated, type FrameError } from "./errors.js"
import { DEFAULT_CAPS, HEADER_LEN, capFor, readHeader, type FrameCaps, type FrameHeader } from "./frame.js"

export interface Frame {
  readonly header: FrameHeader
  readonly payload: Buffer
}

const EMPTY = Buffer.alloc(0)

export class FrameDecoder {
  private readonly ready: Array<Frame | undefined> = []
  private head = 0
  private readonly hdr = Buffer.alloc(HEADER_LEN)
  private hdrFill = 0
  private header: FrameHeader | undefined = undefined
  private body: Buffer | undefined = undefined
  private bodyFill = 0
  private fatal: FrameError | undefined = undefined

  constructor(readonly caps: FrameCaps = DEFAULT_CAPS) {}

  /** Bytes of the incomplete frame currently held (header + received body bytes). */
  get buffered(): number {
    return (this.header === undefined ? this.hdrFill : HEADER_LEN) + this.bodyFill
  }

  /** Bytes allocated for the incomplete frame (its body buffer is sized from the capped header). */
  get reserved(): number {
    return (this.header === undefined ? this.hdrFill : HEADER_LEN) + (this.body?.length ?? 0)
  }

  /** Complete frames waiting in `next()`. */
  get pending(): number {
    return this.ready.length - this.head
  }

  /** The fatal error, once the stream is unusable. */
  get failed(): FrameError | undefined {
    return this.fatal
  }

  push(chunk: Uint8Array): void {
    if (this.fatal !== undefined || chunk.length === 0) return
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    const n = buf.length
    let p = 0
    while (p < n) {
      if (this.header === undefined) {
        let h: FrameHeader | FrameError
        if (this.hdrFill === 0 && n - p >= HEADER_LEN) {
          h = readHeader(buf, p)
          p += HEADER_LEN
        } else {
          const take = Math.min(HEADER_LEN - this.hdrFill, n - p)
          buf.copy(this.hdr, this.hdrFill, p, p + take)
          this.hdrFill += take
          p += take
          if (this.hdrFill < HEADER_LEN) return
          h = readHeader(this.hdr, 0)
          this.hdrFill = 0
        }
        if ("_tag" in h) return this.fail(h)
        const cap = capFor(this.caps, h.type)
        if (h.length > cap) return this.fail(new OverCap({ type: h.type, length: h.length, cap, requestId: h.requestId }))
        if (h.length === 0) {
          this.ready.push({ header: h, payload: EMPTY })
          continue
        }
        if (n - p >= h.length) {
          this.ready.push({ header: h, payload: buf.subarray(p, p + h.length) })
          p += h.length
          continue
        }
        this.header = h
        this.body = Buffer.allocUnsafe(h.length)
        this.bodyFill = 0
      }
      const body = this.body!
      const take = Math.min(body.length - this.bodyFill, n - p)
      buf.copy(body, this.bodyFill, p, p + take)
      this.bodyFill += take
      p += take
      if (this.bodyFill === body.length) {
        this.ready.push({ header: this.header, payload: body })
        this.header = undefined
        this.body = undefined
        this.bodyFill = 0
      }
    }
  }

  /** The next complete frame, the fatal error, or `undefined` when more bytes are needed. */
  next(): Frame | FrameError | undefined {
    if (this.head < this.ready.length) {
      const frame = this.ready[this.head]!
      this.ready[this.head] = undefined
      this.head++
      if (this.head === this.ready.length) {
        this.ready.length = 0
        this.head = 0
      }
      return frame
    }
    return this.fatal
  }

  /**
   * Signals end of stream. A partially received frame becomes a fatal
   * `Truncated` error (returned and delivered by `next()`); a stream that
   * ended on a frame boundary returns `undefined`.
   */
  end(): FrameError | undefined {
    if (this.fatal !== undefined) return this.fatal
    if (this.header !== undefined) {
      const e = new Truncated({ needed: HEADER_LEN + this.header.length, have: HEADER_LEN + this.bodyFill })
      this.fail(e)
      return e
    }
    if (this.hdrFill > 0) {
      const e = new Truncated({ needed: HEADER_LEN, have: this.hdrFill })
      this.fail(e)
      return e
    }
    return undefined
  }

  private fail(e: FrameError): void {
    this.fatal = e
    this.header = undefined
    this.body = undefined
    this.bodyFill = 0
    this.hdrFill = 0
  }
}
