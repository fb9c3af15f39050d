/**
 * `ClusterStateStore`: the shared, authoritative view of the cluster (ADR
 * 0001 §4) that active-active coordinators serve every control operation
 * from. One leased record per node; writes follow Talon's ordering rule, so
 * two coordinators relaying heartbeats out of order cannot move a record
 * backwards. Layers: `ClusterStateStore.Memory` (one process; what `talon up`
 * uses) and `ClusterStateStore.Etcd` (etcd v3, shared by many coordinators).
 */
import { Clock, Context, Effect, Layer, type Scope, type Stream } from "effect"
import type { ConfigError } from "effect/ConfigError"
import type { NodeInfo } from "../../core/ids.js"
import { nodeStatusProblem, type NodeHealth, type NodeStatus } from "../../protocol/status.js"
import type { StatusProof } from "../../protocol/statusProof.js"
import { resolveStateStoreSettings, type StateStoreSettings } from "./config.js"
import { membershipEpoch } from "./epoch.js"
import { InvalidRecord, type StateStoreError, type StoreBackend } from "./errors.js"
import { effectiveHealth, placementNodes, type Disposition, type StoredNode } from "./record.js"

export interface WriteResult {
  readonly disposition: Disposition
  /** Opaque backend revision after the write was judged; compare for equality only. */
  readonly revision: string
}

export interface RemoveResult {
  readonly disposition: "applied" | "stale" | "not-found"
  readonly revision: string
}

export interface NodeView extends StoredNode {
  /** Reported health, or `unhealthy` once silent for longer than unhealthy-after. */
  readonly health: NodeHealth
}

export interface ClusterSnapshot {
  readonly clusterId: string
  /** Every live record, by node id. */
  readonly nodes: ReadonlyArray<NodeView>
  readonly revision: string
  readonly observedAtUnixMs: number
  /** Healthy, ready workers: what clients place blocks on. */
  readonly placement: ReadonlyArray<NodeInfo>
  /** Talon's content-derived epoch of `placement`. */
  readonly epoch: bigint
}

export type NodeEvent =
  | { readonly kind: "upserted"; readonly clusterId: string; readonly nodeId: string; readonly node: StoredNode; readonly revision: string }
  | { readonly kind: "removed"; readonly clusterId: string; readonly nodeId: string; readonly revision: string }

export interface PutOptions {
  /**
   * What the status proved about the cluster token (see token.ts): checked by
   * the coordinator that received it; its own records are `verified`. Default `missing`.
   */
  readonly proof?: StatusProof | undefined
}

export interface BackendHealth {
  readonly backend: StoreBackend
  readonly revision: string
  readonly checkedAtUnixMs: number
}

export interface ClusterStateStoreShape {
  readonly backend: StoreBackend
  readonly settings: StateStoreSettings
  /** Insert or refresh a node's record (and its lease) unless Talon's ordering rule says it is stale or a duplicate. */
  readonly put: (status: NodeStatus, options?: PutOptions) => Effect.Effect<WriteResult, StateStoreError>
  /** Remove a node's record, only if `incarnationId` still holds it. */
  readonly remove: (clusterId: string, nodeId: string, incarnationId: string) => Effect.Effect<RemoveResult, StateStoreError>
  /** A linearizable view of one cluster. */
  readonly snapshot: (clusterId: string) => Effect.Effect<ClusterSnapshot, StateStoreError>
  /** Changes strictly after `afterRevision` (default: from now), in commit order. */
  readonly watch: (clusterId: string, afterRevision?: string) => Stream.Stream<NodeEvent, StateStoreError>
  /** Succeeds only when the backend can serve authoritative reads now (backs /readyz). */
  readonly checkReady: Effect.Effect<BackendHealth, StateStoreError>
}

/** What a backend provides; the shared rules (validation, health, epoch) are layered on by `makeStore`. */
export interface StoreCore {
  readonly backend: StoreBackend
  readonly put: (
    status: NodeStatus,
    nowUnixMs: number,
    options: PutOptions
  ) => Effect.Effect<WriteResult, StateStoreError>
  readonly remove: ClusterStateStoreShape["remove"]
  readonly list: (clusterId: string) => Effect.Effect<{ readonly nodes: ReadonlyArray<StoredNode>; readonly revision: string }, StateStoreError>
  readonly watch: ClusterStateStoreShape["watch"]
  readonly checkReady: Effect.Effect<string, StateStoreError>
}

export const makeStore = (core: StoreCore, settings: StateStoreSettings): ClusterStateStoreShape => ({
  backend: core.backend,
  settings,
  put: (status, options = {}) =>
    Effect.gen(function* () {
      const problem = nodeStatusProblem(status)
      if (problem !== null) return yield* new InvalidRecord({ reason: problem })
      return yield* core.put(status, yield* Clock.currentTimeMillis, options)
    }),
  remove: core.remove,
  snapshot: (clusterId) =>
    Effect.gen(function* () {
      const { nodes, revision } = yield* core.list(clusterId)
      const now = yield* Clock.currentTimeMillis
      const views = [...nodes]
        .sort((a, b) => (a.status.node.id < b.status.node.id ? -1 : a.status.node.id > b.status.node.id ? 1 : 0))
        .map((n) => ({ ...n, health: effectiveHealth(n, now, settings.unhealthyAfterMs) }))
      const placement = placementNodes(nodes, now, settings.unhealthyAfterMs)
      return { clusterId, nodes: views, revision, observedAtUnixMs: now, placement, epoch: yield* membershipEpoch(placement) }
    }),
  watch: core.watch,
  checkReady: Effect.gen(function* () {
    const revision = yield* core.checkReady
    return { backend: core.backend, revision, checkedAtUnixMs: yield* Clock.currentTimeMillis }
  })
})

export class ClusterStateStore extends Context.Tag("talon/ClusterStateStore")<ClusterStateStore, ClusterStateStoreShape>() {
  /** In-process store; settings from explicit options > TALON_STATE_* > defaults. */
  static Memory = (options: Partial<StateStoreSettings> = {}): Layer.Layer<ClusterStateStore, ConfigError> =>
    Layer.scoped(
      ClusterStateStore,
      Effect.flatMap(resolveStateStoreSettings({ ...options, backend: "memory" }), (s) =>
        Effect.flatMap(
          Effect.promise(() => import("./memory.js")),
          (m) => m.makeMemoryStore(s)
        )
      )
    )

  /** etcd v3 store; endpoints from options or TALON_ETCD_ENDPOINTS. The client closes with the layer. */
  static Etcd = (options: Partial<StateStoreSettings> = {}): Layer.Layer<ClusterStateStore, ConfigError> =>
    Layer.scoped(
      ClusterStateStore,
      Effect.flatMap(resolveStateStoreSettings({ ...options, backend: "etcd" }), (s) =>
        Effect.flatMap(
          Effect.promise(() => import("./etcd.js")),
          (m) => m.makeEtcdStore(s)
        )
      )
    )

  /** The backend the settings name (TALON_STATE_BACKEND, or etcd when endpoints are given). */
  static Auto = (options: Partial<StateStoreSettings> = {}): Layer.Layer<ClusterStateStore, ConfigError> =>
    Layer.unwrapEffect(
      Effect.map(resolveStateStoreSettings(options), (s) =>
        s.backend === "etcd" ? ClusterStateStore.Etcd(s) : ClusterStateStore.Memory(s)
      )
    )
}

export type StoreMaker = (settings: StateStoreSettings) => Effect.Effect<ClusterStateStoreShape, never, Scope.Scope>
