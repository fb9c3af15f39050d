/**
 * The miss path: what the origin says an object's version is (HEAD, cached for
 * the version TTL) and filling missing pages or blocks from it.
 *
 * - Single-flight per page (or whole block): a page being fetched is awaited,
 *   never fetched twice; one actor per block in flight owns its pending pages
 *   (FillScheduler.ts). A run of adjacent missing pages is range GETs of at
 *   most `originFetchSize` bytes each, run concurrently.
 * - At most `originConcurrency` fetches run at once, `originConcurrencyPerObject` of one
 *   object, and `readAheadConcurrency` of them read-ahead (Effect semaphores; read-ahead takes
 *   its share first, so it never waits in the global queue ahead of more than its share).
 * - Bytes stream from the origin into a staging buffer per page; each complete
 *   page is hashed (XXH64) in one pass, written once, fdatasynced, renamed into
 *   place with its checksum (and its waiters released) (fetchRun.ts).
 * - Fills run as fibers of the worker's scope, so shutdown interrupts them;
 *   the serve loop only awaits the promise, it never blocks other connections.
 * - Versions found on disk at start-up are not trusted as current: the object may have
 *   changed while the worker was down, so the first read of it asks the origin, and the
 *   blocks on disk are served again only when the origin still names their version.
 */
import { Context, Effect, Exit, FiberSet, Layer, Stream } from "effect"
import { BackendStore, type BackendError, type ObjectStat, type RangeReader } from "../../backend/BackendStore.js"
import { fillAddon } from "../../backend/nativeReceive.js"
import type { PushSink } from "../../backend/rangePush.js"
import type { BlockId, ObjectId } from "../../core/ids.js"
import { WorkerConfig } from "../config.js"
import { describeUnknown, fromBackend, ReadFailed } from "../errors.js"
import { WorkerMetrics } from "../metrics.js"
import { BlockStore } from "../store/BlockStore.js"
import type { RangeFetch, RangeSink } from "./fetchRun.js"
import { traced } from "../../transport/tracing.js"
import { tracesLayer } from "../../config/traces.js"
import { makeFillScheduler } from "./FillScheduler.js"
import { objectKey, VersionCache } from "./VersionCache.js"

export interface MissPathShape {
  readonly versions: VersionCache
  /** The object's current stat: the cached one while fresh (synchronously), else a HEAD. Rejects with ReadFailed. */
  readonly stat: (object: ObjectId, key: string) => ObjectStat | Promise<ObjectStat>
  /**
   * The origin's stat now (a HEAD, shared with one already in flight), whatever is cached: a
   * read pinned to a version the cache does not hold checks it against the origin this way.
   */
  readonly revalidate: (object: ObjectId, key: string) => Promise<ObjectStat>
  /**
   * Makes units `[first, end)` of block `id` present (pages, or unit 0 of a
   * whole block). Resolves when every one of them has been committed at least
   * once (it may since have been evicted under pressure). Rejects with ReadFailed.
   */
  readonly fill: (id: BlockId, blockLength: number, objectSize: number, first: number, end: number) => Promise<void>
  /** `fill` on behalf of read-ahead: under the read-ahead share of origin fetches. */
  readonly fillAhead?: (id: BlockId, blockLength: number, objectSize: number, first: number, end: number) => Promise<void>
}

const BACKEND_TAGS: ReadonlySet<unknown> = new Set(["BackendNotFound", "BackendRequestError", "BackendRangeError"])
const isBackendError = (e: unknown): e is BackendError =>
  typeof e === "object" && e !== null && BACKEND_TAGS.has((e as { _tag?: unknown })._tag)

/** A semaphore per object with fetches in flight or waiting; dropped when none is. */
interface ObjectGate {
  readonly semaphore: Effect.Semaphore
  users: number
}

