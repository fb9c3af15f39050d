/**
 * Control-plane messages: Talon's `ControlMessage` enum (bincode, u32 tag in
 * declaration order) wrapped in `Envelope { schema: u16, message }`.
 */
import type { Either } from "effect"
import type { BlockId, NodeInfo, ObjectId } from "../core/ids.js"
import { BincodeWriter, decodeWith, type BincodeReader } from "./bincode.js"
import { readBlockId, readNodeInfo, readObjectId, writeBlockId, writeNodeInfo, writeObjectId } from "./codecs.js"
import type { DecodeError } from "./errors.js"
import { HEADER_LEN, MsgType, writeHeader } from "./frame.js"
import { readNodeStatus, writeNodeStatus, type NodeStatus } from "./status.js"

/** Newest control schema this build speaks (Talon's CONTROL_SCHEMA_VERSION). */
export const CONTROL_SCHEMA_VERSION = 5
/** Oldest control schema this build decodes. */
export const MIN_CONTROL_SCHEMA_VERSION = 1

export interface ObjectEntry {
  readonly path: string
  readonly size: number
}

/** A membership entry with its deployment zone (schema 5); NodeInfo itself cannot grow fields. */
export interface ZonedNodeInfo {
  readonly info: NodeInfo
  readonly zone: string | null
}

export type ControlMessage =
  | { readonly _tag: "Register"; readonly node: NodeInfo }
  | { readonly _tag: "Heartbeat"; readonly node: string; readonly blockCount: number }
  | { readonly _tag: "PlacementLookup"; readonly block: BlockId; readonly k: number }
  | { readonly _tag: "PlacementResponse"; readonly owners: ReadonlyArray<string>; readonly epoch: number }
  | { readonly _tag: "Load"; readonly object: ObjectId; readonly offset: number; readonly len: number }
  | { readonly _tag: "EpochBump"; readonly epoch: number }
  | { readonly _tag: "MembershipQuery" }
  | { readonly _tag: "MembershipList"; readonly nodes: ReadonlyArray<NodeInfo> }
  | { readonly _tag: "Ack"; readonly ok: boolean; readonly detail: string | null }
  | { readonly _tag: "NodeStatusHeartbeat"; readonly status: NodeStatus }
  | { readonly _tag: "StatObject"; readonly object: ObjectId }
  | { readonly _tag: "ObjectStat"; readonly size: number; readonly version: string }
  | { readonly _tag: "ListObjects"; readonly prefix: string }
  | { readonly _tag: "ObjectList"; readonly entries: ReadonlyArray<ObjectEntry> }
  | { readonly _tag: "MappingRevisionQuery"; readonly namespace: string }
  | { readonly _tag: "MappingRevisionValue"; readonly namespace: string; readonly revision: number }
  | { readonly _tag: "StaleMapping"; readonly namespace: string; readonly current: number }
  | {
      readonly _tag: "MappingRevisionUpdate"
      readonly clusterId: string
      readonly namespace: string
      readonly revision: number
      readonly coordinatorId: string
      readonly coordinatorIncarnation: string
    }
  | {
      readonly _tag: "MappingRevisionAck"
      readonly clusterId: string
      readonly namespace: string
      readonly revision: number
      readonly workerId: string
      readonly workerIncarnation: string
    }
  | { readonly _tag: "MembershipQueryV2" }
  | { readonly _tag: "MembershipListV2"; readonly nodes: ReadonlyArray<ZonedNodeInfo> }

export type ControlTag = ControlMessage["_tag"]
export type ControlOf<T extends ControlTag> = Extract<ControlMessage, { readonly _tag: T }>

export interface Envelope {
  readonly schema: number
  readonly message: ControlMessage
}

interface Variant<T extends ControlTag> {
  readonly tag: number
  /** Oldest schema that can carry the message: what Talon writes by default. */
  readonly minSchema: number
  readonly write: (w: BincodeWriter, m: ControlOf<T>) => void
  readonly read: (r: BincodeReader) => ControlOf<T>
}

type Variants = { readonly [T in ControlTag]: Variant<T> }

