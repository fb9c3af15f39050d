/** Failures of the cluster state store; each message says what to do about it. */
import { Data } from "effect"

export type StoreBackend = "memory" | "etcd"

/** The backend cannot serve authoritative requests now (down, unreachable, partitioned). Retryable. */
export class StoreUnavailable extends Data.TaggedError("StoreUnavailable")<{
  readonly backend: StoreBackend
  readonly operation: string
  readonly detail: string
}> {
  override get message(): string {
    return `${this.backend} state store unavailable during ${this.operation}: ${this.detail}; membership cannot be served authoritatively until it answers again (check TALON_ETCD_ENDPOINTS and that etcd is running)`
  }
}

/** A backend call took longer than the configured request timeout. Retryable. */
export class StoreTimeout extends Data.TaggedError("StoreTimeout")<{
  readonly backend: StoreBackend
  readonly operation: string
  readonly timeoutMs: number
}> {
  override get message(): string {
    return `${this.backend} state store did not answer ${this.operation} within ${this.timeoutMs} ms (TALON_STATE_REQUEST_TIMEOUT_MS); is the store reachable?`
  }
}

/** The backend refused our credentials or permissions. Not fixed by retrying. */
export class StoreAuthFailed extends Data.TaggedError("StoreAuthFailed")<{
  readonly backend: StoreBackend
  readonly operation: string
  readonly detail: string
}> {
  override get message(): string {
    return `${this.backend} state store refused ${this.operation}: ${this.detail}; check TALON_ETCD_USERNAME / TALON_ETCD_PASSWORD and the user's role on the key prefix`
  }
}

/** A status the store refuses to keep (Talon's NodeStatus validation). */
export class InvalidRecord extends Data.TaggedError("InvalidRecord")<{ readonly reason: string }> {
  override get message(): string {
    return `invalid node status: ${this.reason}`
  }
}

/** A stored value this build cannot read (written by something else, or a newer schema). */
export class CorruptRecord extends Data.TaggedError("CorruptRecord")<{ readonly key: string; readonly reason: string }> {
  override get message(): string {
    return `stored node record ${this.key} cannot be read: ${this.reason}; delete the key or upgrade this coordinator`
  }
}

/** A watch asked for history the backend has already compacted away: take a new snapshot. */
export class WatchCompacted extends Data.TaggedError("WatchCompacted")<{
  readonly requested: string
  readonly oldest: string
}> {
  override get message(): string {
    return `watch revision ${this.requested} was compacted (oldest available ${this.oldest}); take a fresh snapshot and watch from its revision`
  }
}

/** The status carried no proof of the cluster token, or a proof made with another token (or for other bytes). */
export class TokenRejected extends Data.TaggedError("TokenRejected")<{ readonly nodeId: string; readonly presented: boolean }> {
  override get message(): string {
    return this.presented
      ? `node ${this.nodeId}: its status's cluster-token proof (label talon.auth) does not match this cluster's TALON_CLUSTER_TOKEN; set the same TALON_CLUSTER_TOKEN on the node as on the coordinators`
      : `node ${this.nodeId} sent no cluster-token proof; this cluster requires TALON_CLUSTER_TOKEN on every registration and status: set it on the node (the same value as the coordinators')`
  }
}

/** Another incarnation holds the node id and the write did not prove it knows the cluster token. */
export class TakeoverRefused extends Data.TaggedError("TakeoverRefused")<{
  readonly nodeId: string
  readonly heldBy: string
  readonly incoming: string
}> {
  override get message(): string {
    return `node id ${this.nodeId} is held by live incarnation ${this.heldBy}; incarnation ${this.incoming} may replace it only with a status proving the cluster token (set TALON_CLUSTER_TOKEN on the node), or after the record's lease expires`
  }
}

export type StateStoreError =
  | StoreUnavailable
  | StoreTimeout
  | StoreAuthFailed
  | InvalidRecord
  | CorruptRecord
  | WatchCompacted
  | TokenRejected
  | TakeoverRefused
