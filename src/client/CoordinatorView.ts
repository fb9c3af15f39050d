/**
 * What a client knows from the coordinator — the worker membership and each
 * object's size and version — and how it keeps reading while the coordinator
 * does not answer (it is never on the data path, so its outage must not be).
 *
 * Membership follows Talon's last-good rule: a refresh that fails keeps the last
 * membership, and so does a refresh answered with an empty list while a non-empty
 * one is held (a restarted coordinator knows no worker until each re-registers on
 * its next heartbeat). Either way the last membership is used for at most
 * `staleLimitMs` past its last confirmation, refreshes keep being tried in the
 * background, and the first failure and the recovery are logged.
 *
 * Stats: the coordinator is asked first. When it does not answer, a worker of
 * the last membership is asked (Talon's workers answer StatObject on the data
 * port, from the origin through their version cache, so the answer is as fresh
 * as the coordinator's); only when no worker answers either is the last stat
 * used, again for at most `staleLimitMs`. Counters for all of this are in
 * `stats()`.
 */
import { Deferred, Effect, FiberId } from "effect"
import { NodeRole, type BlockId, type NodeInfo, type ObjectId } from "../core/ids.js"
import { objectIdToUri } from "../core/objectId.js"
import { Maglev } from "../placement/index.js"
import type { ControlMessage } from "../protocol/index.js"
import { ControlChannel, type ControlError } from "../transport/ControlChannel.js"
import type { TalonClientOptions } from "./config.js"
import { CoordinatorUnavailable, ObjectNotFound, type TalonClientError } from "./errors.js"
import type { WorkerPool } from "./WorkerPool.js"

export interface ObjectInfo {
  readonly object: ObjectId
  readonly size: number
  readonly version: string
}

export interface Membership {
  readonly nodes: ReadonlyArray<NodeInfo>
  readonly placement: Maglev
  /** Worker id → dialable address. */
  readonly addresses: ReadonlyMap<string, string>
  /** When the coordinator last confirmed this membership. */
  readonly fetchedAt: number
  /** Replica order per block key, for this membership only. */
  readonly ranks: Map<string, ReadonlyArray<string>>
}

/** How the client's view of the control plane is doing, for logs, metrics and tests. */
export interface ControlPlaneStats {
  readonly coordinatorReachable: boolean
  /** Milliseconds since the coordinator first failed to answer, while it does not. */
  readonly coordinatorDownForMs: number | undefined
  /** Age of the membership in use (since the coordinator last confirmed it). */
  readonly membershipAgeMs: number | undefined
  readonly membershipWorkers: number
  /** Requests to the coordinator that got no answer. */
  readonly coordinatorFailures: number
  /** Reads placed with a membership past its TTL because no refresh succeeded. */
  readonly staleMembershipUses: number
  /** Empty membership lists not taken over a held non-empty one. */
  readonly emptyMembershipsIgnored: number
  /** Stats a worker answered because the coordinator did not. */
  readonly workerStats: number
  /** Stats answered from the last known one because neither coordinator nor any worker did. */
  readonly staleStats: number
}

const MAX_STAT_ENTRIES = 10_000

export class CoordinatorView {
  private membership: Membership | undefined
  private refreshing: Deferred.Deferred<Membership, TalonClientError> | undefined
  private lastAttemptAt = 0
  private downSince: number | undefined
  private warnedEmpty = false
  private readonly retryMs: number
  private readonly statCache = new Map<string, { info: ObjectInfo; at: number }>()
  private readonly statsInFlight = new Map<string, Deferred.Deferred<ObjectInfo, TalonClientError>>()
  private readonly workerChannels = new Map<string, ControlChannel>()
  private readonly counters = {
    coordinatorFailures: 0,
    staleMembershipUses: 0,
    emptyMembershipsIgnored: 0,
    workerStats: 0,
    staleStats: 0
  }

  constructor(
    private readonly options: TalonClientOptions,
    private readonly control: ControlChannel,
    private readonly pool: WorkerPool
  ) {
    // While the coordinator is down, retry it about once a second (sooner for short TTLs), not per read.
    this.retryMs = Math.max(20, Math.min(1000, options.membershipTtlMs / 2))
  }

