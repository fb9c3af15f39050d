/**
 * Prewarming a dataset: every block of every object under a prefix is made resident on the
 * workers that own it, before a job reads it. The client lists the prefix (coordinator),
 * stats each object (its version places its blocks), ranks each block's owners as reads do
 * (Maglev over the membership, `replicas` of them) and sends each owner Talon's control
 * `Load` for its pieces of the block. The worker fills what is not resident and answers how
 * many bytes it fetched and how many it already held, so a second run costs ~no origin bytes
 * and an interrupted run resumes where it stopped.
 *
 * Loads are bounded across the cluster by `concurrency` (and by each worker). A worker that
 * cannot be reached is replaced once by the block's owner in a fresh membership; a Load that
 * still fails does not stop the others: the summary lists every failure with its reason.
 */
import { Clock, Effect, Either, Layer, Stream } from "effect"
import type { BlockId, ObjectId } from "../core/ids.js"
import { objectIdToUri } from "../core/objectId.js"
import { parseLoadAck } from "../protocol/loadAck.js"
import { defaultsOf } from "../config/Setting.js"
import { ClientConfig } from "./ClientConfig.js"
import type { TalonClientOptions } from "./config.js"
import type { TalonClientError } from "./errors.js"
import { MembershipCache } from "./MembershipCache.js"
import { PrefetchSchema, type PrefetchSettings } from "./prefetchConfig.js"
import { NothingToPrefetch, PrefetchTooLarge } from "./prefetchErrors.js"
import { parsePrefix, planLoads } from "./prefetchPlan.js"
import { clientWithParts, TalonClient } from "./TalonClient.js"
import { Workers } from "./Workers.js"

/** How far a prefetch has got; `bytes` counts every replica's copy. */
export interface PrefetchProgress {
  readonly objects: number
  readonly objectsDone: number
  readonly bytes: number
  readonly bytesDone: number
  /** Bytes workers filled from the origin for this prefetch. */
  readonly fetched: number
  /** Bytes workers already held. */
  readonly resident: number
  /** Loads that failed (their bytes count as done, not as fetched or resident). */
  readonly failed: number
  readonly elapsedMs: number
}

export interface PrefetchFailure {
  readonly object: string
  readonly offset: number
  readonly length: number
  /** The worker asked, or "" when the object could not be stat'ed. */
  readonly worker: string
  readonly reason: string
}

export interface PrefetchSummary extends PrefetchProgress {
  readonly prefix: string
  /** Bytes of the objects themselves (one copy). */
  readonly datasetBytes: number
  /** Owners warmed per block (the setting, at most the number of workers). */
  readonly replicas: number
  readonly workers: number
  /** The first failures, each with its reason (`failed` counts them all). */
  readonly failures: ReadonlyArray<PrefetchFailure>
  /** The listing came back at the coordinator's cap: objects past it were not seen. */
  readonly listingCapped: boolean
}

export interface PrefetchRequest extends Partial<Omit<PrefetchSettings, "admin">> {
  /** The cluster's total cache capacity; when given, a larger prefix is refused unless `force`. */
  readonly capacityBytes?: number | undefined
  /** Called after every Load (and every object that could not be stat'ed). */
  readonly onProgress?: (progress: PrefetchProgress) => void
}

export type PrefetchError = TalonClientError | PrefetchTooLarge | NothingToPrefetch

/** The most objects one ListObjects reply carries (Talon's bound; src/coordinator MAX_LIST_ENTRIES refuses more, an older coordinator may truncate there). */
export const LISTING_CAP = 10_000
const MAX_FAILURES_KEPT = 1000
/** Objects stat'ed ahead of the Loads (a stat is one coordinator round trip). */
const STAT_CONCURRENCY = 8
const DEFAULTS = defaultsOf(PrefetchSchema)

interface Task {
  readonly object: ObjectId
  readonly uri: string
  readonly offset: number
  readonly length: number
  readonly worker: string
  readonly address: string
  /** The block the piece is in, and the owner's place in its ranking (a retry asks whoever holds that place now). */
  readonly block: BlockId
  readonly rank: number
  /** The object's Loads still to finish. */
  readonly left: { n: number }
}

