/**
 * `NodeStatus`: the bounded, versioned status snapshot a node sends in
 * `NodeStatusHeartbeat` (control tag 9) and that the cluster state store keeps
 * one of per node. Layout and limits are Talon's (`talon_core::status`, ADR
 * 0001 §2), serialized with the same bincode rules as every control message:
 * fields in declaration order, `NodeHealth` as a u32 tag, `labels` a
 * `BTreeMap<String, String>` (u64 count, then key/value pairs in key order).
 */
import type { NodeInfo } from "../core/ids.js"
import { BincodeWriter, type BincodeReader } from "./bincode.js"
import { readNodeInfo, writeNodeInfo } from "./codecs.js"

/** Current node-status value schema (Talon's NODE_STATUS_SCHEMA_VERSION). */
export const NODE_STATUS_SCHEMA_VERSION = 1
/** Largest encoded status value, in bytes. */
export const MAX_NODE_STATUS_BYTES = 16 * 1024
/** Largest UTF-8 byte length of an identity, version or address field. */
export const MAX_STATUS_FIELD_BYTES = 256
export const MAX_STATUS_LABELS = 16
export const MAX_STATUS_LABEL_KEY_BYTES = 63
export const MAX_STATUS_LABEL_VALUE_BYTES = 256
/** `labels` key carrying the node's deployment zone. */
export const NODE_ZONE_LABEL = "zone"

/** In Talon's declaration order: the index is the wire tag. */
export const NODE_HEALTH = ["healthy", "degraded", "unhealthy", "unknown"] as const
export type NodeHealth = (typeof NODE_HEALTH)[number]

/** Latest-value counters and gauges, in wire order (all u64). */
export const NODE_METRIC_FIELDS = [
  "requestsTotal",
  "errorsTotal",
  "bytesServedTotal",
  "cacheHitsTotal",
  "cacheMissesTotal",
  "backendErrorsTotal",
  "evictionsTotal",
  "inflightLoads",
  "blockCount",
  "pageCount",
  "residentBytes",
  "capacityBytes",
  "stateSnapshotAgeMs"
] as const
export type NodeMetricsSnapshot = { readonly [K in (typeof NODE_METRIC_FIELDS)[number]]: number }

export const emptyMetrics: NodeMetricsSnapshot = Object.fromEntries(NODE_METRIC_FIELDS.map((k) => [k, 0])) as NodeMetricsSnapshot

export interface NodeStatus {
  readonly schemaVersion: number
  readonly clusterId: string
  readonly node: NodeInfo
  /** Random per process start. */
  readonly incarnationId: string
  readonly adminAddress: string | null
  readonly buildVersion: string
  readonly startedAtUnixMs: number
  readonly reportedAtUnixMs: number
  /** Increases within one incarnation. */
  readonly heartbeatSeq: number
  readonly health: NodeHealth
  readonly ready: boolean
  readonly metrics: NodeMetricsSnapshot
  /** Unique keys in ascending UTF-8 byte order: the order Talon's BTreeMap writes. */
  readonly labels: ReadonlyArray<readonly [string, string]>
}

const utf8Len = (s: string): number => Buffer.byteLength(s, "utf8")

/** Orders keys by their UTF-8 bytes, as Rust's `String` ordering does. */
export const compareUtf8 = (a: string, b: string): number => Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"))

/** Labels from any key/value source, canonical (sorted, later duplicates win). */
export const canonicalLabels = (
  labels: Iterable<readonly [string, string]> | Readonly<Record<string, string>>
): ReadonlyArray<readonly [string, string]> => {
  const entries: Iterable<readonly [string, string]> =
    Symbol.iterator in labels ? (labels as Iterable<readonly [string, string]>) : Object.entries(labels)
  const map = new Map<string, string>()
  for (const [k, v] of entries) map.set(k, v)
  return [...map.entries()].sort(([a], [b]) => compareUtf8(a, b))
}

export const labelOf = (status: NodeStatus, key: string): string | undefined => status.labels.find(([k]) => k === key)?.[1]

const checkField = (field: string, value: string, max: number, required: boolean): string | null => {
  if (required && value.length === 0) return `node-status field ${field} must not be empty`
  const got = utf8Len(value)
  return got > max ? `node-status field ${field} is ${got} bytes; maximum is ${max}` : null
}

/**
 * Talon's `NodeStatus::validate`, plus this build's canonical label order.
 * Returns what is wrong, or null when the status may go on the wire.
 */
