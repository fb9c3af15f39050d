/**
 * `NodeStatus`: the bounded, versioned status snapshot a node sends in
 * `NodeStatusHeartbeat` (control tag 9) and that the cluster state store keeps
 * one of per node. Layout and limits are Talon's (`talon_core::status`, ADR
 * 0001 §2), serialized with the same bincode rules as every control message:
 * fields in declaration order, `NodeHealth` as a u32 tag, `labels` a
 * `BTreeMap<String, String>` (u64 count, then key/value pairs in key order).
 */
import { Schema } from "effect"
import { BincodeWriter, type BincodeReader } from "./bincode.js"
import { bool, bounded, codecOf, enumU32, fixed, nonEmptyString, option, string, u64, vec } from "./bincodeSchema.js"
import { nodeRole } from "./identity.js"

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

const metricsFields = Object.fromEntries(NODE_METRIC_FIELDS.map((k) => [k, u64])) as {
  readonly [K in (typeof NODE_METRIC_FIELDS)[number]]: typeof u64
}

/**
 * Labels as Talon's BTreeMap writes them: unique keys in ascending UTF-8 byte order
 * (labelsProblem, checked in both directions); generated canonical.
 */
const labelsSchema = vec(Schema.Tuple(nonEmptyString(6), string)).pipe(
  Schema.filter((labels) => labelsProblem(labels) ?? true, {
    ...bounded("node status"),
    arbitrary: (from) => (fc) => from(fc).map((labels) => canonicalLabels(labels.slice(0, MAX_STATUS_LABELS)))
  })
)

/** The status fields in Talon's declaration order, before validation. */
const NodeStatusFields = Schema.Struct({
  schemaVersion: fixed("u16", "node-status schema", NODE_STATUS_SCHEMA_VERSION),
  clusterId: nonEmptyString(),
  node: Schema.Struct({ id: nonEmptyString(), address: nonEmptyString(), role: nodeRole }),
  /** Random per process start. */
  incarnationId: nonEmptyString(),
  adminAddress: option(nonEmptyString()),
  buildVersion: nonEmptyString(),
  startedAtUnixMs: u64,
  reportedAtUnixMs: u64,
  /** Increases within one incarnation. */
  heartbeatSeq: u64,
  health: enumU32("node health", NODE_HEALTH),
  ready: bool,
  metrics: Schema.Struct(metricsFields),
  /** Unique keys in ascending UTF-8 byte order: the order Talon's BTreeMap writes. */
  labels: labelsSchema
})

export type NodeStatus = typeof NodeStatusFields.Type

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
  return labelsProblem(s.labels)
}

/** What is wrong with a status's labels (count, sizes, order), or null. */
export const labelsProblem = (labels: ReadonlyArray<readonly [string, string]>): string | null => {
  if (labels.length > MAX_STATUS_LABELS) return `node status has ${labels.length} labels; maximum is ${MAX_STATUS_LABELS}`
  for (let i = 0; i < labels.length; i++) {
    const [k, v] = labels[i]!
    const p = checkField("label key", k, MAX_STATUS_LABEL_KEY_BYTES, true) ?? checkField("label value", v, MAX_STATUS_LABEL_VALUE_BYTES, false)
    if (p !== null) return p
    if (i > 0 && compareUtf8(labels[i - 1]![0], k) >= 0) {
      return `node-status labels must have unique keys in ascending order (label ${JSON.stringify(k)} is out of order); build them with canonicalLabels`
    }
  }
  return null
}

/**
 * A status as it goes on the wire: Talon's validation (nodeStatusProblem) and the 16 KiB
 * limit hold in both directions; encoding an invalid status throws RangeError (a caller bug).
 */
export const NodeStatus = NodeStatusFields.pipe(
  Schema.filter((s) => nodeStatusProblem(s) ?? true, {
    ...bounded("node status", MAX_NODE_STATUS_BYTES),
    // Generated statuses are valid: a report never precedes the start.
    arbitrary: (from) => (fc) =>
      from(fc).map((s) => ({ ...s, reportedAtUnixMs: Math.max(s.reportedAtUnixMs, s.startedAtUnixMs) }))
  })
)

const unchecked = codecOf(NodeStatusFields)
const checkedCodec = codecOf(NodeStatus)

export const writeNodeStatus = (w: BincodeWriter, s: NodeStatus): void => checkedCodec.write(w, s)
export const readNodeStatus = (r: BincodeReader): NodeStatus => checkedCodec.read(r)

/** Encoded size of a valid status, to check it fits before sending. */
export const nodeStatusSize = (s: NodeStatus): number => {
  const w = new BincodeWriter(512)
  unchecked.write(w, s)
  return w.length
}
