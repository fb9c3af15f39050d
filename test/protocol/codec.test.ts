import { Either } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Backend } from "../../src/core/index.js"
import {
  BincodeReader,
  BincodeWriter,
  CONTROL_SCHEMA_VERSION,
  Flags,
  HEADER_LEN,
  MsgType,
  decodeControl,
  decodeRangeRequest,
  decodeWith,
  encodeControl,
  encodeControlFrame,
  encodeErrorFrame,
  encodeFrame,
  encodeGetRangeFrame,
  encodeHeader,
  encodeRangeRequest,
  readHeader,
  writeHeader,
  type ControlMessage
} from "../../src/protocol/index.js"
import { controlArb, envelopeArb, headerArb, rangeArb } from "./arbitraries.js"

const reason = (e: Either.Either<unknown, { readonly reason: string }>): string =>
  Either.isLeft(e) ? e.left.reason : "decoded"

describe("frame header", () => {
  it("round trips any header (property)", () => {
    fc.assert(
      fc.property(headerArb, fc.nat({ max: 8 }), (h, at) => {
        const buf = new Uint8Array(at + HEADER_LEN).fill(0xee)
        writeHeader(buf, at, h)
        expect(readHeader(buf, at)).toEqual(h)
        expect(Buffer.from(buf.subarray(at)).equals(encodeHeader(h))).toBe(true)
        expect(buf[at + 6]).toBe(0)
        expect(buf[at + 7]).toBe(0)
      }),
      { numRuns: 300 }
    )
  })

  it("ignores the reserved field and rejects magic, version, type and short input", () => {
    const h = encodeHeader({ type: MsgType.Get, flags: Flags.EndOfStream, requestId: 1, length: 0 })
    h[6] = 0xab
    expect(readHeader(h)).toEqual({ type: MsgType.Get, flags: 1, requestId: 1, length: 0 })
    const bad = Buffer.from(h)
    bad[0] = 0
    expect(readHeader(bad)).toMatchObject({ _tag: "BadMagic", got: 0x004c })
    const ver = Buffer.from(h)
    ver[2] = 2
    expect(readHeader(ver)).toMatchObject({ _tag: "BadVersion", got: 2 })
    const ty = Buffer.from(h)
    ty[3] = 12
    expect(readHeader(ty)).toMatchObject({ _tag: "UnknownType", type: 12 })
    expect(readHeader(h.subarray(0, 15))).toMatchObject({ _tag: "Truncated", needed: 16, have: 15 })
  })

  it("frames payloads and UTF-8 error messages", () => {
    const f = encodeFrame(MsgType.Put, 3, new Uint8Array([1, 2, 3]), Flags.EndOfStream)
    expect(readHeader(f)).toEqual({ type: MsgType.Put, flags: 1, requestId: 3, length: 3 })
    expect([...f.subarray(HEADER_LEN)]).toEqual([1, 2, 3])
    const e = encodeErrorFrame(MsgType.GetRange, 4, "no such key: 数据")
    expect(readHeader(e)).toEqual({ type: MsgType.GetRange, flags: Flags.Error, requestId: 4, length: Buffer.byteLength("no such key: 数据") })
    expect(e.subarray(HEADER_LEN).toString("utf8")).toBe("no such key: 数据")
  })
})

