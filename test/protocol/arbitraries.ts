/** fast-check generators for wire values, shared by the protocol property tests. */
import fc from "fast-check"
import { Backend, NodeRole, type BlockId, type NodeInfo, type ObjectId } from "../../src/core/index.js"
import {
  CONTROL_SCHEMA_VERSION,
  MsgType,
  NODE_HEALTH,
  NODE_METRIC_FIELDS,
  NODE_STATUS_SCHEMA_VERSION,
  canonicalLabels,
  minimumSchema,
  type NodeMetricsSnapshot,
  type NodeStatus,
  type ControlMessage,
  type Envelope,
  type FrameHeader,
  type RangeRequest
} from "../../src/protocol/index.js"

export const str = fc.string({ unit: "grapheme", maxLength: 12 })
export const u64 = fc.oneof(fc.maxSafeNat(), fc.constantFrom(0, 2 ** 32 - 1, 2 ** 32, Number.MAX_SAFE_INTEGER))
export const u32 = fc.nat({ max: 0xffffffff })

export const objectIdArb: fc.Arbitrary<ObjectId> = fc.record({
  backend: fc.constantFrom(Backend.S3, Backend.Gcs, Backend.Azure),
  bucket: str,
  objectPath: str
})
export const blockIdArb: fc.Arbitrary<BlockId> = fc.record({ object: objectIdArb, offset: u64, blockSize: u32, version: str })
export const nodeInfoArb: fc.Arbitrary<NodeInfo> = fc.record({
  id: str,
  address: str,
  role: fc.constantFrom(NodeRole.Coordinator, NodeRole.Worker)
})

const field = fc.string({ unit: "grapheme", minLength: 1, maxLength: 12 })

/** A status Talon's validation accepts: bounded fields, start <= report, canonical labels. */
export const nodeStatusArb: fc.Arbitrary<NodeStatus> = fc
  .record({
    clusterId: field,
    node: fc.record({ id: field, address: field, role: fc.constantFrom(NodeRole.Coordinator, NodeRole.Worker) }),
    incarnationId: field,
    adminAddress: fc.option(field, { nil: null }),
    buildVersion: field,
    startedAtUnixMs: fc.nat({ max: 2 ** 52 }),
    sinceStart: fc.nat({ max: 2 ** 52 }),
    heartbeatSeq: u64,
    health: fc.constantFrom(...NODE_HEALTH),
    ready: fc.boolean(),
    metrics: fc.tuple(...NODE_METRIC_FIELDS.map(() => u64)),
    labels: fc.array(fc.tuple(fc.string({ unit: "grapheme", minLength: 1, maxLength: 6 }), str), { maxLength: 16 })
  })
  .map(({ labels, metrics, sinceStart, ...s }) => ({
    ...s,
    schemaVersion: NODE_STATUS_SCHEMA_VERSION,
    reportedAtUnixMs: s.startedAtUnixMs + sinceStart,
    metrics: Object.fromEntries(NODE_METRIC_FIELDS.map((k, i) => [k, metrics[i]])) as NodeMetricsSnapshot,
    labels: canonicalLabels(labels)
  }))

export const controlArb: fc.Arbitrary<ControlMessage> = fc.oneof(
  fc.record({ _tag: fc.constant("Register" as const), node: nodeInfoArb }),
  fc.record({ _tag: fc.constant("Heartbeat" as const), node: str, blockCount: u64 }),
  fc.record({ _tag: fc.constant("PlacementLookup" as const), block: blockIdArb, k: fc.nat({ max: 255 }) }),
  fc.record({ _tag: fc.constant("PlacementResponse" as const), owners: fc.array(str, { maxLength: 5 }), epoch: u64 }),
  fc.record({ _tag: fc.constant("Load" as const), object: objectIdArb, offset: u64, len: u64 }),
  fc.record({ _tag: fc.constant("EpochBump" as const), epoch: u64 }),
  fc.constant({ _tag: "MembershipQuery" as const }),
  fc.record({ _tag: fc.constant("MembershipList" as const), nodes: fc.array(nodeInfoArb, { maxLength: 4 }) }),
  fc.record({ _tag: fc.constant("Ack" as const), ok: fc.boolean(), detail: fc.option(str, { nil: null }) }),
  fc.record({ _tag: fc.constant("NodeStatusHeartbeat" as const), status: nodeStatusArb }),
  fc.record({ _tag: fc.constant("StatObject" as const), object: objectIdArb }),
  fc.record({ _tag: fc.constant("ObjectStat" as const), size: u64, version: str }),
  fc.record({ _tag: fc.constant("ListObjects" as const), prefix: str }),
  fc.record({
    _tag: fc.constant("ObjectList" as const),
    entries: fc.array(fc.record({ path: str, size: u64 }), { maxLength: 4 })
  }),
  fc.record({ _tag: fc.constant("MappingRevisionQuery" as const), namespace: str }),
  fc.record({ _tag: fc.constant("MappingRevisionValue" as const), namespace: str, revision: u64 }),
  fc.record({ _tag: fc.constant("StaleMapping" as const), namespace: str, current: u64 }),
  fc.record({
    _tag: fc.constant("MappingRevisionUpdate" as const),
    clusterId: str,
    namespace: str,
    revision: u64,
    coordinatorId: str,
    coordinatorIncarnation: str
  }),
  fc.record({
    _tag: fc.constant("MappingRevisionAck" as const),
    clusterId: str,
    namespace: str,
    revision: u64,
    workerId: str,
    workerIncarnation: str
  }),
  fc.constant({ _tag: "MembershipQueryV2" as const }),
  fc.record({
    _tag: fc.constant("MembershipListV2" as const),
    nodes: fc.array(fc.record({ info: nodeInfoArb, zone: fc.option(str, { nil: null }) }), { maxLength: 4 })
  })
)

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
