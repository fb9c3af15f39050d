/** fast-check generators for wire values, shared by the protocol property tests; control values come from their schemas. */
import { Arbitrary, type Schema } from "effect"
import fc from "fast-check"
import type { BlockId, NodeInfo, ObjectId } from "../../src/core/index.js"
import * as Wire from "../../src/protocol/bincodeSchema.js"
import {
  BlockIdSchema,
  CONTROL_SCHEMA_VERSION,
  ControlMessage,
  MsgType,
  NodeInfoSchema,
  NodeStatus,
  ObjectIdSchema,
  minimumSchema,
  type Envelope,
  type FrameHeader,
  type RangeRequest
} from "../../src/protocol/index.js"

/**
 * `fromSchema(schema)`, built on this package's fast-check (effect bundles its own copy,
 * whose Arbitrary class the fc.assert used here would not recognise).
 */
const fromSchema = <A, I>(schema: Schema.Schema<A, I>): fc.Arbitrary<A> =>
  Arbitrary.makeLazy(schema)(fc as unknown as Parameters<Arbitrary.LazyArbitrary<A>>[0]) as unknown as fc.Arbitrary<A>

// Generators derived from the wire schemas: each field's generator follows its bincode kind
// (u64 includes the 2^32 word boundary and 2^53-1; text is any Unicode).
export const str: fc.Arbitrary<string> = fromSchema(Wire.string)
export const u64: fc.Arbitrary<number> = fromSchema(Wire.u64)
export const u32: fc.Arbitrary<number> = fromSchema(Wire.u32)

export const objectIdArb: fc.Arbitrary<ObjectId> = fromSchema(ObjectIdSchema)
export const blockIdArb: fc.Arbitrary<BlockId> = fromSchema(BlockIdSchema)
export const nodeInfoArb: fc.Arbitrary<NodeInfo> = fromSchema(NodeInfoSchema)

/** A status Talon's validation accepts (the schema's refinement): bounded fields, start <= report, canonical labels. */
export const nodeStatusArb: fc.Arbitrary<NodeStatus> = fromSchema(NodeStatus)

export const controlArb: fc.Arbitrary<ControlMessage> = fromSchema(ControlMessage)

/** A message with any schema able to carry it. */
export const envelopeArb: fc.Arbitrary<Envelope> = controlArb.chain((message) =>
  fc.integer({ min: minimumSchema(message), max: CONTROL_SCHEMA_VERSION }).map((schema) => ({ schema, message }))
)

export const rangeArb: fc.Arbitrary<RangeRequest> = fc.record({ object: objectIdArb, offset: u64, len: u64 })

export const msgTypeArb = fc.constantFrom(
  MsgType.Control,
  MsgType.Get,
  MsgType.GetRange,
  MsgType.Put,
  MsgType.Ping,
  MsgType.Delete
)

export const headerArb: fc.Arbitrary<FrameHeader> = fc.record({
  type: msgTypeArb,
  flags: fc.nat({ max: 0xffff }),
  requestId: u32,
  length: u32
})
