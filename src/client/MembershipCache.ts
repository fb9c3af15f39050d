/**
 * The worker membership as the coordinators list it, and how the client keeps
 * placing reads while no coordinator answers (a coordinator is never on the data
 * path, so its outage must not be).
 *
 * Talon's last-good rule: a refresh that fails keeps the last membership, and so
 * does a refresh answered with an empty list while a non-empty one is held (a
 * restarted coordinator knows no worker until each re-registers on its next
 * heartbeat). Either way the last membership is used for at most `staleLimitMs`
 * past its last confirmation.
 *
 * The first membership is fetched when a read first needs it. From then on a
 * background fiber in the client's scope refreshes it past half its TTL (about
 * once a second while no coordinator answers), so reads find a fresh one without
 * waiting; closing the client's scope stops it.
 */
import { Deferred, Duration, Effect, FiberSet } from "effect"
import { NodeRole, type NodeInfo } from "../core/ids.js"
import { Maglev } from "../placement/index.js"
import { ClientConfig } from "./ClientConfig.js"
import { Coordinators } from "./Coordinators.js"
import { CoordinatorUnavailable, type TalonClientError } from "./errors.js"
import { runShared } from "./shared.js"
import { Workers } from "./Workers.js"

export interface WorkerMembership {
  readonly nodes: ReadonlyArray<NodeInfo>
  readonly placement: Maglev
  /** Worker id → dialable address. */
  readonly addresses: ReadonlyMap<string, string>
  /** When a coordinator last confirmed this membership. */
  readonly fetchedAt: number
  /** Replica order per block key, for this membership only. */
  readonly ranks: Map<string, ReadonlyArray<string>>
  /** Worker id → the zone it reports (asked for only by a client with a `zone`, see zones.ts). */
  readonly zones: ReadonlyMap<string, string | null>
}

/** How long a coordinator that did not answer MembershipQueryV2 is asked the old query instead. */
const V2_COOLDOWN_MS = 60_000

export interface MembershipCounters {
  /** Age of the membership in use (since a coordinator last confirmed it). */
  readonly membershipAgeMs: number | undefined
  readonly membershipWorkers: number
  /** Reads placed with a membership past its TTL because no refresh succeeded. */
  readonly staleMembershipUses: number
  /** Empty membership lists not taken over a held non-empty one. */
  readonly emptyMembershipsIgnored: number
}

