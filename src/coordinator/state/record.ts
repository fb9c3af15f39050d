/**
 * What the store keeps per node and the rules every backend applies to it:
 * Talon's write ordering, the JSON value Talon's etcd backend stores (so a
 * Talon coordinator and this one can share a keyspace), and the health a
 * reader derives from how long ago the last write was accepted.
 */
import { Either, ParseResult, Schema } from "effect"
import { NodeRole, type NodeInfo } from "../../core/ids.js"
import {
  NODE_HEALTH,
  NODE_METRIC_FIELDS,
  canonicalLabels,
  nodeStatusProblem,
  type NodeHealth,
  type NodeMetricsSnapshot,
  type NodeStatus
} from "../../protocol/status.js"

/** What a put did: Talon's WriteDisposition. */
export type Disposition = "applied" | "duplicate" | "stale"

/**
 * Talon's ordering rule. A write applies when no record exists, when it comes
 * from the same incarnation with a higher sequence, or from another
 * incarnation that started later (or at the same time but reported later) —
 * so a delayed heartbeat of a process that has since restarted cannot displace
 * its successor. Returns null when the write applies.
 */
export const rejectReason = (current: NodeStatus | undefined, incoming: NodeStatus): Exclude<Disposition, "applied"> | null => {
  if (current === undefined) return null
  if (current.incarnationId === incoming.incarnationId) {
    if (incoming.heartbeatSeq < current.heartbeatSeq) return "stale"
    return incoming.heartbeatSeq === current.heartbeatSeq ? "duplicate" : null
  }
  const older =
    incoming.startedAtUnixMs < current.startedAtUnixMs ||
    (incoming.startedAtUnixMs === current.startedAtUnixMs && incoming.reportedAtUnixMs <= current.reportedAtUnixMs)
  return older ? "stale" : null
}

/** A record as read back: the status plus when a coordinator accepted it. */
export interface StoredNode {
  readonly status: NodeStatus
  /** Clock of the coordinator that accepted the write (falls back to the node's report time). */
  readonly updatedAtUnixMs: number
}

/** Health as a reader should treat it: `unhealthy` once silent for longer than `unhealthyAfterMs`. */
export const effectiveHealth = (node: StoredNode, nowUnixMs: number, unhealthyAfterMs: number): NodeHealth =>
  nowUnixMs - node.updatedAtUnixMs > unhealthyAfterMs ? "unhealthy" : node.status.health

const u64 = Schema.Number.pipe(
  Schema.filter((n) => Number.isSafeInteger(n) && n >= 0, { message: () => "expected an unsigned integer no larger than 2^53-1" })
)
const roleNames = ["Coordinator", "Worker"] as const

const TalonJson = Schema.Struct({
  schema_version: Schema.Number,
  cluster_id: Schema.String,
  node: Schema.Struct({ id: Schema.String, address: Schema.String, role: Schema.Literal(...roleNames) }),
  incarnation_id: Schema.String,
  admin_address: Schema.NullOr(Schema.String),
  build_version: Schema.String,
  started_at_unix_ms: u64,
  reported_at_unix_ms: u64,
  heartbeat_seq: u64,
  health: Schema.Literal(...NODE_HEALTH),
  ready: Schema.Boolean,
  metrics: Schema.Record({ key: Schema.String, value: u64 }),
  labels: Schema.Record({ key: Schema.String, value: Schema.String }),
  /** Not in Talon's struct; serde ignores unknown fields, so Talon still reads these records. */
  observed_at_unix_ms: Schema.optional(u64)
})
const decodeTalonJson = Schema.decodeUnknownEither(Schema.parseJson(TalonJson))

const snake = (camel: string): string => camel.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)

/** Talon's serde_json form of a NodeStatus, plus the accepting coordinator's clock. */
export const encodeStoredNode = (node: StoredNode): string => {
  const s = node.status
  return JSON.stringify({
    schema_version: s.schemaVersion,
    cluster_id: s.clusterId,
    node: { id: s.node.id, address: s.node.address, role: roleNames[s.node.role] },
    incarnation_id: s.incarnationId,
    admin_address: s.adminAddress,
    build_version: s.buildVersion,
    started_at_unix_ms: s.startedAtUnixMs,
    reported_at_unix_ms: s.reportedAtUnixMs,
    heartbeat_seq: s.heartbeatSeq,
    health: s.health,
    ready: s.ready,
    metrics: Object.fromEntries(NODE_METRIC_FIELDS.map((k) => [snake(k), s.metrics[k]])),
    labels: Object.fromEntries(s.labels),
    observed_at_unix_ms: node.updatedAtUnixMs
  })
}

/** Reads a stored value; never throws. Left carries what was wrong. */
export const decodeStoredNode = (text: string): Either.Either<StoredNode, string> =>
  Either.flatMap(
    Either.mapLeft(decodeTalonJson(text), (e) => ParseResult.TreeFormatter.formatErrorSync(e)),
    (j) => {
      const missing = NODE_METRIC_FIELDS.find((k) => j.metrics[snake(k)] === undefined)
      if (missing !== undefined) return Either.left(`metrics.${snake(missing)} is missing`)
      const status: NodeStatus = {
        schemaVersion: j.schema_version,
        clusterId: j.cluster_id,
        node: { id: j.node.id, address: j.node.address, role: j.node.role === "Worker" ? NodeRole.Worker : NodeRole.Coordinator },
        incarnationId: j.incarnation_id,
        adminAddress: j.admin_address,
        buildVersion: j.build_version,
        startedAtUnixMs: j.started_at_unix_ms,
        reportedAtUnixMs: j.reported_at_unix_ms,
        heartbeatSeq: j.heartbeat_seq,
        health: j.health,
        ready: j.ready,
        metrics: Object.fromEntries(NODE_METRIC_FIELDS.map((k) => [k, j.metrics[snake(k)]!])) as NodeMetricsSnapshot,
        labels: canonicalLabels(Object.entries(j.labels))
      }
      const problem = nodeStatusProblem(status)
      if (problem !== null) return Either.left(problem)
      return Either.right({ status, updatedAtUnixMs: j.observed_at_unix_ms ?? j.reported_at_unix_ms })
    }
  )

/** Placement targets: workers whose effective health is healthy and that say they are ready. */
export const placementNodes = (nodes: ReadonlyArray<StoredNode>, nowUnixMs: number, unhealthyAfterMs: number): Array<NodeInfo> =>
  nodes
    .filter((n) => n.status.node.role === NodeRole.Worker && n.status.ready && effectiveHealth(n, nowUnixMs, unhealthyAfterMs) === "healthy")
    .map((n) => n.status.node)