describe("control messages", () => {
  it("round trip at every schema able to carry them (property)", () => {
    fc.assert(
      fc.property(envelopeArb, fc.nat({ max: 0xffffffff }), (env, requestId) => {
        const bytes = encodeControl(env.message, env.schema)
        expect(decodeControl(bytes)).toEqual(Either.right(env))
        const frame = encodeControlFrame(requestId, env.message, env.schema)
        expect(readHeader(frame)).toEqual({ type: MsgType.Control, flags: 0, requestId, length: bytes.length })
        expect(Buffer.from(frame.subarray(HEADER_LEN)).equals(Buffer.from(bytes))).toBe(true)
      }),
      { numRuns: 500 }
    )
  })

  it("every strict prefix and any trailing byte is a DecodeError (property)", () => {
    fc.assert(
      fc.property(envelopeArb, fc.nat(), (env, cut) => {
        const bytes = encodeControl(env.message, env.schema)
        const prefix = bytes.subarray(0, cut % bytes.length)
        const r = decodeControl(prefix)
        expect(Either.isLeft(r) && r.left._tag === "DecodeError").toBe(true)
        const longer = new Uint8Array(bytes.length + 1)
        longer.set(bytes)
        expect(reason(decodeControl(longer))).toContain("trailing")
      }),
      { numRuns: 300 }
    )
  })

  it("never throws on arbitrary bytes (property)", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 96 }), (bytes) => {
        const r = decodeControl(bytes)
        if (Either.isRight(r)) expect(Buffer.from(encodeControl(r.right.message, r.right.schema)).equals(Buffer.from(bytes))).toBe(true)
      }),
      { numRuns: 2000 }
    )
  })

  it("never throws on mutated valid encodings, and whatever decodes re-encodes exactly (property)", () => {
    fc.assert(
      fc.property(envelopeArb, fc.array(fc.tuple(fc.nat(), fc.nat({ max: 255 })), { minLength: 1, maxLength: 4 }), (env, muts) => {
        const bytes = Uint8Array.from(encodeControl(env.message, env.schema))
        for (const [i, b] of muts) bytes[i % bytes.length] = b
        const r = decodeControl(bytes)
        if (Either.isRight(r)) expect(Buffer.from(encodeControl(r.right.message, r.right.schema)).equals(Buffer.from(bytes))).toBe(true)
      }),
      { numRuns: 1000 }
    )
  })

  const env = (schema: number, tag: number, body: ReadonlyArray<number> = []): Uint8Array => {
    const w = new BincodeWriter()
    w.u16(schema).u32(tag)
    for (const b of body) w.u8(b)
    return w.finish()
  }

  it("rejects unsupported schemas, unknown tags and messages newer than their envelope", () => {
    expect(reason(decodeControl(env(0, 6)))).toContain("unsupported control schema 0")
    expect(reason(decodeControl(env(CONTROL_SCHEMA_VERSION + 1, 6)))).toContain("unsupported control schema 6")
    expect(reason(decodeControl(env(1, 21)))).toContain("unknown control message tag 21")
    expect(reason(decodeControl(env(1, 9)))).toContain("requires schema 2")
    expect(reason(decodeControl(env(2, 9)))).toContain("unexpected end")
    expect(reason(decodeControl(env(4, 19)))).toContain("requires schema 5")
    expect(reason(decodeControl(env(1, 12, [0, 0, 0, 0, 0, 0, 0, 0])))).toContain("requires schema 2")
    expect(decodeControl(env(5, 6))).toEqual(Either.right({ schema: 5, message: { _tag: "MembershipQuery" } }))
    expect(reason(decodeControl(new Uint8Array([1])))).toContain("unexpected end")
  })

  it("rejects invalid bool, Option tag, enum tags, UTF-8 and u64 beyond 2^53-1", () => {
    expect(reason(decodeControl(env(1, 8, [2, 0])))).toContain("invalid bool")
    expect(reason(decodeControl(env(1, 8, [1, 2])))).toContain("invalid Option tag")
    expect(reason(decodeControl(env(1, 5, [0, 0, 0, 0, 0, 0, 0x20, 0])))).toContain("2^53-1")
    expect(decodeControl(env(1, 5, [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0]))).toEqual(
      Either.right({ schema: 1, message: { _tag: "EpochBump", epoch: Number.MAX_SAFE_INTEGER } })
    )
    expect(reason(decodeControl(env(2, 12, [2, 0, 0, 0, 0, 0, 0, 0, 0xc3, 0x28])))).toContain("invalid UTF-8")
    expect(reason(decodeControl(env(1, 0, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0])))).toContain("node role")
    expect(reason(decodeControl(env(2, 10, [3, 0, 0, 0])))).toContain("backend tag 3")
    // a vector claiming 2^40 entries is refused before looping
    expect(reason(decodeControl(env(1, 3, [0, 0, 0, 0, 0, 1, 0, 0])))).toContain("exceeds")
  })

  it("keeps a leading byte-order mark and multi-byte text intact", () => {
    const m: ControlMessage = { _tag: "ListObjects", prefix: "\uFEFFs3/数据/😀" }
    expect(decodeControl(encodeControl(m))).toEqual(Either.right({ schema: 2, message: m }))
    expect(encodeControl(m).length).toBe(2 + 4 + 8 + Buffer.byteLength(m.prefix))
  })

  it("defaults to the oldest schema able to carry the message, and refuses to encode under it", () => {
    fc.assert(
      fc.property(controlArb, (m) => {
        const r = decodeControl(encodeControl(m))
        expect(Either.isRight(r)).toBe(true)
      }),
      { numRuns: 200 }
    )
    expect(() => encodeControl({ _tag: "MembershipQueryV2" }, 4)).toThrow(/requires schema 5/)
    expect(() => encodeControl({ _tag: "EpochBump", epoch: 2 ** 53 })).toThrow(RangeError)
    expect(() => encodeControl({ _tag: "EpochBump", epoch: 1 }, 6)).toThrow(/not supported/)
  })
})

