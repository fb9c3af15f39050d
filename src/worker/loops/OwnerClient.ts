/**
 * A serving loop's side of `--loops N`: its reference to the owner actor (over the IPC channel,
 * src/actor/Remote.ts), the loop's own actor the owner tells (revokes, readiness), and the
 * loop's MissPath: a version lookup or a fill is an ask of the owner, which alone talks to the
 * origin and writes the cache dir, so two loops can never fill one page twice.
 */
import { Cause, Effect, Exit, type Scope } from "effect"
import { Actor, type ActorError, type ActorRef, type Channel, Remote, RemoteUnavailable } from "../../actor/index.js"
import type { ObjectStat } from "../../backend/BackendStore.js"
import type { BlockId, ObjectId } from "../../core/ids.js"
import type { DataErrorCode } from "../../protocol/dataError.js"
import { ReadFailed } from "../errors.js"
import type { ReadyState } from "../membership/Readiness.js"
import type { WorkerStats } from "../metrics.js"
import type { MissPathShape } from "../miss/MissPath.js"
import { objectKey, VersionCache } from "../miss/VersionCache.js"
import type { LeaseStore } from "./LeaseStore.js"
import {
  type CounterDelta,
  Fill,
  Hello,
  LOOP_ACTOR,
  LOOP_COUNTERS,
  LoopMessage,
  LoopReadFailed,
  OWNER_ACTOR,
  OwnerMessage,
  type Readiness,
  Stat
} from "./protocol.js"

export type OwnerRef = ActorRef<OwnerMessage, ActorError>

/** The owner's actor across `channel`. */
export const ownerRef = (channel: Channel.Channel): Effect.Effect<OwnerRef, never, Scope.Scope> =>
  Remote.ref(channel, { name: OWNER_ACTOR, protocol: OwnerMessage })

/** Sends without waiting (releases, usage, counters): a loop whose owner is gone is shut down anyway. */
export const tellOwner = (owner: OwnerRef, msg: OwnerMessage): void => void Effect.runFork(Effect.ignore(owner.tell(msg)))

export const applyReadiness = (state: ReadyState, r: Readiness): void => {
  state.unsafeUpdate({ ready: r.ready, registered: r.registered, detail: r.detail })
}

/**
 * Serves the loop's actor on `channel` (the owner's revokes and readiness changes) and returns
 * the owner's readiness as of the loop's `Hello` (a later `Ready` that overtook it wins).
 */
export const serveLoop = (
  channel: Channel.Channel,
  owner: OwnerRef,
  loop: number,
  store: LeaseStore,
  state: ReadyState
): Effect.Effect<void, ActorError, Scope.Scope> =>
  Effect.gen(function* () {
    let told = false
    const actor = yield* Actor.make({
      name: LOOP_ACTOR,
      protocol: LoopMessage,
      capacity: 4096,
      initial: undefined,
      handlers: {
        Revoke: (s, m) => Effect.sync(() => [store.revoke(m.leases), s] as const),
        Ready: (s, m) =>
          Effect.sync(() => {
            told = true
            return [applyReadiness(state, m.readiness), s] as const
          })
      }
    })
    yield* Remote.serve(actor, channel)
    const first = yield* owner.ask(new Hello({ loop }))
    if (!told) applyReadiness(state, first)
  })

const ownerGone = (detail: string) =>
  new ReadFailed({ reason: `the worker's index owner (its primary process) is gone (${detail}); the loop is shutting down` })

const toReadFailed = (e: LoopReadFailed | ActorError): ReadFailed => {
  if (e instanceof LoopReadFailed) {
    return new ReadFailed({
      reason: e.reason,
      ...(e.staleVersion === true ? { staleVersion: true } : {}),
      ...(e.code !== undefined && e.code >= 0 && e.code <= 9 ? { code: e.code as DataErrorCode } : {})
    })
  }
  if (e instanceof RemoteUnavailable) return ownerGone(e.reason)
  return new ReadFailed({ reason: e.message })
}

/** Runs an ask of the owner as a Promise (the read path's currency) that rejects with a ReadFailed. */
const askOwner = <A>(ask: Effect.Effect<A, LoopReadFailed | ActorError>): Promise<A> =>
  Effect.runPromiseExit(Effect.mapError(ask, toReadFailed)).then((exit) =>
    Exit.isSuccess(exit) ? exit.value : Promise.reject(Cause.squash(exit.cause))
  )

/**
 * The loop's MissPath: versions are the owner's (cached here exactly as long
 * as the owner caches them), fills are the owner's, and a fill's answer is a
 * grant of leases on the units it made present.
 */
export const makeLoopMissPath = (owner: OwnerRef, loop: number, store: LeaseStore, ttlMs: number): MissPathShape => {
  const versions = new VersionCache(ttlMs)
  const inflight = new Map<string, Promise<ObjectStat>>()

  const ask = (object: ObjectId, key: string, fresh: boolean): Promise<ObjectStat> =>
    askOwner(owner.ask(new Stat({ loop, object, fresh }))).then((r) => {
      const st: ObjectStat = { size: r.size, version: r.version }
      versions.seed(key, st, r.expiresAt)
      return st
    })

  const stat = (object: ObjectId, key: string): ObjectStat | Promise<ObjectStat> => {
    const fresh = versions.fresh(key)
    if (fresh !== undefined) return fresh
    const pending = inflight.get(key)
    if (pending !== undefined) return pending
    const p = ask(object, key, false).finally(() => inflight.delete(key))
    inflight.set(key, p)
    return p
  }

  const fill = (id: BlockId, blockLength: number, objectSize: number, first: number, end: number): Promise<void> =>
    askOwner(owner.ask(new Fill({ loop, block: id, blockLength, objectSize, first, end }))).then(
      (grant) => (grant === null ? undefined : store.admit(grant)),
      (e: unknown) => {
        if (e instanceof ReadFailed && e.staleVersion === true) versions.invalidate(objectKey(id.object), id.version)
        throw e
      }
    )

  return { versions, stat, revalidate: (object, key) => ask(object, key, true), fill }
}

/** Deltas of the loop-side counters since the previous call (undefined when nothing moved). */
export const counterDeltas = (stats: WorkerStats): (() => CounterDelta | undefined) => {
  const last: Record<string, number> = { tableHits: 0, tableBytes: 0 }
  for (const k of LOOP_COUNTERS) last[k] = 0
  let delta: Record<string, number> | undefined
  const diff = (k: string, v: number) => {
    if (v !== last[k]) {
      ;(delta ??= {})[k] = v - last[k]!
      last[k] = v
    }
  }
  return () => {
    delta = undefined
    for (const k of LOOP_COUNTERS) diff(k, stats[k])
    diff("tableHits", stats.offloaded?.[0] ?? 0)
    diff("tableBytes", stats.offloaded?.[1] ?? 0)
    return delta
  }
}