export class MissPath extends Context.Tag("talon/worker/MissPath")<MissPath, MissPathShape>() {
  static readonly layer = Layer.scoped(
    MissPath,
    Effect.gen(function* () {
      const cfg = yield* WorkerConfig
      const backend = yield* BackendStore
      const store = yield* BlockStore
      const stats = yield* WorkerMetrics
      const semaphore = yield* Effect.makeSemaphore(cfg.originConcurrency)
      const aheadShare = yield* Effect.makeSemaphore(cfg.readAheadConcurrency)
      const gates = new Map<string, ObjectGate>()
      const objectGate = (key: string) =>
        Effect.acquireRelease(
          Effect.sync(() => {
            let gate = gates.get(key)
            if (gate === undefined) {
              gate = { semaphore: Effect.unsafeMakeSemaphore(cfg.originConcurrencyPerObject), users: 0 }
              gates.set(key, gate)
            }
            gate.users++
            return gate
          }),
          (gate) =>
            Effect.sync(() => {
              if (--gate.users === 0) gates.delete(key)
            })
        )
      const addon = cfg.originReceive === "native" ? fillAddon() : undefined
      if (typeof addon === "string") yield* Effect.logWarning(`--origin-receive native: ${addon}; fills receive into reused buffers instead`)
      const nativeReceive = addon !== undefined && typeof addon !== "string"
      const run = yield* FiberSet.makeRuntimePromise<never>()
      const versions = new VersionCache(cfg.versionTtlMs)

      const toPromise = <A>(effect: Effect.Effect<A, ReadFailed>): Promise<A> =>
        run(Effect.exit(effect)).then(
          (exit) => {
            if (Exit.isSuccess(exit)) return exit.value
            const failure = exit.cause._tag === "Fail" ? exit.cause.error : undefined
            throw failure ?? new ReadFailed({ reason: `internal error: ${String(exit.cause)}` })
          },
          (e) => {
            throw new ReadFailed({ reason: `worker is shutting down (${describeUnknown(e)})` })
          }
        )

      const head = (object: ObjectId) => () =>
        toPromise(
          Effect.suspend(() => {
            stats.originStats++
            return backend.stat(object)
          }).pipe(Effect.mapError((e) => fromBackend(object, e)), traced("talon.worker.origin.head", { "talon.object": object.objectPath }))
        )

      const stat = (object: ObjectId, key: string): ObjectStat | Promise<ObjectStat> =>
        versions.fresh(key) ?? versions.resolve(key, head(object))

      /** Read-ahead share, then the object's permit, then the worker's: a fetch holds a global permit only once it may start. */
      const gated = <A, E>(object: ObjectId, ahead: boolean, fetch: Effect.Effect<A, E>): Effect.Effect<A, E> =>
        Effect.scoped(
          Effect.flatMap(objectGate(objectKey(object)), (gate) => {
            const held = gate.semaphore.withPermits(1)(semaphore.withPermits(1)(fetch))
            return ahead ? aheadShare.withPermits(1)(held) : held
          })
        )

      const toReadFailed = (object: ObjectId) => (e: unknown): ReadFailed =>
        e instanceof ReadFailed ? e : isBackendError(e) ? fromBackend(object, e) : new ReadFailed({ reason: describeUnknown(e) })

      /**
       * The body into the sink with plain callbacks, one promise per batch of chunks rather than
       * a fiber step per chunk: the fill's hot loop. Closing the reader (on interruption too)
       * releases the origin connection.
       */
      const pump = (reader: RangeReader, sink: RangeSink) => async (): Promise<void> => {
        try {
          for (;;) {
            const batch = await reader.next()
            if (batch === undefined) return
            for (let i = 0; i < batch.length; i++) {
              const chunk = batch[i]!
              stats.originBytes += chunk.length
              const wait = sink(chunk)
              if (wait !== undefined) await wait
            }
          }
        } finally {
          reader.close()
        }
      }

      const body = (object: ObjectId, version: string, offset: number, length: number, sink: RangeSink): Effect.Effect<void, ReadFailed> => {
        const pushRange = cfg.originReceive !== "stream" ? backend.pushRange : undefined
        if (pushRange !== undefined) {
          // Chunks straight from the origin socket's reused buffer: copied by the sink, never held.
          const chunks = (chunk: Uint8Array) => {
            stats.originBytes += chunk.length
            return sink(chunk)
          }
          const lent = nativeReceive ? sink.direct : undefined
          // Or, natively, the body received straight into the sink's staging buffers.
          const counted: PushSink =
            lent === undefined
              ? chunks
              : Object.assign(chunks, {
                  direct: {
                    target: lent.target,
                    filled: (n: number, sum: bigint | undefined) => {
                      stats.originBytes += n
                      stats.originNativeBytes += n
                      return lent.filled(n, sum)
                    }
                  }
                })
          return Effect.tryPromise({
            try: (signal) => pushRange(object, offset, length, { version }, counted, signal),
            catch: toReadFailed(object)
          })
        }
        const openRange = backend.openRange
        if (openRange === undefined) {
          return backend.getRange(object, offset, length, { version }).pipe(
            Stream.mapError((e) => fromBackend(object, e)),
            Stream.runForEach((chunk) =>
              Effect.tryPromise({
                try: async () => {
                  stats.originBytes += chunk.length
                  await sink(chunk)
                },
                catch: toReadFailed(object)
              })
            )
          )
        }
        return Effect.tryPromise({
          try: (signal) => {
            const reader = openRange(object, offset, length, { version })
            signal.addEventListener("abort", () => reader.close(), { once: true })
            return pump(reader, sink)()
          },
          catch: toReadFailed(object)
        })
      }

      const fetchRange: RangeFetch = (object, version, offset, length, sink, ahead) =>
        toPromise(
          gated(
            object,
            ahead,
            Effect.suspend(() => {
              const started = performance.now()
              stats.originFetches++
              return body(object, version, offset, length, sink).pipe(
                traced("talon.worker.origin.fetch", { "talon.object": object.objectPath, "talon.offset": offset, "talon.length": length }),
                Effect.tap(() => Effect.sync(() => stats.originLatency.observe((performance.now() - started) / 1000))),
                Effect.tapError(() => Effect.sync(() => stats.originFetchFailures++)),
                Effect.ensuring(Effect.sync(() => stats.originFetchesSettled++))
              )
            })
          )
        )
      const fetchUnits = cfg.pageSize > 0 ? Math.max(1, Math.ceil(cfg.originFetchSize / cfg.pageSize)) : 1
      const scheduler = yield* makeFillScheduler({ store, pageSize: cfg.pageSize, fetchRange, fetchUnits })
      const fillAs = (ahead: boolean) => (id: BlockId, blockLength: number, objectSize: number, first: number, end: number) =>
        toPromise(
          scheduler.fill(id, blockLength, objectSize, first, end, ahead).pipe(
            Effect.mapError((e) => (e instanceof ReadFailed ? e : new ReadFailed({ reason: describeUnknown(e) }))),
            Effect.tapError((failure) =>
              Effect.sync(() => {
                if (failure.staleVersion === true) versions.invalidate(objectKey(id.object), id.version)
              })
            )
          )
        )

      const revalidate = (object: ObjectId, key: string): Promise<ObjectStat> => versions.resolve(key, head(object))

      return { versions, stat, revalidate, fill: fillAs(false), fillAhead: fillAs(true) } satisfies MissPathShape
    })
  ).pipe(Layer.provide(tracesLayer("talon-worker")))
}
