/**
 * Put and Delete headers (Talon's PutRequest and DeleteRequest): vectors derived by hand from
 * Talon's Rust layouts (bincode 1, fixint little-endian, u64 string lengths, u32 enum tags) with
 * the values of Talon's own tests (crates/talon-transport/src/data.rs), round trips, and
 * decoders that return typed errors on any bytes.
 */
import { Either } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Backend } from "../../src/core/index.js"
import {
  decodeDeleteRequest,
  decodePutRequest,
  encodeDeleteFrame,
  encodeDeleteRequest,
  encodePutFrame,
  encodePutRequest,
  HEADER_LEN,
  MsgType,
  readHeader
} from "../../src/protocol/index.js"
import { objectIdArb, u64 } from "./arbitraries.js"

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ""), "hex").toString("hex")
const ascii = (s: string) => Buffer.from(s, "latin1").toString("hex")
const u64le = (n: number) => {
  const b = Buffer.alloc(8)
  b.writeBigUInt64LE(BigInt(n))
  return b.toString("hex")
}

// Talon's obj(): ObjectId::new(Backend::S3, "bucket", "path/to/object.bin").
const object = { backend: Backend.S3, bucket: "bucket", objectPath: "path/to/object.bin" }
const objectHex = `00000000 ${u64le(6)} ${ascii("bucket")} ${u64le(18)} ${ascii("path/to/object.bin")}`

describe("Put and Delete vectors (hand-derived from Talon's layout)", () => {
  it("PutRequest header (type 3): ObjectId then body_len u64; the frame length covers only the header", () => {
    // put_header_round_trips: request id 42, a 1 GiB body streamed after the frame.
    const body = `${objectHex} ${u64le(1 << 30)}`
    expect(Buffer.from(encodePutRequest({ object, bodyLen: 1 << 30 })).toString("hex")).toBe(hex(body))
    const frame = encodePutFrame(42, { object, bodyLen: 1 << 30 })
    expect(frame.toString("hex")).toBe(hex(`544c 01 03 0000 0000 0000002a 00000034 ${body}`))
    expect(frame.length - HEADER_LEN).toBe(52)
    expect(decodePutRequest(Buffer.from(hex(body), "hex"))).toEqual(Either.right({ object, bodyLen: 1 << 30 }))
  })

  it("DeleteRequest (type 5): the ObjectId alone", () => {
    const frame = encodeDeleteFrame(9, { object })
    expect(frame.toString("hex")).toBe(hex(`544c 01 05 0000 0000 00000009 0000002c ${objectHex}`))
    expect(decodeDeleteRequest(frame.subarray(HEADER_LEN))).toEqual(Either.right({ object }))
  })

  it("a Put header missing its last byte, or a Delete body read as a Put, is a typed error", () => {
    const put = encodePutRequest({ object, bodyLen: 10 })
    expect(Either.isLeft(decodePutRequest(put.subarray(0, put.length - 1)))).toBe(true)
    expect(Either.isLeft(decodePutRequest(encodeDeleteRequest({ object })))).toBe(true)
    expect(Either.isLeft(decodeDeleteRequest(put))).toBe(true)
  })
})

describe("Put and Delete properties", () => {
  it("round-trip through their frames", () => {
    fc.assert(
      fc.property(objectIdArb, u64, fc.nat({ max: 0xffffffff }), (o, bodyLen, id) => {
        const put = encodePutFrame(id, { object: o, bodyLen })
        const h = readHeader(put)
        expect(h).toMatchObject({ type: MsgType.Put, requestId: id, length: put.length - HEADER_LEN })
        expect(decodePutRequest(put.subarray(HEADER_LEN))).toEqual(Either.right({ object: o, bodyLen }))
        const del = encodeDeleteFrame(id, { object: o })
        expect(readHeader(del)).toMatchObject({ type: MsgType.Delete, requestId: id })
        expect(decodeDeleteRequest(del.subarray(HEADER_LEN))).toEqual(Either.right({ object: o }))
      })
    )
  })

  it("decoders never throw on arbitrary or mutated bytes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        expect(() => decodePutRequest(bytes)).not.toThrow()
        expect(() => decodeDeleteRequest(bytes)).not.toThrow()
      })
    )
    fc.assert(
      fc.property(objectIdArb, u64, fc.nat(), fc.nat({ max: 255 }), (o, bodyLen, at, byte) => {
        const b = Buffer.from(encodePutRequest({ object: o, bodyLen }))
        b[at % b.length] = byte
        expect(() => decodePutRequest(b)).not.toThrow()
        expect(() => decodeDeleteRequest(b.subarray(0, at % b.length))).not.toThrow()
      })
    )
  })
})
