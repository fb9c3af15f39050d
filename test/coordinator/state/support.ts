/** Shared helpers for the state-store tests: status builders, store handles, polling. */
import { randomUUID } from "node:crypto"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { NodeRole } from "../../../src/core/index.js"
import { emptyMetrics, type NodeStatus } from "../../../src/protocol/index.js"
import { ClusterStateStore, type ClusterStateStoreShape } from "../../../src/coordinator/state/ClusterStateStore.js"
import type { StateStoreSettings } from "../../../src/coordinator/state/config.js"
import { eventuallyAsync } from "../../support/eventually.js"

/**
 * Short timings so leases expire within seconds (etcd rounds TTLs up to whole seconds, minimum
 * ~2 s), with unhealthy-after well above a put's latency on a loaded 2-core machine: at 800 ms
 * a record went unhealthy between a test's last put and its snapshot.
 */
export const FAST: Partial<StateStoreSettings> = {
  heartbeatIntervalMs: 400,
  unhealthyAfterMs: 2_500,
  leaseTtlMs: 5_000,
  requestTimeoutMs: 5_000,
  clusterToken: undefined
}

export const newClusterId = (): string => `c-${randomUUID().slice(0, 8)}`

export const worker = (
  clusterId: string,
  id: string,
  incarnationId: string,
  heartbeatSeq: number,
  extra: Partial<NodeStatus> = {}
): NodeStatus => ({
  schemaVersion: 1,
  clusterId,
  node: { id, address: `127.0.0.1:${7000 + (id.length % 100)}`, role: NodeRole.Worker },
  incarnationId,
  adminAddress: null,
  buildVersion: "test",
  startedAtUnixMs: 1_000,
  reportedAtUnixMs: 1_000 + heartbeatSeq,
  heartbeatSeq,
  health: "healthy",
  ready: true,
  metrics: emptyMetrics,
  labels: [],
  ...extra
})

export interface StoreHandle {
  readonly store: ClusterStateStoreShape
  /** Runs an effect that may use a scope tied to this handle (watches, membership views). */
  readonly run: <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) => Promise<A>
  readonly close: () => Promise<void>
}

export const openStore = async (layer: Layer.Layer<ClusterStateStore, unknown>): Promise<StoreHandle> => {
  const scope = Effect.runSync(Scope.make())
  const ctx = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  const store = Context.get(ctx, ClusterStateStore)
  return {
    store,
    run: (effect) => Effect.runPromise(Scope.extend(effect, scope)),
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

/** Reads until `done` holds (see eventually.ts), up to `timeoutMs`; returns the value or throws with the last one. */
export const pollUntil = <A>(read: () => Promise<A>, done: (a: A) => boolean, timeoutMs = 30_000, what = "condition"): Promise<A> =>
  eventuallyAsync(
    async () => {
      const last = await read()
      if (!done(last)) throw new Error(`last value: ${JSON.stringify(last, (_, v) => (typeof v === "bigint" ? v.toString() : v))}`)
      return last
    },
    { what, within: timeoutMs, every: "50 millis" }
  )

/** Runs an effect, returning its failure (or "succeeded"). */
export const failureOf = <A, E>(effect: Effect.Effect<A, E>): Promise<E | "succeeded"> =>
  Effect.runPromise(Effect.match(effect, { onFailure: (e) => e, onSuccess: () => "succeeded" as const }))