export class MembershipCache extends Effect.Service<MembershipCache>()("talon/client/MembershipCache", {
  scoped: Effect.gen(function* () {
    const options = yield* ClientConfig
    const coordinators = yield* Coordinators
    const workers = yield* Workers
    // Refreshes outlive the caller that started them (an interrupted read must not fail the
    // others waiting on it), but not the client: they run in its scope.
    const run = yield* FiberSet.makeRuntime<never>()
    // Read synchronously on the read path (fresh), so captured once rather than asked per call.
    const clock = yield* Effect.clock
    const now = (): number => clock.unsafeCurrentTimeMillis()
    // While no coordinator answers, retry about once a second (sooner for short TTLs), not per read.
    const retryMs = Math.max(20, Math.min(1000, options.membershipTtlMs / 2))
    let membership: WorkerMembership | undefined
    let refreshing: Deferred.Deferred<WorkerMembership, TalonClientError> | undefined
    let lastRefreshAt = Number.NEGATIVE_INFINITY
    let warnedEmpty = false
    let staleMembershipUses = 0
    let emptyMembershipsIgnored = 0
    let v2RefusedAt: number | undefined

    // Zones ride Talon's schema-5 query; a coordinator that predates it (drops the connection or
    // answers something else) is asked the old one, and not asked V2 again for a while.
    const listing: Effect.Effect<{ nodes: ReadonlyArray<NodeInfo>; zones: ReadonlyMap<string, string | null> }, TalonClientError> =
      Effect.suspend(() => {
        const v1 = Effect.flatMap(coordinators.ask({ _tag: "MembershipQuery" }), (reply) =>
          reply._tag === "MembershipList"
            ? Effect.succeed({ nodes: reply.nodes, zones: new Map<string, string | null>() })
            : Effect.fail(coordinators.unexpected("MembershipQuery", reply))
        )
        if (options.zone === "" || (v2RefusedAt !== undefined && now() - v2RefusedAt < V2_COOLDOWN_MS)) return v1
        const v2 = Effect.flatMap(coordinators.ask({ _tag: "MembershipQueryV2" }, true), (reply) =>
          reply._tag === "MembershipListV2"
            ? Effect.succeed({ nodes: reply.nodes.map((n) => n.info), zones: new Map(reply.nodes.map((n) => [n.info.id, n.zone])) })
            : Effect.fail(coordinators.unexpected("MembershipQueryV2", reply))
        )
        return Effect.catchAll(v2, () =>
          Effect.tap(v1, () =>
            Effect.sync(() => {
              v2RefusedAt = now()
            })
          )
        )
      })

    const fetchMembership: Effect.Effect<WorkerMembership, TalonClientError> = Effect.gen(function* () {
      const reply = yield* listing
      const previous = membership
      const listed = reply.nodes.filter((n) => n.role === NodeRole.Worker)
      const at = now()
      if (listed.length === 0 && previous !== undefined && previous.addresses.size > 0 && at - previous.fetchedAt < options.staleLimitMs) {
        emptyMembershipsIgnored++
        if (!warnedEmpty) {
          warnedEmpty = true
          yield* Effect.logWarning(
            `coordinator ${coordinators.counters().coordinator} lists no workers (restarted, or every worker left): keeping the last ${previous.addresses.size} workers, confirmed ${at - previous.fetchedAt} ms ago, for up to ${options.staleLimitMs} ms while they re-register`
          )
        }
        return previous
      }
      warnedEmpty = false
      const next: WorkerMembership = {
        nodes: reply.nodes,
        placement: Maglev.build(listed),
        addresses: new Map(listed.map((n) => [n.id, n.address])),
        fetchedAt: at,
        ranks: new Map(),
        zones: reply.zones
      }
      if (previous !== undefined) {
        const live = new Set(reply.nodes.map((n) => n.address))
        for (const n of previous.nodes) if (!live.has(n.address)) yield* workers.forget(n.address)
      }
      membership = next
      return next
    })

    /** One refresh at a time, shared by every caller waiting for it. */
    const startRefresh = (): Deferred.Deferred<WorkerMembership, TalonClientError> =>
      refreshing ??
      runShared(run, fetchMembership, {
        started: (pending) => {
          refreshing = pending
          lastRefreshAt = now()
        },
        ended: () => (refreshing = undefined),
        closed: () => new CoordinatorUnavailable({ coordinator: options.coordinator, detail: "the client was closed" })
      })

    /**
     * A refresh is due past half the TTL, or at once while no coordinator answers; either way
     * at most once per retry interval (an ignored empty list leaves the membership's age as it was).
     */
    const due = (at: number): boolean => {
      if (membership === undefined || refreshing !== undefined || at - lastRefreshAt < retryMs) return false
      return !coordinators.reachable() || at - membership.fetchedAt >= options.membershipTtlMs / 2
    }

    /** While no coordinator answers: one refresh in the background when a retry is due, membership or not (a stat skipping the coordinators asks for this). */
    const kick = (): void => {
      if (refreshing === undefined && now() - lastRefreshAt >= retryMs) startRefresh()
    }

    /**
     * The membership to place a read with, without a runtime call: fresh within its TTL; past
     * the TTL (no refresh succeeded) still used up to `staleLimitMs`. `undefined` when a caller
     * must wait for a coordinator.
     */
    const fresh = (): WorkerMembership | undefined => {
      const m = membership
      if (m === undefined) return undefined
      const age = now() - m.fetchedAt
      if (age < options.membershipTtlMs) return m
      if (age < options.staleLimitMs) {
        staleMembershipUses++
        return m
      }
      return undefined
    }

    /**
     * The membership, fetched when none is usable or `refresh` asks for it; when no coordinator
     * answers, the last one while within `staleLimitMs` (unless `strict`: a caller asking for
     * the coordinators' own answer gets their failure).
     */
    const get = (refresh: boolean, strict = false): Effect.Effect<WorkerMembership, TalonClientError> =>
      Effect.suspend(() => {
        const usable = refresh ? undefined : fresh()
        if (usable !== undefined) return Effect.succeed(usable)
        const cached = membership
        const next = Deferred.await(startRefresh())
        if (cached === undefined || strict) return next
        return Effect.catchTag(next, "CoordinatorUnavailable", (e) =>
          now() - cached.fetchedAt < options.staleLimitMs
            ? Effect.succeed(cached)
            : Effect.fail(
                new CoordinatorUnavailable({
                  coordinator: e.coordinator,
                  detail: `${e.detail}; the last membership is older than the ${options.staleLimitMs} ms it may be used without a coordinator`,
                  cause: e.cause
                })
              )
        )
      })

    // The background refresh: a fiber of the client's scope, logging through the caller's logger.
    yield* Effect.suspend(() => (due(now()) ? Effect.ignore(Deferred.await(startRefresh())) : Effect.void)).pipe(
      Effect.zipRight(Effect.sleep(Duration.millis(retryMs))),
      Effect.forever,
      Effect.forkScoped
    )

    return {
      fresh,
      get,
      kick,
      /** The membership held right now, whatever its age. */
      current: (): WorkerMembership | undefined => membership,
      counters: (): MembershipCounters => {
        const m = membership
        return {
          membershipAgeMs: m === undefined ? undefined : now() - m.fetchedAt,
          membershipWorkers: m?.addresses.size ?? 0,
          staleMembershipUses,
          emptyMembershipsIgnored
        }
      }
    }
  })
}) {}
