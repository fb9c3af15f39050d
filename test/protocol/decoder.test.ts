import fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  DEFAULT_CAPS,
  Flags,
  FrameDecoder,
  HEADER_LEN,
  MsgType,
  capFor,
  encodeFrame,
  encodeHeader,
  isFrameError,
  type Frame,
  type FrameCaps,
  type FrameError
} from "../../src/protocol/index.js"
import { msgTypeArb } from "./arbitraries.js"

const SMALL_CAPS: FrameCaps = { control: 64, get: 32, getRange: 48, put: 200, ping: 0, delete: 16 }
const maxCap = (caps: FrameCaps): number => Math.max(...Object.values(caps))

const drain = (dec: FrameDecoder): Array<Frame | FrameError> => {
  const out: Array<Frame | FrameError> = []
  for (;;) {
    const f = dec.next()
    if (f === undefined) return out
    out.push(f)
    if (isFrameError(f)) return out
  }
}

/** Cuts `bytes` at the given (sorted, deduplicated) positions. */
const chunk = (bytes: Buffer, cuts: ReadonlyArray<number>): Array<Buffer> => {
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)
  const out: Array<Buffer> = []
  let prev = 0
  for (const p of points) {
    out.push(bytes.subarray(prev, p))
    prev = p
  }
  out.push(bytes.subarray(prev))
  return out
}

const frameArb = (caps: FrameCaps) =>
  msgTypeArb.chain((type) =>
    fc.record({
      type: fc.constant(type),
      requestId: fc.nat({ max: 0xffffffff }),
      flags: fc.nat({ max: 3 }),
      payload: fc.uint8Array({ maxLength: Math.min(capFor(caps, type), 300) })
    })
  )

