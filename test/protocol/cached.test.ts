/**
 * Versioned / tenant-scoped range requests and typed data-plane errors: vectors derived by hand
 * from Talon's Rust layouts (bincode 1, fixint little-endian, u64 string lengths, u32 enum
 * variants), round trips, and decoders that return typed errors on any bytes.
 */
import { Either } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Backend } from "../../src/core/index.js"
import {
  DataErrorCode,
  Flags,
  FrameDecoder,
  HEADER_LEN,
  MsgType,
  RESPONSE_CAPS,
  decodeCachedRangeRequest,
  decodeErrorPayload,
  decodeTenantScopedCachedRange,
  decodeTenantScopedRange,
  encodeCachedRangeRequest,
  encodeGetCachedRangeFrame,
  encodeGetPinnedRangeFrame,
  encodeAdmitCachedBlockHeader,
  encodeCachedBlockPutRequest,
  decodeCachedBlockPutRequest,
  encodeTenantScopedCachedRange,
  encodeTenantScopedRange,
  encodeTypedErrorFrame,
  encodeTypedErrorPayload,
  readHeader,
  type CachedRangeRequest,
  type TenantId
} from "../../src/protocol/index.js"
import { objectIdArb, str, u64 } from "./arbitraries.js"

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ""), "hex")
const ascii = (s: string) => Buffer.from(s, "latin1").toString("hex")
const u64le = (n: number) => {
  const b = Buffer.alloc(8)
  b.writeBigUInt64LE(BigInt(n))
  return b.toString("hex")
}

// Talon's own test values (crates/talon-transport/src/data.rs).
const object = { backend: Backend.Azure, bucket: "container", objectPath: "path/to/blob.bin" }
const objectHex = `02000000 ${u64le(9)} ${ascii("container")} ${u64le(16)} ${ascii("path/to/blob.bin")}`
const v2: CachedRangeRequest = { object, version: "etag-v2", offset: 17, len: 23 }
const v2Body = `${objectHex} ${u64le(7)} ${ascii("etag-v2")} ${u64le(17)} ${u64le(23)}`