  stats(): ControlPlaneStats {
    const now = Date.now()
    const m = this.membership
    return {
      coordinatorReachable: this.downSince === undefined,
      coordinatorDownForMs: this.downSince === undefined ? undefined : now - this.downSince,
      membershipAgeMs: m === undefined ? undefined : now - m.fetchedAt,
      membershipWorkers: m?.addresses.size ?? 0,
      ...this.counters
    }
  }

  /** One request to the coordinator, tracking whether it answers. */
  ask(message: ControlMessage): Effect.Effect<ControlMessage, CoordinatorUnavailable> {
    return Effect.suspend(() => {
      this.lastAttemptAt = Date.now()
      return this.control.request(message)
    }).pipe(
      Effect.tapBoth({ onFailure: (e) => this.markDown(e), onSuccess: () => this.markUp() }),
      Effect.mapError((e) => new CoordinatorUnavailable({ coordinator: this.options.coordinator, detail: e.message, cause: e }))
    )
  }

  unexpected(what: string, reply: ControlMessage): CoordinatorUnavailable {
    return new CoordinatorUnavailable({
      coordinator: this.options.coordinator,
      detail: `unexpected reply to ${what}: ${reply._tag === "Ack" ? `Ack(${reply.ok}${reply.detail === null ? "" : `, ${reply.detail}`})` : reply._tag}`
    })
  }

  private markDown(e: ControlError): Effect.Effect<void> {
    return Effect.suspend(() => {
      this.counters.coordinatorFailures++
      if (this.downSince !== undefined) return Effect.void
      this.downSince = Date.now()
      const m = this.membership
      const kept =
        m === undefined
          ? "no membership is known yet, so reads cannot start until it answers"
          : `reads go on with the last membership (${m.addresses.size} workers, confirmed ${Date.now() - m.fetchedAt} ms ago) for up to ${this.options.staleLimitMs} ms; stats come from workers`
      return Effect.logWarning(`coordinator ${this.options.coordinator} does not answer (${e.message}): ${kept}`)
    })
  }

  private markUp(): Effect.Effect<void> {
    return Effect.suspend(() => {
      const since = this.downSince
      if (since === undefined) return Effect.void
      this.downSince = undefined
      return Effect.logInfo(`coordinator ${this.options.coordinator} answers again after ${Date.now() - since} ms`)
    })
  }

  // ---- membership ----

  private readonly fetchMembership: Effect.Effect<Membership, TalonClientError> = Effect.gen(this, function* () {
    const reply = yield* this.ask({ _tag: "MembershipQuery" })
    if (reply._tag !== "MembershipList") return yield* Effect.fail(this.unexpected("MembershipQuery", reply))
    const previous = this.membership
    const workers = reply.nodes.filter((n) => n.role === NodeRole.Worker)
    const now = Date.now()
    if (workers.length === 0 && previous !== undefined && previous.addresses.size > 0 && now - previous.fetchedAt < this.options.staleLimitMs) {
      this.counters.emptyMembershipsIgnored++
      if (!this.warnedEmpty) {
        this.warnedEmpty = true
        yield* Effect.logWarning(
          `coordinator ${this.options.coordinator} lists no workers (restarted, or every worker left): keeping the last ${previous.addresses.size} workers, confirmed ${now - previous.fetchedAt} ms ago, for up to ${this.options.staleLimitMs} ms while they re-register`
        )
      }
      return previous
    }
    this.warnedEmpty = false
    const next: Membership = {
      nodes: reply.nodes,
      placement: Maglev.build(workers),
      addresses: new Map(workers.map((n) => [n.id, n.address])),
      fetchedAt: now,
      ranks: new Map()
    }
    // Connections to workers that left are closed, so a dead worker's sockets do not linger.
    if (previous !== undefined) {
      const live = new Set(reply.nodes.map((n) => n.address))
      for (const n of previous.nodes) {
        if (live.has(n.address)) continue
        this.pool.forget(n.address)
        const channel = this.workerChannels.get(n.address)
        this.workerChannels.delete(n.address)
        if (channel !== undefined) Effect.runSync(channel.close)
      }
    }
    this.membership = next
    return next
  })

  /** One refresh at a time, detached from its callers so an interrupted caller cannot fail the others. */
  private startRefresh(): Deferred.Deferred<Membership, TalonClientError> {
    let pending = this.refreshing
    if (pending === undefined) {
      const created = Deferred.unsafeMake<Membership, TalonClientError>(FiberId.none)
      pending = created
      this.refreshing = created
      Effect.runFork(
        this.fetchMembership.pipe(
          Effect.exit,
          Effect.flatMap((exit) => {
            this.refreshing = undefined
            return Deferred.done(created, exit)
          })
        )
      )
    }
    return pending
  }