describe("RangeRequest", () => {
  it("round trips and frames (property)", () => {
    fc.assert(
      fc.property(rangeArb, fc.nat({ max: 0xffffffff }), (r, id) => {
        const body = encodeRangeRequest(r)
        expect(decodeRangeRequest(body)).toEqual(Either.right(r))
        const frame = encodeGetRangeFrame(id, r)
        expect(readHeader(frame)).toEqual({ type: MsgType.GetRange, flags: 0, requestId: id, length: body.length })
        expect(Buffer.from(frame.subarray(HEADER_LEN)).equals(Buffer.from(body))).toBe(true)
      }),
      { numRuns: 300 }
    )
  })

  it("is a DecodeError when truncated, padded or garbage (property)", () => {
    fc.assert(
      fc.property(rangeArb, fc.nat(), fc.uint8Array({ maxLength: 64 }), (r, cut, junk) => {
        const body = encodeRangeRequest(r)
        expect(Either.isLeft(decodeRangeRequest(body.subarray(0, cut % body.length)))).toBe(true)
        expect(Either.isLeft(decodeRangeRequest(Buffer.concat([body, Buffer.from([0])])))).toBe(true)
        decodeRangeRequest(junk)
      }),
      { numRuns: 300 }
    )
    expect(decodeRangeRequest(encodeRangeRequest({ object: { backend: Backend.S3, bucket: "b", objectPath: "k" }, offset: 0, len: 0 }))).toEqual(
      Either.right({ object: { backend: Backend.S3, bucket: "b", objectPath: "k" }, offset: 0, len: 0 })
    )
  })
})

describe("bincode", () => {
  it("writer grows and reader reads the little-endian layout", () => {
    const w = new BincodeWriter(1)
    w.u8(1).u16(0x0203).u32(0x04050607).u64(2 ** 40 + 5).bool(true).string("é").option(null, () => {}).vec([7, 8], (w, n) => w.u8(n))
    const bytes = w.finish()
    expect(bytes.toString("hex")).toBe("01" + "0302" + "07060504" + "0500000000010000" + "01" + "0200000000000000c3a9" + "00" + "02000000000000000708")
    const r = decodeWith(bytes, "test", (r: BincodeReader) => [r.u8(), r.u16(), r.u32(), r.u64(), r.bool(), r.string(), r.option((r) => r.u8()), r.vec((r) => r.u8())])
    expect(r).toEqual(Either.right([1, 0x0203, 0x04050607, 2 ** 40 + 5, true, "é", null, [7, 8]]))
  })
})
