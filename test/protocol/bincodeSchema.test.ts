/**
 * The schema-driven bincode codec: the identity layouts agree byte for byte with the
 * hand-written ones the data plane uses (codecs.ts), every control class decodes to an
 * instance of itself, and schemas with no bincode layout are refused when compiled.
 */
import { Either, Schema } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Wire from "../../src/protocol/bincodeSchema.js"
import {
  BincodeWriter,
  BlockIdSchema,
  ControlMessage,
  NodeInfoSchema,
  ObjectIdSchema,
  codecOf,
  decodeControl,
  decodeWith,
  encodeControl,
  readBlockId,
  readNodeInfo,
  readObjectId,
  writeBlockId,
  writeNodeInfo,
  writeObjectId,
  type BincodeReader
} from "../../src/protocol/index.js"
import { blockIdArb, controlArb, nodeInfoArb, objectIdArb } from "./arbitraries.js"

const bytesOf = <A>(write: (w: BincodeWriter, a: A) => void, a: A): string => {
  const w = new BincodeWriter(16)
  write(w, a)
  return Buffer.from(w.finish()).toString("hex")
}

describe("schema codec vs the hand-written identity layouts", () => {
  const pairs = [
    ["ObjectId", ObjectIdSchema, objectIdArb, writeObjectId, readObjectId],
    ["BlockId", BlockIdSchema, blockIdArb, writeBlockId, readBlockId],
    ["NodeInfo", NodeInfoSchema, nodeInfoArb, writeNodeInfo, readNodeInfo]
  ] as const
  for (const [name, schema, arb, write, read] of pairs) {
    it(`${name}: same bytes, and each reads the other's (property)`, () => {
      const codec = codecOf(schema as Schema.Schema<unknown>)
      fc.assert(
        fc.property(arb as fc.Arbitrary<unknown>, (v) => {
          const hand = bytesOf(write as (w: BincodeWriter, a: unknown) => void, v)
          expect(bytesOf(codec.write, v)).toBe(hand)
          const buf = Buffer.from(hand, "hex")
          expect(decodeWith(buf, name, codec.read)).toEqual(Either.right(v))
          expect(decodeWith(buf, name, read as (r: BincodeReader) => unknown)).toEqual(Either.right(v))
        }),
        { numRuns: 300 }
      )
    })
  }

  it("refuses the same bad enum tags with the same kind of message", () => {
    const codec = codecOf(ObjectIdSchema)
    const bad = Buffer.from("03000000" + "0000000000000000".repeat(2), "hex")
    const viaSchema = decodeWith(bad, "object id", codec.read)
    const viaHand = decodeWith(bad, "object id", readObjectId)
    expect(Either.isLeft(viaSchema) && viaSchema.left.reason).toBe("unknown backend tag 3 (expected 0 S3, 1 Gcs, 2 Azure)")
    expect(Either.isLeft(viaHand) && viaHand.left.reason).toBe("unknown backend tag 3 (expected 0 S3, 1 Gcs, 2 Azure)")
  })
})

describe("control classes", () => {
  it("decode to an instance of the message's class that the union schema accepts (property)", () => {
    const isControl = Schema.is(ControlMessage)
    const members = new Map(ControlMessage.members.map((c) => [c._tag as string, c]))
    fc.assert(
      fc.property(controlArb, (m) => {
        const r = decodeControl(encodeControl(m))
        if (Either.isLeft(r)) throw new Error(r.left.reason)
        expect(r.right.message).toBeInstanceOf(members.get(m._tag)!)
        expect(isControl(r.right.message)).toBe(true)
      }),
      { numRuns: 300 }
    )
  })

  it("each class's position in the union is its Talon wire tag", () => {
    expect(ControlMessage.members.map((c) => c._tag)).toEqual([
      "Register", "Heartbeat", "PlacementLookup", "PlacementResponse", "Load", "EpochBump", "MembershipQuery",
      "MembershipList", "Ack", "NodeStatusHeartbeat", "StatObject", "ObjectStat", "ListObjects", "ObjectList",
      "MappingRevisionQuery", "MappingRevisionValue", "StaleMapping", "MappingRevisionUpdate", "MappingRevisionAck",
      "MembershipQueryV2", "MembershipListV2"
    ])
  })
})

describe("compiling schemas", () => {
  it("refuses types with no bincode layout, saying what to do", () => {
    expect(() => codecOf(Schema.Number)).toThrow(/give it a bincode kind/)
    expect(() => codecOf(Schema.Struct({ a: Schema.optional(Wire.u8) }))).toThrow(/optional field a: use option/)
    expect(() => codecOf(Schema.Union(Wire.u8, Wire.string))).toThrow(/only NullOr/)
  })

  it("enforces fixed values and refinements in both directions", () => {
    const versioned = Schema.Struct({ v: Wire.fixed("u16", "test schema", 1), n: Wire.u8 }).pipe(
      Schema.filter((s) => (s.n % 2 === 0 ? true : `n ${s.n} is odd`), Wire.bounded("test value", 3))
    )
    const codec = codecOf(versioned)
    expect(bytesOf(codec.write, { v: 1, n: 2 })).toBe("010002")
    expect(() => bytesOf(codec.write, { v: 2, n: 2 })).toThrow("test schema 2 is not supported (supported: 1)")
    expect(() => bytesOf(codec.write, { v: 1, n: 3 })).toThrow("invalid test value: n 3 is odd")
    const read = (hex: string) => {
      const r = decodeWith(Buffer.from(hex, "hex"), "test", codec.read)
      return Either.isLeft(r) ? r.left.reason : r.right
    }
    expect(read("010002")).toEqual({ v: 1, n: 2 })
    expect(read("020002")).toBe("unsupported test schema 2 (supported: 1)")
    expect(read("010003")).toBe("invalid test value: n 3 is odd")
  })
})