const VARIANTS: Variants = {
  Register: {
    tag: 0,
    minSchema: 1,
    write: (w, m) => writeNodeInfo(w, m.node),
    read: (r) => ({ _tag: "Register", node: readNodeInfo(r) })
  },
  Heartbeat: {
    tag: 1,
    minSchema: 1,
    write: (w, m) => w.string(m.node).u64(m.blockCount),
    read: (r) => ({ _tag: "Heartbeat", node: r.string(), blockCount: r.u64() })
  },
  PlacementLookup: {
    tag: 2,
    minSchema: 1,
    write: (w, m) => {
      writeBlockId(w, m.block)
      w.u8(m.k)
    },
    read: (r) => ({ _tag: "PlacementLookup", block: readBlockId(r), k: r.u8() })
  },
  PlacementResponse: {
    tag: 3,
    minSchema: 1,
    write: (w, m) => w.vec(m.owners, (w, s) => w.string(s)).u64(m.epoch),
    read: (r) => ({ _tag: "PlacementResponse", owners: r.vec((r) => r.string()), epoch: r.u64() })
  },
  Load: {
    tag: 4,
    minSchema: 1,
    write: (w, m) => {
      writeObjectId(w, m.object)
      w.u64(m.offset).u64(m.len)
    },
    read: (r) => ({ _tag: "Load", object: readObjectId(r), offset: r.u64(), len: r.u64() })
  },
  EpochBump: {
    tag: 5,
    minSchema: 1,
    write: (w, m) => w.u64(m.epoch),
    read: (r) => ({ _tag: "EpochBump", epoch: r.u64() })
  },
  MembershipQuery: { tag: 6, minSchema: 1, write: () => {}, read: () => ({ _tag: "MembershipQuery" }) },
  MembershipList: {
    tag: 7,
    minSchema: 1,
    write: (w, m) => w.vec(m.nodes, writeNodeInfo),
    read: (r) => ({ _tag: "MembershipList", nodes: r.vec(readNodeInfo) })
  },
  Ack: {
    tag: 8,
    minSchema: 1,
    write: (w, m) => w.bool(m.ok).option(m.detail, (w, s) => w.string(s)),
    read: (r) => ({ _tag: "Ack", ok: r.bool(), detail: r.option((r) => r.string()) })
  },
  NodeStatusHeartbeat: {
    tag: 9,
    minSchema: 2,
    write: (w, m) => writeNodeStatus(w, m.status),
    read: (r) => ({ _tag: "NodeStatusHeartbeat", status: readNodeStatus(r) })
  },
  StatObject: {
    tag: 10,
    minSchema: 2,
    write: (w, m) => writeObjectId(w, m.object),
    read: (r) => ({ _tag: "StatObject", object: readObjectId(r) })
  },
  ObjectStat: {
    tag: 11,
    minSchema: 2,
    write: (w, m) => w.u64(m.size).string(m.version),
    read: (r) => ({ _tag: "ObjectStat", size: r.u64(), version: r.string() })
  },
  ListObjects: {
    tag: 12,
    minSchema: 2,
    write: (w, m) => w.string(m.prefix),
    read: (r) => ({ _tag: "ListObjects", prefix: r.string() })
  },
  ObjectList: {
    tag: 13,
    minSchema: 2,
    write: (w, m) => w.vec(m.entries, (w, e) => w.string(e.path).u64(e.size)),
    read: (r) => ({ _tag: "ObjectList", entries: r.vec((r) => ({ path: r.string(), size: r.u64() })) })
  },
  MappingRevisionQuery: {
    tag: 14,
    minSchema: 3,
    write: (w, m) => w.string(m.namespace),
    read: (r) => ({ _tag: "MappingRevisionQuery", namespace: r.string() })
  },
  MappingRevisionValue: {
    tag: 15,
    minSchema: 3,
    write: (w, m) => w.string(m.namespace).u64(m.revision),
    read: (r) => ({ _tag: "MappingRevisionValue", namespace: r.string(), revision: r.u64() })
  },
  StaleMapping: {
    tag: 16,
    minSchema: 3,
    write: (w, m) => w.string(m.namespace).u64(m.current),
    read: (r) => ({ _tag: "StaleMapping", namespace: r.string(), current: r.u64() })
  },
  MappingRevisionUpdate: {
    tag: 17,
    minSchema: 4,
    write: (w, m) =>
      w.string(m.clusterId).string(m.namespace).u64(m.revision).string(m.coordinatorId).string(m.coordinatorIncarnation),
    read: (r) => ({
      _tag: "MappingRevisionUpdate",
      clusterId: r.string(),
      namespace: r.string(),
      revision: r.u64(),
      coordinatorId: r.string(),
      coordinatorIncarnation: r.string()
    })
  },
  MappingRevisionAck: {
    tag: 18,
    minSchema: 4,
    write: (w, m) =>
      w.string(m.clusterId).string(m.namespace).u64(m.revision).string(m.workerId).string(m.workerIncarnation),
    read: (r) => ({
      _tag: "MappingRevisionAck",
      clusterId: r.string(),
      namespace: r.string(),
      revision: r.u64(),
      workerId: r.string(),
      workerIncarnation: r.string()
    })
  },
  MembershipQueryV2: { tag: 19, minSchema: 5, write: () => {}, read: () => ({ _tag: "MembershipQueryV2" }) },
  MembershipListV2: {
    tag: 20,
    minSchema: 5,
    write: (w, m) =>
      w.vec(m.nodes, (w, n) => {
        writeNodeInfo(w, n.info)
        w.option(n.zone, (w, z) => w.string(z))
      }),
    read: (r) => ({
      _tag: "MembershipListV2",
      nodes: r.vec((r) => ({ info: readNodeInfo(r), zone: r.option((r) => r.string()) }))
    })
  }
}

const BY_TAG: ReadonlyArray<Variant<ControlTag> | undefined> = (() => {
  const out: Array<Variant<ControlTag> | undefined> = []
  for (const v of Object.values(VARIANTS) as Array<Variant<ControlTag>>) out[v.tag] = v
  return out
})()

const variantOf = <T extends ControlTag>(m: ControlOf<T>): Variant<T> => VARIANTS[m._tag as T] as Variant<T>

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
  v.write(w, m)
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
  const v = BY_TAG[tag]
  if (v === undefined) {
    r.fail(`unknown control message tag ${tag}`)
  }
  if (schema < v.minSchema) r.fail(`control message tag ${tag} requires schema ${v.minSchema}, but the envelope says ${schema}`)
  return { schema, message: v.read(r) }
}

/** Decodes envelope bytes (a Control frame's payload). Never throws. */
export const decodeControl = (bytes: Uint8Array): Either.Either<Envelope, DecodeError> =>
  decodeWith(bytes, "control message", readEnvelope)
