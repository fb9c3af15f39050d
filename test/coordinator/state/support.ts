/** Shared helpers for the state-store tests: status builders, store handles, polling. */
import { randomUUID } from "node:crypto"
import { Context, Effect, Exit, Layer, Scope, TestClock, TestContext } from "effect"
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
  /** Whether the store's time is a TestClock (moved by `passTime`) rather than real time. */
  readonly testClock: boolean
  /** The store's time now (ms). */
  readonly now: () => Promise<number>
  /** Lets `ms` of the store's time pass: TestClock.adjust, or a real wait. */
  readonly passTime: (ms: number) => Promise<void>
  /** `effect` on the store's clock (what a process beating into the store runs with). */
  readonly clocked: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

export const openStore = async (layer: Layer.Layer<ClusterStateStore, unknown>): Promise<StoreHandle> => {
  const scope = Effect.runSync(Scope.make())
  const ctx = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  const store = Context.get(ctx, ClusterStateStore)
  return {
    store,
    run: (effect) => Effect.runPromise(Scope.extend(effect, scope)),
    close: () => Effect.runPromise(Scope.close(scope, Exit.void)),
    testClock: false,
    now: async () => Date.now(),
    passTime: (ms) => new Promise((r) => setTimeout(r, ms)),
    clocked: (effect) => effect
  }
}

/**
 * A store whose leases and health run on a TestClock of its own: every effect its methods
 * return, and the fibers its layer forks, read that clock, so a test moves lease time on
 * with `passTime` instead of waiting for it.
 */
export const openStoreOnTestClock = async (layer: Layer.Layer<ClusterStateStore, unknown>): Promise<StoreHandle> => {
  const scope = Effect.runSync(Scope.make())
  // TestContext's type names only the test services; the TestClock is in its context all the same.
  const testServices = await Effect.runPromise(Layer.buildWithScope(TestContext.TestContext, scope))
  const clock = Context.unsafeGet(testServices as Context.Context<unknown>, TestClock.TestClock)
  const clocked = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.withClock(effect, clock)
  const ctx = await Effect.runPromise(clocked(Layer.buildWithScope(layer, scope)))
  const raw = Context.get(ctx, ClusterStateStore)
  const store = Object.fromEntries(
    Object.entries(raw).map(([k, v]) => [
      k,
      typeof v === "function"
        ? (...args: Array<unknown>) => {
            const out = (v as (...a: Array<unknown>) => unknown)(...args)
            return Effect.isEffect(out) ? clocked(out) : out
          }
        : v
    ])
  ) as unknown as ClusterStateStoreShape
  return {
    store,
    run: (effect) => Effect.runPromise(clocked(Scope.extend(effect, scope))),
    close: () => Effect.runPromise(Scope.close(scope, Exit.void)),
    testClock: true,
    now: () => Effect.runPromise(clock.currentTimeMillis),
    passTime: (ms) => Effect.runPromise(clock.adjust(ms)),
    clocked
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