describe("GetCachedRange vectors (hand-derived from Talon's layout)", () => {
  it("CachedRangeRequest body and frame (type 6)", () => {
    expect(Buffer.from(encodeCachedRangeRequest(v2)).toString("hex")).toBe(hex(v2Body).toString("hex"))
    expect(hex(v2Body).length).toBe(76)
    const frame = encodeGetCachedRangeFrame(12, v2)
    expect(frame.toString("hex")).toBe(hex(`544c 01 06 0000 0000 0000000c 0000004c ${v2Body}`).toString("hex"))
    expect(decodeCachedRangeRequest(hex(v2Body))).toEqual(Either.right(v2))
  })

  it("TenantScopedCachedRange frame (type 9): Named and Unattributed", () => {
    const v9 = { object, version: "etag-v9", offset: 5, len: 9 }
    const v9Body = `${objectHex} ${u64le(7)} ${ascii("etag-v9")} ${u64le(5)} ${u64le(9)}`
    const named = `00000000 ${u64le(4)} ${ascii("acme")} ${v9Body}`
    const frame = encodeGetCachedRangeFrame(7, v9, { _tag: "Named", name: "acme" })
    expect(frame.toString("hex")).toBe(hex(`544c 01 09 0000 0000 00000007 ${(hex(named).length).toString(16).padStart(8, "0")} ${named}`).toString("hex"))
    expect(decodeTenantScopedCachedRange(hex(named))).toEqual(Either.right({ tenant: { _tag: "Named", name: "acme" }, request: v9 }))
    const anon = `01000000 ${v9Body}`
    expect(Buffer.from(encodeTenantScopedCachedRange({ tenant: { _tag: "Unattributed" }, request: v9 })).toString("hex")).toBe(
      hex(anon).toString("hex")
    )
    // A tenant frame's body is not a plain CachedRangeRequest (Talon's fail-closed distinct type).
    expect(Either.isLeft(decodeCachedRangeRequest(hex(named)))).toBe(true)
  })

  it("TenantScopedRange body (type 8)", () => {
    const body = `00000000 ${u64le(4)} ${ascii("acme")} ${objectHex} ${u64le(1 << 20)} ${u64le(4096)}`
    const scoped = { tenant: { _tag: "Named" as const, name: "acme" }, request: { object, offset: 1 << 20, len: 4096 } }
    expect(Buffer.from(encodeTenantScopedRange(scoped)).toString("hex")).toBe(hex(body).toString("hex"))
    expect(decodeTenantScopedRange(hex(body))).toEqual(Either.right(scoped))
  })

  it("typed error frame: TLE1 + bincode { code, message }, an ERROR-flagged GetRange", () => {
    const message = "version mismatch: expected a, found b"
    const body = `${ascii("TLE1")} 06000000 ${u64le(message.length)} ${ascii(message)}`
    const frame = encodeTypedErrorFrame(3, DataErrorCode.VersionMismatch, message)
    expect(frame.toString("hex")).toBe(hex(`544c 01 02 0002 0000 00000003 ${hex(body).length.toString(16).padStart(8, "0")} ${body}`).toString("hex"))
    expect(decodeErrorPayload(hex(body))).toEqual({ code: DataErrorCode.VersionMismatch, message })
    // Legacy UTF-8 bodies stay readable; a broken envelope is Internal, never a throw.
    expect(decodeErrorPayload(Buffer.from("worker is not ready"))).toEqual({ code: DataErrorCode.Unknown, message: "worker is not ready" })
    expect(decodeErrorPayload(hex(`${ascii("TLE1")} 06`)).code).toBe(DataErrorCode.Internal)
    expect(decodeErrorPayload(hex(`${ascii("TLE1")} 0a000000 ${u64le(0)}`)).message).toMatch(/unknown error code 10/)
  })

  it("GetPinnedRange (10) and GetPinnedRangeTenant (11): Talon's bodies under this project's types", () => {
    const frame = encodeGetPinnedRangeFrame(12, v2)
    expect(frame.toString("hex")).toBe(hex(`544c 01 0a 0000 0000 0000000c 0000004c ${v2Body}`).toString("hex"))
    const named = `00000000 ${u64le(4)} ${ascii("acme")} ${v2Body}`
    const scoped = encodeGetPinnedRangeFrame(7, v2, { _tag: "Named", name: "acme" })
    expect(scoped.toString("hex")).toBe(hex(`544c 01 0b 0000 0000 00000007 ${(hex(named).length).toString(16).padStart(8, "0")} ${named}`).toString("hex"))
    // Only the type byte differs from Talon's 6 and 9, which Talon's decoder accepts and 10/11 it refuses (types above 9).
    expect(frame.subarray(4).equals(encodeGetCachedRangeFrame(12, v2).subarray(4))).toBe(true)
    expect(readHeader(hex("544c 01 0c 0000 0000 00000001 00000000"))).toMatchObject({ _tag: "UnknownType", type: 12 })
  })

  it("CachedBlockPutRequest (type 7): BlockId, object_len, body_len; the raw block follows the frame", () => {
    const r = { block: { object, offset: 1 << 20, blockSize: 1 << 20, version: "etag-v2" }, objectLen: 3 << 20, bodyLen: 1 << 20 }
    const body = `${objectHex} ${u64le(1 << 20)} 00001000 ${u64le(7)} ${ascii("etag-v2")} ${u64le(3 << 20)} ${u64le(1 << 20)}`
    expect(Buffer.from(encodeCachedBlockPutRequest(r)).toString("hex")).toBe(hex(body).toString("hex"))
    const frame = encodeAdmitCachedBlockHeader(4, r)
    expect(frame.toString("hex")).toBe(hex(`544c 01 07 0000 0000 00000004 ${hex(body).length.toString(16).padStart(8, "0")} ${body}`).toString("hex"))
    expect(decodeCachedBlockPutRequest(hex(body))).toEqual(Either.right(r))
    expect(Either.isLeft(decodeCachedBlockPutRequest(hex(body).subarray(0, 20)))).toBe(true)
  })

  it("headers of types 6-11 decode (and the worker's request decoder accepts them)", () => {
    for (const type of [
      MsgType.GetCachedRange,
      MsgType.AdmitCachedBlock,
      MsgType.GetRangeTenant,
      MsgType.GetCachedRangeTenant,
      MsgType.GetPinnedRange,
      MsgType.GetPinnedRangeTenant
    ]) {
      const f = encodeGetCachedRangeFrame(1, v2)
      f[3] = type
      expect(readHeader(f)).toMatchObject({ type, requestId: 1 })
      const d = new FrameDecoder(RESPONSE_CAPS)
      d.push(f)
      expect(d.next()).toMatchObject({ header: { type } })
    }
  })
})

