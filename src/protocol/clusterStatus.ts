/**
 * The coordinator's own cluster view as its admin API serves it (`GET /api/v1/cluster`, JSON,
 * beside Talon's summary fields: see adminApi.ts). Schemas, so the OpenAPI document and the
 * served body come from one declaration.
 */
import { Schema } from "effect"

const Health = Schema.Literal("healthy", "degraded", "unhealthy", "unknown")

export const ClusterMember = Schema.Struct({
  id: Schema.String,
  address: Schema.String,
  role: Schema.Literal("worker", "coordinator"),
  /** Random per node start; `legacy-register` for a node that only sends Register/Heartbeat. */
  incarnationId: Schema.String,
  heartbeatSeq: Schema.NonNegativeInt,
  health: Health,
  zone: Schema.NullOr(Schema.String),
  /** When the node's incarnation started (the Unix epoch for a legacy registration). */
  registeredAt: Schema.String,
  lastHeartbeatAt: Schema.String,
  /** How long ago the last heartbeat (or registration) arrived, in ms. */
  lastHeartbeatAgeMs: Schema.NonNegativeInt,
  blockCount: Schema.NonNegativeInt,
  /** Bytes the node holds in its cache, and its cache capacity, as its last status said (absent from older coordinators). */
  residentBytes: Schema.optional(Schema.NonNegativeInt),
  capacityBytes: Schema.optional(Schema.NonNegativeInt),
  /** What the node last said about its readiness (placement needs ready and healthy). */
  ready: Schema.Boolean
})
export type ClusterMember = typeof ClusterMember.Type

export const ClusterStatus = Schema.Struct({
  clusterId: Schema.String,
  /** False while the state store cannot be followed (then /readyz is 503). */
  ready: Schema.Boolean,
  notReadyReason: Schema.optional(Schema.String),
  stateBackend: Schema.Literal("memory", "etcd"),
  /** The content epoch's low 53 bits, as the wire carries it. */
  epoch: Schema.NonNegativeInt,
  /** The full 64-bit content epoch, hex. */
  epochHex: Schema.String,
  controlAddress: Schema.String,
  heartbeatIntervalMs: Schema.NonNegativeInt,
  /** A node silent this long leaves the membership. */
  livenessWindowMs: Schema.NonNegativeInt,
  /** Healthy, ready workers: what MembershipQuery lists and placement runs over. */
  members: Schema.Array(ClusterMember),
  /** Live coordinators of the cluster (each keeps its own leased record); never in placement. */
  coordinators: Schema.Array(ClusterMember),
  /** Workers with a live record that placement leaves out (not ready, or not healthy), and why in `ready`/`health`. */
  outOfPlacement: Schema.Array(ClusterMember)
})
export type ClusterStatus = typeof ClusterStatus.Type
