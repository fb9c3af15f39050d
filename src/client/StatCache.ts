/**
 * Each object's size and version, cached for `statTtlMs`, and where a stat comes
 * from while no coordinator answers.
 *
 * The coordinators are asked first. When none answers, a worker of the last
 * membership is asked (Talon's workers answer StatObject on the data port, from
 * the origin through their version cache, so the answer is as fresh as a
 * coordinator's); only when no worker answers either is the last stat used, for
 * at most `staleLimitMs`. Past half its TTL a cached stat is refreshed in the
 * background by a fiber of the client's scope.
 */
import { Deferred, Effect, FiberSet } from "effect"
import type { BlockId, ObjectId } from "../core/ids.js"
import { objectIdToPath, objectIdToUri } from "../core/objectId.js"
import type { ControlMessage } from "../protocol/index.js"
import { ClientConfig } from "./ClientConfig.js"
import { Coordinators } from "./Coordinators.js"
import { CoordinatorUnavailable, ObjectNotFound, type TalonClientError } from "./errors.js"
import { MembershipCache } from "./MembershipCache.js"
import { runShared } from "./shared.js"
import { Workers } from "./Workers.js"

export interface ObjectInfo {
  readonly object: ObjectId
  readonly size: number
  readonly version: string
}

export interface StatCounters {
  /** Stats a worker answered because no coordinator did. */
  readonly workerStats: number
  /** Stats answered from the last known one because neither a coordinator nor any worker did. */
  readonly staleStats: number
}

const MAX_STAT_ENTRIES = 10_000