  /**
   * The membership to place a read with, without a runtime call: fresh within its TTL; past
   * half of it one refresh starts in the background; past the TTL (no refresh succeeded) it is
   * still used up to `staleLimitMs`. `undefined` when a caller must wait for the coordinator.
   */
  fresh(): Membership | undefined {
    const m = this.membership
    if (m === undefined) return undefined
    const now = Date.now()
    const age = now - m.fetchedAt
    if (age < this.options.membershipTtlMs / 2) return m
    if (this.refreshing === undefined && now - this.lastAttemptAt >= this.retryMs) this.startRefresh()
    if (age < this.options.membershipTtlMs) return m
    if (age < this.options.staleLimitMs) {
      this.counters.staleMembershipUses++
      return m
    }
    return undefined
  }

  /**
   * The membership, fetched when none is usable or `refresh` asks for it; when the
   * coordinator does not answer, the last one while within `staleLimitMs` (unless
   * `strict`: a caller asking for the coordinator's own answer gets its failure).
   */
  get(refresh: boolean, strict = false): Effect.Effect<Membership, TalonClientError> {
    return Effect.suspend(() => {
      const fresh = refresh ? undefined : this.fresh()
      if (fresh !== undefined) return Effect.succeed(fresh)
      const cached = this.membership
      const next = Deferred.await(this.startRefresh())
      if (cached === undefined || strict) return next
      return Effect.catchTag(next, "CoordinatorUnavailable", (e) =>
        Date.now() - cached.fetchedAt < this.options.staleLimitMs
          ? Effect.succeed(cached)
          : Effect.fail(
              new CoordinatorUnavailable({
                coordinator: this.options.coordinator,
                detail: `${e.detail}; the last membership is older than the ${this.options.staleLimitMs} ms it may be used without the coordinator`,
                cause: e.cause
              })
            )
      )
    })
  }

  // ---- stat ----

  private remember(key: string, info: ObjectInfo): void {
    // Bounded: a client reading millions of objects must not keep every stat forever.
    if (this.statCache.size >= MAX_STAT_ENTRIES) {
      const now = Date.now()
      for (const [k, v] of this.statCache) if (now - v.at >= this.options.staleLimitMs) this.statCache.delete(k)
      if (this.statCache.size >= MAX_STAT_ENTRIES) this.statCache.clear()
    }
    this.statCache.set(key, { info, at: Date.now() })
  }

  private askStat(object: ObjectId, key: string): Effect.Effect<ObjectInfo, TalonClientError> {
    // While the coordinator is known down, stats go straight to the workers (a hung coordinator would
    // otherwise cost every stat a timeout); background membership refreshes find out when it is back.
    const skip = this.downSince !== undefined
    if (skip && this.refreshing === undefined && Date.now() - this.lastAttemptAt >= this.retryMs) this.startRefresh()
    const fromCoordinator: Effect.Effect<ObjectInfo, TalonClientError> = skip
      ? Effect.fail(
          new CoordinatorUnavailable({
            coordinator: this.options.coordinator,
            detail: "not answering (retried in the background)",
            cause: undefined
          })
        )
      : Effect.flatMap(this.ask({ _tag: "StatObject", object }), (reply) => this.statReply(object, key, reply, "StatObject"))
    return Effect.catchTag(fromCoordinator, "CoordinatorUnavailable", (e) =>
      // Only a coordinator that did not answer is worked around; a refusal it sent stands.
      e.cause !== undefined || skip ? this.statElsewhere(object, key, e) : Effect.fail(e)
    )
  }

  private statReply(object: ObjectId, key: string, reply: ControlMessage, what: string): Effect.Effect<ObjectInfo, TalonClientError> {
    if (reply._tag === "ObjectStat") {
      const info = { object, size: reply.size, version: reply.version }
      this.remember(key, info)
      return Effect.succeed(info)
    }
    // The coordinator says "not found: …"; a worker passes on the origin's "… does not exist at the origin".
    if (reply._tag === "Ack" && !reply.ok && /not found|does not exist/i.test(reply.detail ?? "")) {
      this.statCache.delete(key)
      return Effect.fail(new ObjectNotFound({ object: objectIdToUri(object), detail: reply.detail ?? "" }))
    }
    return Effect.fail(this.unexpected(what, reply))
  }