export const nodeStatusProblem = (s: NodeStatus): string | null => {
  if (s.schemaVersion !== NODE_STATUS_SCHEMA_VERSION) {
    return `unsupported node-status schema ${s.schemaVersion} (supported: ${NODE_STATUS_SCHEMA_VERSION})`
  }
  const fields: Array<[string, string | null]> = [
    ["cluster_id", s.clusterId],
    ["node.id", s.node.id],
    ["node.address", s.node.address],
    ["incarnation_id", s.incarnationId],
    ["build_version", s.buildVersion],
    ["admin_address", s.adminAddress]
  ]
  for (const [field, value] of fields) {
    if (value === null) continue
    const p = checkField(field, value, MAX_STATUS_FIELD_BYTES, true)
    if (p !== null) return p
  }
  if (s.reportedAtUnixMs < s.startedAtUnixMs) {
    return `node status reported_at_unix_ms ${s.reportedAtUnixMs} is before started_at_unix_ms ${s.startedAtUnixMs}`
  }
  if (s.labels.length > MAX_STATUS_LABELS) return `node status has ${s.labels.length} labels; maximum is ${MAX_STATUS_LABELS}`
  for (let i = 0; i < s.labels.length; i++) {
    const [k, v] = s.labels[i]!
    const p = checkField("label key", k, MAX_STATUS_LABEL_KEY_BYTES, true) ?? checkField("label value", v, MAX_STATUS_LABEL_VALUE_BYTES, false)
    if (p !== null) return p
    if (i > 0 && compareUtf8(s.labels[i - 1]![0], k) >= 0) {
      return `node-status labels must have unique keys in ascending order (label ${JSON.stringify(k)} is out of order); build them with canonicalLabels`
    }
  }
  return null
}

const writeBody = (w: BincodeWriter, s: NodeStatus): void => {
  w.u16(s.schemaVersion).string(s.clusterId)
  writeNodeInfo(w, s.node)
  w.string(s.incarnationId)
    .option(s.adminAddress, (w, a) => w.string(a))
    .string(s.buildVersion)
    .u64(s.startedAtUnixMs)
    .u64(s.reportedAtUnixMs)
    .u64(s.heartbeatSeq)
    .u32(NODE_HEALTH.indexOf(s.health))
    .bool(s.ready)
  for (const k of NODE_METRIC_FIELDS) w.u64(s.metrics[k])
  w.vec(s.labels, (w, [k, v]) => w.string(k).string(v))
}

/**
 * Writes a status after checking it as Talon does on encode (validity, then
 * the 16 KiB limit). Throws RangeError on an invalid status: a caller bug.
 */
export const writeNodeStatus = (w: BincodeWriter, s: NodeStatus): void => {
  const problem = nodeStatusProblem(s)
  if (problem !== null) throw new RangeError(`invalid node status: ${problem}`)
  const start = w.length
  writeBody(w, s)
  const got = w.length - start
  if (got > MAX_NODE_STATUS_BYTES) throw new RangeError(`encoded node status is ${got} bytes; maximum is ${MAX_NODE_STATUS_BYTES}`)
}

/** Encoded size of a valid status, to check it fits before sending. */
export const nodeStatusSize = (s: NodeStatus): number => {
  const w = new BincodeWriter(512)
  writeBody(w, s)
  return w.length
}

export const readNodeStatus = (r: BincodeReader): NodeStatus => {
  const start = r.pos
  const schemaVersion = r.u16()
  if (schemaVersion !== NODE_STATUS_SCHEMA_VERSION) {
    r.fail(`unsupported node-status schema ${schemaVersion} (supported: ${NODE_STATUS_SCHEMA_VERSION})`)
  }
  const clusterId = r.string()
  const node = readNodeInfo(r)
  const incarnationId = r.string()
  const adminAddress = r.option((r) => r.string())
  const buildVersion = r.string()
  const startedAtUnixMs = r.u64()
  const reportedAtUnixMs = r.u64()
  const heartbeatSeq = r.u64()
  const healthTag = r.u32()
  const health = NODE_HEALTH[healthTag]
  if (health === undefined) r.fail(`unknown node health tag ${healthTag} (expected 0 healthy … 3 unknown)`)
  const ready = r.bool()
  const metrics: Record<string, number> = {}
  for (const k of NODE_METRIC_FIELDS) metrics[k] = r.u64()
  // Each label is at least two 8-byte length prefixes: refuse impossible counts before looping.
  const count = r.u64()
  if (count > MAX_STATUS_LABELS) r.fail(`node status has ${count} labels; maximum is ${MAX_STATUS_LABELS}`)
  const labels: Array<readonly [string, string]> = []
  for (let i = 0; i < count; i++) labels.push([r.string(), r.string()])
  if (r.pos - start > MAX_NODE_STATUS_BYTES) {
    r.fail(`encoded node status is ${r.pos - start} bytes; maximum is ${MAX_NODE_STATUS_BYTES}`)
  }
  const status: NodeStatus = {
    schemaVersion,
    clusterId,
    node,
    incarnationId,
    adminAddress,
    buildVersion,
    startedAtUnixMs,
    reportedAtUnixMs,
    heartbeatSeq,
    health,
    ready,
    metrics: metrics as NodeMetricsSnapshot,
    labels
  }
  const problem = nodeStatusProblem(status)
  if (problem !== null) r.fail(`invalid node status: ${problem}`)
  return status
}