const tenantArb: fc.Arbitrary<TenantId> = fc.oneof(
  fc.constant({ _tag: "Unattributed" as const }),
  fc.record({ _tag: fc.constant("Named" as const), name: str })
)
const cachedArb: fc.Arbitrary<CachedRangeRequest> = fc.record({ object: objectIdArb, version: str, offset: u64, len: u64 })

describe("versioned range codecs (properties)", () => {
  it("round trip, through a frame too", () => {
    fc.assert(
      fc.property(cachedArb, fc.option(tenantArb, { nil: undefined }), fc.nat({ max: 0xffffffff }), (r, tenant, id) => {
        expect(decodeCachedRangeRequest(encodeCachedRangeRequest(r))).toEqual(Either.right(r))
        expect(decodeTenantScopedCachedRange(encodeTenantScopedCachedRange({ tenant: tenant ?? { _tag: "Unattributed" }, request: r }))).toEqual(
          Either.right({ tenant: tenant ?? { _tag: "Unattributed" }, request: r })
        )
        const frame = encodeGetCachedRangeFrame(id, r, tenant)
        const h = readHeader(frame)
        expect(h).toEqual({
          type: tenant === undefined ? MsgType.GetCachedRange : MsgType.GetCachedRangeTenant,
          flags: 0,
          requestId: id,
          length: frame.length - HEADER_LEN
        })
        const body = frame.subarray(HEADER_LEN)
        const back = tenant === undefined ? decodeCachedRangeRequest(body) : Either.map(decodeTenantScopedCachedRange(body), (s) => s.request)
        expect(back).toEqual(Either.right(r))
        const pinned = encodeGetPinnedRangeFrame(id, r, tenant)
        expect(readHeader(pinned)).toMatchObject({ type: tenant === undefined ? MsgType.GetPinnedRange : MsgType.GetPinnedRangeTenant })
        expect(pinned.subarray(HEADER_LEN).equals(body)).toBe(true)
        const scoped = { tenant: tenant ?? { _tag: "Unattributed" as const }, request: { object: r.object, offset: r.offset, len: r.len } }
        expect(decodeTenantScopedRange(encodeTenantScopedRange(scoped))).toEqual(Either.right(scoped))
      }),
      { numRuns: 300 }
    )
  })

  it("typed errors round trip", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 9 }), fc.string({ unit: "grapheme", maxLength: 40 }), (code, message) => {
        expect(decodeErrorPayload(encodeTypedErrorPayload(code as DataErrorCode, message))).toEqual({ code, message })
        const f = encodeTypedErrorFrame(9, code as DataErrorCode, message)
        expect(readHeader(f)).toMatchObject({ type: MsgType.GetRange, flags: Flags.Error })
      }),
      { numRuns: 200 }
    )
  })

  it("decoders never throw on arbitrary bytes (and on mutated valid bodies)", () => {
    const decoders: ReadonlyArray<(b: Uint8Array) => Either.Either<unknown, { readonly _tag: string }>> = [
      decodeCachedRangeRequest,
      decodeTenantScopedCachedRange,
      decodeTenantScopedRange,
      decodeCachedBlockPutRequest
    ]
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        for (const d of decoders) {
          const r = d(bytes)
          if (Either.isLeft(r)) expect(r.left._tag).toBe("DecodeError")
        }
        const e = decodeErrorPayload(bytes)
        expect(typeof e.message).toBe("string")
        const withMagic = decodeErrorPayload(Buffer.concat([Buffer.from("TLE1"), bytes]))
        expect(withMagic.code).toBeGreaterThanOrEqual(0)
      }),
      { numRuns: 500 }
    )
    fc.assert(
      fc.property(cachedArb, tenantArb, fc.nat(), fc.nat({ max: 255 }), (r, tenant, at, byte) => {
        const good = Buffer.from(encodeTenantScopedCachedRange({ tenant, request: r }))
        const bad = Buffer.from(good)
        bad[at % bad.length] = byte
        for (const body of [bad, good.subarray(0, at % good.length)]) {
          for (const d of decoders) expect(() => d(body)).not.toThrow()
        }
      }),
      { numRuns: 300 }
    )
  })
})
