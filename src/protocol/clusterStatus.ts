/** The coordinator's cluster view as its admin API serves it (`GET /api/v1/cluster`, JSON). */
export interface ClusterMember {
  readonly id: string
  readonly address: string
  readonly role: "worker" | "coordinator"
  readonly registeredAt: string
  readonly lastHeartbeatAt: string
  /** How long ago the last heartbeat (or registration) arrived, in ms. */
  readonly lastHeartbeatAgeMs: number
  readonly blockCount: number
}

export interface ClusterStatus {
  readonly epoch: number
  readonly controlAddress: string
  readonly heartbeatIntervalMs: number
  readonly livenessWindowMs: number
  readonly members: ReadonlyArray<ClusterMember>
}
