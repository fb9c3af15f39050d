/**
 * Control-plane messages: Talon's `ControlMessage` enum (bincode, u32 tag in
 * declaration order) wrapped in `Envelope { schema: u16, message }`. Each variant is a
 * Schema class; its bincode layout is compiled from the schema (bincodeSchema.ts).
 */
import { type Either, Schema } from "effect"
import { BincodeWriter, decodeWith, type BincodeReader } from "./bincode.js"
import { bool, type Codec, codecOf, option, string, u64, u8, vec } from "./bincodeSchema.js"
import type { DecodeError } from "./errors.js"
import { HEADER_LEN, MsgType, writeHeader } from "./frame.js"
import { BlockIdSchema, NodeInfoSchema, ObjectIdSchema } from "./identity.js"
import { NodeStatus } from "./status.js"

/** Newest control schema this build speaks (Talon's CONTROL_SCHEMA_VERSION). */
export const CONTROL_SCHEMA_VERSION = 5
/** Oldest control schema this build decodes. */
export const MIN_CONTROL_SCHEMA_VERSION = 1

const objectEntry = Schema.Struct({ path: string, size: u64 })
export type ObjectEntry = typeof objectEntry.Type

/** A membership entry with its deployment zone (schema 5); NodeInfo itself cannot grow fields. */
const zonedNodeInfo = Schema.Struct({ info: NodeInfoSchema, zone: option(string) })
export type ZonedNodeInfo = typeof zonedNodeInfo.Type

/*
 * One class per variant of Talon's enum. `minSchema` is the oldest envelope schema able to
 * carry the message: what Talon writes by default.
 */
export class Register extends Schema.TaggedClass<Register>()("Register", { node: NodeInfoSchema }) {
  static readonly minSchema = 1
}
export class Heartbeat extends Schema.TaggedClass<Heartbeat>()("Heartbeat", { node: string, blockCount: u64 }) {
  static readonly minSchema = 1
}
export class PlacementLookup extends Schema.TaggedClass<PlacementLookup>()("PlacementLookup", { block: BlockIdSchema, k: u8 }) {
  static readonly minSchema = 1
}
export class PlacementResponse extends Schema.TaggedClass<PlacementResponse>()("PlacementResponse", {
  owners: vec(string),
  epoch: u64
}) {
  static readonly minSchema = 1
}
export class Load extends Schema.TaggedClass<Load>()("Load", { object: ObjectIdSchema, offset: u64, len: u64 }) {
  static readonly minSchema = 1
}
export class EpochBump extends Schema.TaggedClass<EpochBump>()("EpochBump", { epoch: u64 }) {
  static readonly minSchema = 1
}
export class MembershipQuery extends Schema.TaggedClass<MembershipQuery>()("MembershipQuery", {}) {
  static readonly minSchema = 1
}
export class MembershipList extends Schema.TaggedClass<MembershipList>()("MembershipList", { nodes: vec(NodeInfoSchema) }) {
  static readonly minSchema = 1
}
export class Ack extends Schema.TaggedClass<Ack>()("Ack", { ok: bool, detail: option(string) }) {
  static readonly minSchema = 1
}
export class NodeStatusHeartbeat extends Schema.TaggedClass<NodeStatusHeartbeat>()("NodeStatusHeartbeat", { status: NodeStatus }) {
  static readonly minSchema = 2
}
export class StatObject extends Schema.TaggedClass<StatObject>()("StatObject", { object: ObjectIdSchema }) {
  static readonly minSchema = 2
}
export class ObjectStat extends Schema.TaggedClass<ObjectStat>()("ObjectStat", { size: u64, version: string }) {
  static readonly minSchema = 2
}
export class ListObjects extends Schema.TaggedClass<ListObjects>()("ListObjects", { prefix: string }) {
  static readonly minSchema = 2
}
export class ObjectList extends Schema.TaggedClass<ObjectList>()("ObjectList", { entries: vec(objectEntry) }) {
  static readonly minSchema = 2
}
export class MappingRevisionQuery extends Schema.TaggedClass<MappingRevisionQuery>()("MappingRevisionQuery", { namespace: string }) {
  static readonly minSchema = 3
}
export class MappingRevisionValue extends Schema.TaggedClass<MappingRevisionValue>()("MappingRevisionValue", {
  namespace: string,
  revision: u64
}) {
  static readonly minSchema = 3
}
export class StaleMapping extends Schema.TaggedClass<StaleMapping>()("StaleMapping", { namespace: string, current: u64 }) {
  static readonly minSchema = 3
}
export class MappingRevisionUpdate extends Schema.TaggedClass<MappingRevisionUpdate>()("MappingRevisionUpdate", {
  clusterId: string,
  namespace: string,
  revision: u64,
  coordinatorId: string,
  coordinatorIncarnation: string
}) {
  static readonly minSchema = 4
}
export class MappingRevisionAck extends Schema.TaggedClass<MappingRevisionAck>()("MappingRevisionAck", {
  clusterId: string,
  namespace: string,
  revision: u64,
  workerId: string,
  workerIncarnation: string
}) {
  static readonly minSchema = 4
}
export class MembershipQueryV2 extends Schema.TaggedClass<MembershipQueryV2>()("MembershipQueryV2", {}) {
  static readonly minSchema = 5
}
export class MembershipListV2 extends Schema.TaggedClass<MembershipListV2>()("MembershipListV2", { nodes: vec(zonedNodeInfo) }) {
  static readonly minSchema = 5
}