export class Prefetch extends Effect.Service<Prefetch>()("talon/client/Prefetch", {
  effect: Effect.gen(function* () {
    const client = yield* TalonClient
    const options = yield* ClientConfig
    const membership = yield* MembershipCache
    const workers = yield* Workers

    const prefetch = (prefix: string, request: PrefetchRequest = {}): Effect.Effect<PrefetchSummary, PrefetchError> =>
      Effect.gen(function* () {
        const settings = { ...DEFAULTS, ...definedOnly(request) }
        const listPrefix = yield* parsePrefix(prefix)
        const entries = yield* client.list(listPrefix)
        if (entries.length === 0) return yield* new NothingToPrefetch({ prefix })
        const listingCapped = entries.length >= LISTING_CAP
        if (listingCapped) {
          yield* Effect.logWarning(`the listing of ${prefix} holds ${LISTING_CAP} objects, the most one ListObjects reply carries: a coordinator that truncates there leaves the rest cold; prefetch narrower prefixes to be sure`)
        }
        const m = yield* membership.get(false)
        const replicas = Math.max(1, Math.min(settings.replicas, m.addresses.size))
        const datasetBytes = entries.reduce((n, e) => n + e.size, 0)
        if (request.capacityBytes !== undefined && !settings.force && datasetBytes * replicas > request.capacityBytes) {
          return yield* new PrefetchTooLarge({
            prefix,
            objects: entries.length,
            bytes: datasetBytes,
            replicas,
            capacityBytes: request.capacityBytes,
            workers: m.addresses.size
          })
        }

        const started = yield* Clock.currentTimeMillis
        const state = { objectsDone: 0, bytesDone: 0, fetched: 0, resident: 0, failed: 0 }
        const failures: Array<PrefetchFailure> = []
        const snapshot = (now: number): PrefetchProgress => ({
          objects: entries.length,
          bytes: datasetBytes * replicas,
          ...state,
          elapsedMs: now - started
        })
        const report = Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => request.onProgress?.(snapshot(now))))
        const fail = (f: PrefetchFailure) => {
          state.failed++
          if (failures.length < MAX_FAILURES_KEPT) failures.push(f)
        }

        /** One object's Loads, one per owner of each piece; an object that cannot be stat'ed is one failure. */
        const tasksOf = (entry: { readonly path: string; readonly size: number }): Effect.Effect<ReadonlyArray<Task>> =>
          Effect.gen(function* () {
            const stat = yield* Effect.either(client.stat(entry.path))
            if (Either.isLeft(stat)) {
              fail({ object: entry.path, offset: 0, length: entry.size, worker: "", reason: stat.left.message })
              state.objectsDone++
              state.bytesDone += entry.size * replicas
              yield* report
              return []
            }
            const info = stat.right
            const current = yield* Effect.orElseSucceed(membership.get(false), () => m)
            const uri = objectIdToUri(info.object)
            const pieces = planLoads(info.size, options.blockSize, settings.loadBytes)
            const left = { n: 0 }
            const tasks: Array<Task> = []
            for (const piece of pieces) {
              const block: BlockId = { object: info.object, offset: piece.blockOffset, blockSize: options.blockSize, version: info.version }
              current.placement.rank(block, replicas).forEach((worker, rank) => {
                const address = current.addresses.get(worker) ?? worker
                tasks.push({ object: info.object, uri, offset: piece.offset, length: piece.length, worker, address, block, rank, left })
              })
            }
            left.n = tasks.length
            // The listing's size and the stat's may differ (the object changed): progress follows the stat.
            state.bytesDone += (entry.size - info.size) * replicas
            if (tasks.length === 0) {
              state.objectsDone++
              yield* report
            }
            return tasks
          })

        const send = (t: Task) =>
          workers
            .controlChannel(t.address)
            .request({ _tag: "Load", object: t.object, offset: t.offset, len: t.length }, { timeout: `${settings.loadTimeoutMs} millis` })

        /**
         * A worker that cannot be reached may have left: with a fresh membership, the owner now in
         * its place is asked once (as a read would find it), unless it is the same worker.
         */
        const sendOrMoved = (t: Task) =>
          Effect.catchIf(
            send(t),
            (e) => e._tag === "ControlConnectError" || e._tag === "ControlConnectionLost",
            (e) =>
              Effect.flatMap(Effect.orElseSucceed(membership.get(true), () => undefined), (fresh) => {
                const worker = fresh?.placement.rank(t.block, replicas)[t.rank]
                if (fresh === undefined || worker === undefined || worker === t.worker) return Effect.fail(e)
                return send({ ...t, worker, address: fresh.addresses.get(worker) ?? worker })
              })
          )

        const load = (t: Task): Effect.Effect<void> =>
          sendOrMoved(t).pipe(
            Effect.either,
            Effect.flatMap((reply) => {
              const failure = (reason: string) => fail({ object: t.uri, offset: t.offset, length: t.length, worker: t.address, reason })
              if (Either.isLeft(reply)) failure(reply.left.message)
              else if (reply.right._tag !== "Ack") failure(`unexpected reply ${reply.right._tag} to Load`)
              else if (!reply.right.ok) failure(reply.right.detail ?? "the worker refused the Load without a reason")
              else {
                // A worker that does not count (another implementation) still loaded the range.
                const counts = parseLoadAck(reply.right.detail)
                if (counts !== undefined) {
                  state.fetched += counts.fetched
                  state.resident += counts.resident
                }
              }
              state.bytesDone += t.length
              if (--t.left.n === 0) state.objectsDone++
              return report
            })
          )

        yield* Stream.fromIterable(entries).pipe(
          Stream.mapEffect(tasksOf, { concurrency: STAT_CONCURRENCY }),
          Stream.flattenIterables,
          Stream.mapEffect(load, { concurrency: settings.concurrency, unordered: true }),
          Stream.runDrain
        )
        const now = yield* Clock.currentTimeMillis
        return {
          ...snapshot(now),
          prefix,
          datasetBytes,
          replicas,
          workers: m.addresses.size,
          failures,
          listingCapped
        } satisfies PrefetchSummary
      })

    return { prefetch }
  })
}) {
  /** Prefetch and the TalonClient it runs on, over one set of connections. */
  static readonly layer = (options: Partial<TalonClientOptions> = {}) =>
    Prefetch.Default.pipe(Layer.provideMerge(clientWithParts(options)))
}

const definedOnly = <T extends object>(o: T): Partial<T> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>