describe("FrameDecoder", () => {
  it("decodes arbitrary chunkings of valid frame streams to the same frames (property)", () => {
    fc.assert(
      fc.property(fc.array(frameArb(SMALL_CAPS), { maxLength: 12 }), fc.array(fc.nat(), { maxLength: 20 }), (frames, cuts) => {
        const stream = Buffer.concat(frames.map((f) => encodeFrame(f.type, f.requestId, f.payload, f.flags)))
        const dec = new FrameDecoder(SMALL_CAPS)
        const got: Array<Frame | FrameError> = []
        for (const c of chunk(stream, cuts)) {
          dec.push(c)
          expect(dec.buffered).toBeLessThanOrEqual(HEADER_LEN + maxCap(SMALL_CAPS))
          got.push(...drain(dec))
        }
        expect(dec.end()).toBeUndefined()
        expect(got.map((f) => (isFrameError(f) ? f._tag : { ...f.header, payload: [...f.payload] }))).toEqual(
          frames.map((f) => ({ type: f.type, flags: f.flags, requestId: f.requestId, length: f.payload.length, payload: [...f.payload] }))
        )
        expect(dec.buffered).toBe(0)
      }),
      { numRuns: 400 }
    )
  })

  it("never throws and never holds more than one capped frame on arbitrary bytes (property)", () => {
    // Streams that start with a valid header prefix so the body/cap paths are reached, not just BadMagic.
    const bytesArb = fc.oneof(
      fc.uint8Array({ maxLength: 400 }),
      fc.tuple(msgTypeArb, fc.nat({ max: 400 }), fc.uint8Array({ maxLength: 400 })).map(([t, len, rest]) =>
        Buffer.concat([encodeHeader({ type: t, flags: 0, requestId: 1, length: len }), rest])
      )
    )
    fc.assert(
      fc.property(fc.array(bytesArb, { maxLength: 6 }), fc.array(fc.nat(), { maxLength: 10 }), (parts, cuts) => {
        const dec = new FrameDecoder(SMALL_CAPS)
        for (const c of chunk(Buffer.concat(parts), cuts)) {
          dec.push(c)
          expect(dec.buffered).toBeLessThanOrEqual(HEADER_LEN + maxCap(SMALL_CAPS))
          expect(dec.reserved).toBeLessThanOrEqual(HEADER_LEN + maxCap(SMALL_CAPS))
          for (const f of drain(dec)) {
            if (!isFrameError(f)) expect(f.payload.length).toBeLessThanOrEqual(capFor(SMALL_CAPS, f.header.type))
          }
        }
        dec.end()
        drain(dec)
      }),
      { numRuns: 1000 }
    )
  })

  it("decodes many frames from one chunk, including zero-length ones (not end-of-stream)", () => {
    const frames = Array.from({ length: 100 }, (_, i) => encodeFrame(i % 2 ? MsgType.Ping : MsgType.Control, i, Buffer.alloc(i % 2 ? 0 : i % 7, i)))
    const dec = new FrameDecoder()
    dec.push(Buffer.concat(frames))
    expect(dec.pending).toBe(100)
    const got = drain(dec) as Array<Frame>
    expect(got.map((f) => f.header.requestId)).toEqual(Array.from({ length: 100 }, (_, i) => i))
    expect(got[1]!.payload.length).toBe(0)
    expect(dec.next()).toBeUndefined()
    expect(dec.failed).toBeUndefined()
  })

  it("reassembles a frame fed one byte at a time, from a plain Uint8Array", () => {
    const payload = Buffer.from("hello, 数据")
    const bytes = new Uint8Array(encodeFrame(MsgType.Control, 77, payload, Flags.EndOfStream))
    const dec = new FrameDecoder()
    for (let i = 0; i < bytes.length; i++) {
      expect(dec.next()).toBeUndefined()
      dec.push(bytes.subarray(i, i + 1))
    }
    const f = dec.next() as Frame
    expect(f.header).toEqual({ type: MsgType.Control, flags: 1, requestId: 77, length: payload.length })
    expect(f.payload.toString()).toBe("hello, 数据")
  })

  it("rejects an over-cap length from the header alone, before any body arrives", () => {
    const dec = new FrameDecoder()
    const ok = encodeFrame(MsgType.Ping, 1, Buffer.alloc(0))
    dec.push(Buffer.concat([ok, encodeHeader({ type: MsgType.Control, flags: 0, requestId: 2, length: DEFAULT_CAPS.control + 1 })]))
    expect(dec.buffered).toBe(0)
    expect(dec.reserved).toBe(0)
    expect((dec.next() as Frame).header.requestId).toBe(1)
    const err = dec.next()
    expect(err).toMatchObject({ _tag: "OverCap", type: MsgType.Control, length: DEFAULT_CAPS.control + 1, cap: DEFAULT_CAPS.control })
    expect((err as FrameError).message).toContain("cap")
    // stays failed: more input is ignored and the error repeats
    dec.push(ok)
    expect(dec.next()).toBe(err)
    expect(dec.pending).toBe(0)
  })

  it("accepts a frame exactly at the cap", () => {
    const dec = new FrameDecoder(SMALL_CAPS)
    dec.push(encodeFrame(MsgType.Delete, 5, Buffer.alloc(SMALL_CAPS.delete, 1)))
    expect((dec.next() as Frame).payload.length).toBe(SMALL_CAPS.delete)
  })

  it.each([
    ["BadMagic", (b: Buffer) => { b[1] = 0x4d }, { got: 0x544d }],
    ["BadVersion", (b: Buffer) => { b[2] = 9 }, { got: 9 }],
    ["UnknownType", (b: Buffer) => { b[3] = 200 }, { type: 200 }]
  ] as const)("%s is fatal and sticky, after delivering earlier frames", (tag, corrupt, fields) => {
    const good = encodeFrame(MsgType.Get, 1, Buffer.from([1, 2]))
    const bad = encodeFrame(MsgType.Get, 2, Buffer.from([3]))
    corrupt(bad)
    const dec = new FrameDecoder()
    dec.push(Buffer.concat([good, bad.subarray(0, 10)]))
    dec.push(bad.subarray(10))
    expect((dec.next() as Frame).header.requestId).toBe(1)
    const err = dec.next()
    expect(err).toMatchObject({ _tag: tag, ...fields })
    expect(dec.failed).toBe(err)
    dec.push(good)
    expect(dec.next()).toBe(err)
    expect(dec.buffered).toBe(0)
  })

  it("reports a body cut short at end of stream as Truncated", () => {
    const dec = new FrameDecoder()
    dec.push(encodeFrame(MsgType.GetRange, 3, Buffer.alloc(10)).subarray(0, HEADER_LEN + 4))
    expect(dec.next()).toBeUndefined()
    expect(dec.buffered).toBe(HEADER_LEN + 4)
    const e = dec.end()
    expect(e).toMatchObject({ _tag: "Truncated", needed: HEADER_LEN + 10, have: HEADER_LEN + 4 })
    expect(dec.next()).toBe(e)

    const half = new FrameDecoder()
    half.push(encodeHeader({ type: MsgType.Ping, flags: 0, requestId: 0, length: 0 }).subarray(0, 5))
    expect(half.end()).toMatchObject({ _tag: "Truncated", needed: HEADER_LEN, have: 5 })
  })
})