/** Talon's `ControlMessage`: the members in declaration order, so a member's index is its u32 wire tag. */
export const ControlMessage = Schema.Union(
  Register,
  Heartbeat,
  PlacementLookup,
  PlacementResponse,
  Load,
  EpochBump,
  MembershipQuery,
  MembershipList,
  Ack,
  NodeStatusHeartbeat,
  StatObject,
  ObjectStat,
  ListObjects,
  ObjectList,
  MappingRevisionQuery,
  MappingRevisionValue,
  StaleMapping,
  MappingRevisionUpdate,
  MappingRevisionAck,
  MembershipQueryV2,
  MembershipListV2
)
/** A message's fields: a class instance, or a plain object of the same shape (both encode). */
export type ControlMessage = typeof ControlMessage.Type

export type ControlTag = ControlMessage["_tag"]
export type ControlOf<T extends ControlTag> = Extract<ControlMessage, { readonly _tag: T }>

export interface Envelope {
  readonly schema: number
  readonly message: ControlMessage
}

interface Variant {
  readonly tag: number
  readonly minSchema: number
  readonly fields: Codec<Record<string, unknown>>
  readonly make: (fields: Record<string, unknown>) => ControlMessage
}

const VARIANTS: ReadonlyArray<Variant> = ControlMessage.members.map((cls, tag) => {
  const proto = cls.prototype as object
  return {
    tag,
    minSchema: cls.minSchema,
    fields: codecOf(Schema.Struct(cls.fields)) as unknown as Codec<Record<string, unknown>>,
    /*
     * Decoded fields (with `_tag`) already satisfy the schema, and a Schema class instance is
     * its fields on the class's prototype: built directly, as the constructor's validation-free
     * path would, without its copying and default-merging per message
     * (docs/decisions/measured-in-code.md).
     */
    make: (fields) => Object.setPrototypeOf(fields, proto) as ControlMessage
  }
})
const BY_NAME: Readonly<Record<string, Variant>> = Object.fromEntries(ControlMessage.members.map((cls, i) => [cls._tag, VARIANTS[i]!]))

const variantOf = (m: ControlMessage): Variant => BY_NAME[m._tag]!

/** Wire tag of a message (its position in Talon's enum). */
export const controlTag = (m: ControlMessage): number => variantOf(m).tag

/** Oldest schema that can carry `m`; Talon writes this by default. */
export const minimumSchema = (m: ControlMessage): number => variantOf(m).minSchema

const checkSchema = (m: ControlMessage, schema: number): void => {
  if (!Number.isInteger(schema) || schema < MIN_CONTROL_SCHEMA_VERSION || schema > CONTROL_SCHEMA_VERSION) {
    throw new RangeError(
      `control schema ${schema} is not supported (this build speaks ${MIN_CONTROL_SCHEMA_VERSION}..${CONTROL_SCHEMA_VERSION})`
    )
  }
  const required = minimumSchema(m)
  if (schema < required) throw new RangeError(`control message ${m._tag} requires schema ${required}, but ${schema} was selected`)
}

const writeEnvelope = (w: BincodeWriter, m: ControlMessage, schema: number): void => {
  const v = variantOf(m)
  w.u16(schema).u32(v.tag)
  v.fields.write(w, m as unknown as Record<string, unknown>)
}

/**
 * Envelope bytes for `msg`. Throws RangeError only on caller bugs: a schema
 * outside the supported range or older than the message, a field out of
 * its wire range (u64 above 2^53-1, k above 255), or a NodeStatus that
 * Talon's validation refuses.
 */
export const encodeControl = (msg: ControlMessage, schema: number = minimumSchema(msg)): Uint8Array => {
  checkSchema(msg, schema)
  const w = new BincodeWriter(128)
  writeEnvelope(w, msg, schema)
  return w.finish()
}

/** A complete Control frame (header + envelope) in one buffer. */
export const encodeControlFrame = (requestId: number, msg: ControlMessage, schema: number = minimumSchema(msg)): Buffer => {
  checkSchema(msg, schema)
  const w = new BincodeWriter(HEADER_LEN + 128, HEADER_LEN)
  writeEnvelope(w, msg, schema)
  const buf = w.finish()
  writeHeader(buf, 0, { type: MsgType.Control, flags: 0, requestId, length: buf.length - HEADER_LEN })
  return buf
}

const readEnvelope = (r: BincodeReader): Envelope => {
  const schema = r.u16()
  if (schema < MIN_CONTROL_SCHEMA_VERSION || schema > CONTROL_SCHEMA_VERSION) {
    r.fail(`unsupported control schema ${schema} (this build speaks ${MIN_CONTROL_SCHEMA_VERSION}..${CONTROL_SCHEMA_VERSION})`)
  }
  const tag = r.u32()
  const v = VARIANTS[tag]
  if (v === undefined) {
    r.fail(`unknown control message tag ${tag}`)
  }
  if (schema < v.minSchema) r.fail(`control message tag ${tag} requires schema ${v.minSchema}, but the envelope says ${schema}`)
  return { schema, message: v.make(v.fields.read(r)) }
}

/** Decodes envelope bytes (a Control frame's payload). Never throws. */
export const decodeControl = (bytes: Uint8Array): Either.Either<Envelope, DecodeError> =>
  decodeWith(bytes, "control message", readEnvelope)
