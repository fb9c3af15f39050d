/** The coordinator's cluster view as its admin API serves it (`GET /api/v1/cluster`, JSON). */
export interface ClusterMember {
  readonly id: string
  readonly address: string
  readonly role: "worker" | "coordinator"
  /** Random per node start; `legacy-register` for a node that only sends Register/Heartbeat. */
  readonly incarnationId: string
  readonly heartbeatSeq: number
  readonly health: "healthy" | "degraded" | "unhealthy" | "unknown"
  readonly zone: string | null
  /** When the node's incarnation started (the Unix epoch for a legacy registration). */
  readonly registeredAt: string
  readonly lastHeartbeatAt: string
  /** How long ago the last heartbeat (or registration) arrived, in ms. */
  readonly lastHeartbeatAgeMs: number
  readonly blockCount: number
  /** Bytes the node holds in its cache, and its cache capacity, as its last status said (absent from older coordinators). */
  readonly residentBytes?: number
  readonly capacityBytes?: number
  /** What the node last said about its readiness (placement needs ready and healthy). */
  readonly ready: boolean
}

export interface ClusterStatus {
  readonly clusterId: string
  /** False while the state store cannot be followed (then /readyz is 503). */
  readonly ready: boolean
  readonly notReadyReason?: string
  readonly stateBackend: "memory" | "etcd"
  /** The content epoch's low 53 bits, as the wire carries it. */
  readonly epoch: number
  /** The full 64-bit content epoch, hex. */
  readonly epochHex: string
  readonly controlAddress: string
  readonly heartbeatIntervalMs: number
  /** A node silent this long leaves the membership. */
  readonly livenessWindowMs: number
  /** Healthy, ready workers: what MembershipQuery lists and placement runs over. */
  readonly members: ReadonlyArray<ClusterMember>
  /** Live coordinators of the cluster (each keeps its own leased record); never in placement. */
  readonly coordinators: ReadonlyArray<ClusterMember>
  /** Workers with a live record that placement leaves out (not ready, or not healthy), and why in `ready`/`health`. */
  readonly outOfPlacement: ReadonlyArray<ClusterMember>
}