export class StatCache extends Effect.Service<StatCache>()("talon/client/StatCache", {
  scoped: Effect.gen(function* () {
    const options = yield* ClientConfig
    const coordinators = yield* Coordinators
    const membership = yield* MembershipCache
    const workers = yield* Workers
    const run = yield* FiberSet.makeRuntime<never>()
    // Read synchronously on the read path (freshStat), so captured once rather than asked per call.
    const clock = yield* Effect.clock
    const now = (): number => clock.unsafeCurrentTimeMillis()
    const cache = new Map<string, { info: ObjectInfo; at: number }>()
    const inFlight = new Map<string, Deferred.Deferred<ObjectInfo, TalonClientError>>()
    let workerStats = 0
    let staleStats = 0

    const remember = (key: string, info: ObjectInfo): void => {
      // Bounded: a client reading millions of objects must not keep every stat forever.
      if (cache.size >= MAX_STAT_ENTRIES) {
        const at = now()
        for (const [k, v] of cache) if (at - v.at >= options.staleLimitMs) cache.delete(k)
        if (cache.size >= MAX_STAT_ENTRIES) cache.clear()
      }
      cache.set(key, { info, at: now() })
    }

    const statReply = (object: ObjectId, key: string, reply: ControlMessage, what: string): Effect.Effect<ObjectInfo, TalonClientError> => {
      if (reply._tag === "ObjectStat") {
        const info = { object, size: reply.size, version: reply.version }
        remember(key, info)
        return Effect.succeed(info)
      }
      // The coordinator says "not found: …"; a worker passes on the origin's "… does not exist at the origin".
      if (reply._tag === "Ack" && !reply.ok && /not found|does not exist/i.test(reply.detail ?? "")) {
        cache.delete(key)
        return Effect.fail(new ObjectNotFound({ object: objectIdToUri(object), detail: reply.detail ?? "" }))
      }
      return Effect.fail(coordinators.unexpected(what, reply))
    }

    const lastStat = (key: string, cause: CoordinatorUnavailable): Effect.Effect<ObjectInfo, TalonClientError> => {
      const hit = cache.get(key)
      if (hit !== undefined && now() - hit.at < options.staleLimitMs) {
        staleStats++
        return Effect.succeed(hit.info)
      }
      return Effect.fail(
        new CoordinatorUnavailable({
          coordinator: cause.coordinator,
          detail: `${cause.detail}; no worker of the last membership answered the stat either, and no stat of the object is known from the last ${options.staleLimitMs} ms`,
          cause: cause.cause
        })
      )
    }

    /** Workers of the last membership in a stable per-object order, then the last stat. */
    const statElsewhere = (object: ObjectId, key: string, cause: CoordinatorUnavailable): Effect.Effect<ObjectInfo, TalonClientError> => {
      const m = membership.current()
      const probe: BlockId = { object, offset: 0, blockSize: options.blockSize, version: "" }
      const ids = m === undefined ? [] : m.placement.rank(probe, Math.min(m.addresses.size, 3))
      const tryWorker = (i: number): Effect.Effect<ObjectInfo, TalonClientError> => {
        if (i >= ids.length) return lastStat(key, cause)
        const address = m!.addresses.get(ids[i]!) ?? ids[i]!
        return workers
          .controlChannel(address)
          .request({ _tag: "StatObject", object })
          .pipe(
            Effect.mapError((e) => new CoordinatorUnavailable({ coordinator: address, detail: e.message, cause: e })),
            Effect.flatMap((reply) => statReply(object, key, reply, `StatObject to worker ${address}`)),
            Effect.tap(() => Effect.sync(() => workerStats++)),
            Effect.catchTag("CoordinatorUnavailable", () => tryWorker(i + 1))
          )
      }
      return tryWorker(0)
    }

    const askStat = (object: ObjectId, key: string): Effect.Effect<ObjectInfo, TalonClientError> => {
      // While no coordinator answers, stats go straight to the workers (a hung coordinator would
      // otherwise cost every stat a timeout); background membership refreshes find out when one is back.
      const skip = !coordinators.reachable()
      if (skip) membership.kick()
      const fromCoordinator: Effect.Effect<ObjectInfo, TalonClientError> = skip
        ? Effect.fail(coordinators.unavailable("not answering (retried in the background)"))
        : Effect.flatMap(coordinators.ask({ _tag: "StatObject", object }), (reply) => statReply(object, key, reply, "StatObject"))
      return Effect.catchTag(fromCoordinator, "CoordinatorUnavailable", (e) =>
        // Only a coordinator that did not answer is worked around; a refusal it sent stands.
        e.cause !== undefined || skip ? statElsewhere(object, key, e) : Effect.fail(e)
      )
    }

    /** One StatObject per object in flight, shared by its callers so an interrupted one cannot fail the others. */
    const fetchStat = (object: ObjectId, key: string): Deferred.Deferred<ObjectInfo, TalonClientError> =>
      inFlight.get(key) ??
      runShared(run, askStat(object, key), {
        started: (pending) => inFlight.set(key, pending),
        ended: () => inFlight.delete(key),
        closed: () => new CoordinatorUnavailable({ coordinator: options.coordinator, detail: "the client was closed" })
      })

    /** The cached stat while trusted, without a runtime call; past half its TTL one refresh starts in the background. */
    const freshStat = (object: ObjectId): ObjectInfo | undefined => {
      const key = objectIdToPath(object)
      const hit = cache.get(key)
      if (hit === undefined) return undefined
      const age = now() - hit.at
      if (age >= options.statTtlMs) return undefined
      if (age >= options.statTtlMs / 2 && !inFlight.has(key)) fetchStat(object, key)
      return hit.info
    }

    const stat = (object: ObjectId): Effect.Effect<ObjectInfo, TalonClientError> =>
      Effect.suspend(() => {
        const hit = freshStat(object)
        return hit !== undefined ? Effect.succeed(hit) : Deferred.await(fetchStat(object, objectIdToPath(object)))
      })

    /** The stat asked again past any cached answer (a worker said the cached version is gone at the origin). */
    const restat = (object: ObjectId): Effect.Effect<ObjectInfo, TalonClientError> =>
      Effect.suspend(() => {
        const key = objectIdToPath(object)
        cache.delete(key)
        return Deferred.await(fetchStat(object, key))
      })

    /** Drops the cached stat of an object this client just wrote or deleted, so its next read asks again. */
    const forget = (object: ObjectId): void => {
      cache.delete(objectIdToPath(object))
    }

    return {
      stat,
      restat,
      forget,
      freshStat,
      counters: (): StatCounters => ({ workerStats, staleStats })
    }
  })
}) {}