  /** Workers of the last membership in a stable per-object order, then the last stat. */
  private statElsewhere(object: ObjectId, key: string, cause: CoordinatorUnavailable): Effect.Effect<ObjectInfo, TalonClientError> {
    const m = this.membership
    const probe: BlockId = { object, offset: 0, blockSize: this.options.blockSize, version: "" }
    const ids = m === undefined ? [] : m.placement.rank(probe, Math.min(m.addresses.size, 3))
    const tryWorker = (i: number): Effect.Effect<ObjectInfo, TalonClientError> => {
      if (i >= ids.length) return this.lastStat(key, cause)
      const address = m!.addresses.get(ids[i]!) ?? ids[i]!
      return this.workerChannel(address)
        .request({ _tag: "StatObject", object })
        .pipe(
          Effect.mapError((e) => new CoordinatorUnavailable({ coordinator: address, detail: e.message, cause: e })),
          Effect.flatMap((reply) => this.statReply(object, key, reply, `StatObject to worker ${address}`)),
          Effect.tap(() => Effect.sync(() => this.counters.workerStats++)),
          Effect.catchTag("CoordinatorUnavailable", () => tryWorker(i + 1))
        )
    }
    return tryWorker(0)
  }

  private lastStat(key: string, cause: CoordinatorUnavailable): Effect.Effect<ObjectInfo, TalonClientError> {
    const hit = this.statCache.get(key)
    if (hit !== undefined && Date.now() - hit.at < this.options.staleLimitMs) {
      this.counters.staleStats++
      return Effect.succeed(hit.info)
    }
    return Effect.fail(
      new CoordinatorUnavailable({
        coordinator: this.options.coordinator,
        detail: `${cause.detail}; no worker of the last membership answered the stat either, and no stat of the object is known from the last ${this.options.staleLimitMs} ms`,
        cause: cause.cause
      })
    )
  }

  private workerChannel(address: string): ControlChannel {
    let channel = this.workerChannels.get(address)
    if (channel === undefined) {
      channel = ControlChannel.unsafeMake(address, {
        requestTimeout: `${this.options.requestTimeoutMs} millis`,
        connectTimeout: `${this.options.connectTimeoutMs} millis`,
        retries: 0
      })
      this.workerChannels.set(address, channel)
    }
    return channel
  }

  /** One StatObject per object in flight, detached from its callers so an interrupted one cannot fail the others. */
  private fetchStat(object: ObjectId, key: string): Deferred.Deferred<ObjectInfo, TalonClientError> {
    let pending = this.statsInFlight.get(key)
    if (pending === undefined) {
      const created = Deferred.unsafeMake<ObjectInfo, TalonClientError>(FiberId.none)
      pending = created
      this.statsInFlight.set(key, created)
      Effect.runFork(
        this.askStat(object, key).pipe(
          Effect.exit,
          Effect.flatMap((exit) => {
            this.statsInFlight.delete(key)
            return Deferred.done(created, exit)
          })
        )
      )
    }
    return pending
  }

  /** The cached stat while trusted; past half its TTL one refresh starts in the background. */
  freshStat(object: ObjectId, key: string): ObjectInfo | undefined {
    const hit = this.statCache.get(key)
    if (hit === undefined) return undefined
    const age = Date.now() - hit.at
    if (age >= this.options.statTtlMs) return undefined
    if (age >= this.options.statTtlMs / 2 && !this.statsInFlight.has(key)) this.fetchStat(object, key)
    return hit.info
  }

  stat(object: ObjectId, key: string): Effect.Effect<ObjectInfo, TalonClientError> {
    return Effect.suspend(() => {
      const hit = this.freshStat(object, key)
      return hit !== undefined ? Effect.succeed(hit) : Deferred.await(this.fetchStat(object, key))
    })
  }

  /** The stat asked again past any cached answer (a worker said the cached version is gone at the origin). */
  restat(object: ObjectId, key: string): Effect.Effect<ObjectInfo, TalonClientError> {
    return Effect.suspend(() => {
      this.statCache.delete(key)
      return Deferred.await(this.fetchStat(object, key))
    })
  }

  close(): void {
    for (const channel of this.workerChannels.values()) Effect.runSync(channel.close)
    this.workerChannels.clear()
  }
}
