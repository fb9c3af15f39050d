/**
 * The miss path: what the origin says an object's version is (HEAD, cached for
 * the version TTL) and filling missing pages or blocks from it.
 *
 * - Single-flight per page (or whole block): a page being fetched is awaited,
 *   never fetched twice. A run of adjacent missing pages is one range GET.
 * - At most `originConcurrency` fetches run at once (an Effect semaphore).
 * - Bytes stream from the origin into a temp file per page, hashed (XXH64) as
 *   they arrive; each page is fdatasynced, renamed into place with its
 *   checksum (and its waiters released) as soon as it is complete. A full
 *   disk makes the store evict and retry the write (DiskStore.writeTemp).
 * - Fills run as fibers of the worker's scope, so shutdown interrupts them;
 *   the serve loop only awaits the promise, it never blocks other connections.
 * - Versions found on disk at start-up are not trusted as current: the object may have
 *   changed while the worker was down, so the first read of it asks the origin, and the
 *   blocks on disk are served again only when the origin still names their version.
 */
import { Context, Effect, Exit, FiberSet, Layer, Stream } from "effect"
import { BackendStore, type ObjectStat } from "../../backend/BackendStore.js"
import type { BlockId, ObjectId } from "../../core/ids.js"
import { WorkerConfig } from "../config.js"
import { describeUnknown, fromBackend, ReadFailed } from "../errors.js"
import { WorkerMetrics } from "../metrics.js"
import { BlockStore } from "../store/BlockStore.js"
import type { DiskStore } from "../store/DiskStore.js"
import { newUnitHash, type UnitHash } from "../store/checksum.js"
import { blockKey } from "../store/layout.js"
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
          }).pipe(Effect.mapError((e) => fromBackend(object, e)))
        )

      const stat = (object: ObjectId, key: string): ObjectStat | Promise<ObjectStat> =>
        versions.fresh(key) ?? versions.resolve(key, head(object))

      const fetcher = new Fetcher(store, cfg.pageSize, (object, version, offset, length, sink) =>
        toPromise(
          semaphore.withPermits(1)(
            Effect.suspend(() => {
              const started = performance.now()
              stats.originFetches++
              return backend.getRange(object, offset, length, { version }).pipe(
                Stream.mapError((e) => fromBackend(object, e)),
                Stream.runForEach((chunk) =>
                  Effect.tryPromise({
                    try: () => {
                      stats.originBytes += chunk.length
                      return sink(chunk)
                    },
                    catch: (e) => (e instanceof ReadFailed ? e : new ReadFailed({ reason: describeUnknown(e) }))
                  })
                ),
                Effect.tap(() => Effect.sync(() => stats.originLatency.observe((performance.now() - started) / 1000))),
                Effect.tapError(() => Effect.sync(() => stats.originFetchFailures++))
              )
            })
          )
        )
      )
      const fill = (id: BlockId, blockLength: number, objectSize: number, first: number, end: number) =>
        fetcher.ensure(id, blockLength, objectSize, first, end).catch((e: unknown) => {
          const failure = e instanceof ReadFailed ? e : new ReadFailed({ reason: describeUnknown(e) })
          if (failure.staleVersion === true) versions.invalidate(objectKey(id.object), id.version)
          throw failure
        })

      const revalidate = (object: ObjectId, key: string): Promise<ObjectStat> => versions.resolve(key, head(object))

      return { versions, stat, revalidate, fill } satisfies MissPathShape
    })
  )
}

/** Units of one run being fdatasynced and committed at once, at most. */
const FINISHING = 4

type RangeFetch = (
  object: ObjectId,
  /** Pinned with If-Match: bytes of another version must never land under this version's key. */
  version: string,
  offset: number,
  length: number,
  sink: (chunk: Uint8Array) => Promise<void>
) => Promise<void>

interface Deferred {
  readonly promise: Promise<void>
  resolve: () => void
  reject: (e: unknown) => void
}

const deferred = (): Deferred => {
  let resolve!: () => void
  let reject!: (e: unknown) => void
  const promise = new Promise<void>((res, rej) => {
    resolve = res
    reject = rej
  })
  // A fill nobody awaits any more must not surface as an unhandled rejection.
  promise.catch(() => {})
  return { promise, resolve, reject }
}

/** Page-granular single-flight fills into the DiskStore. */
export class Fetcher {
  readonly #inflight = new Map<string, Deferred>()

  constructor(
    private readonly store: DiskStore,
    /** 0 = whole blocks. */
    private readonly pageSize: number,
    private readonly fetchRange: RangeFetch
  ) {}

  /** Fills in progress (pages or whole blocks). */
  get inflight(): number {
    return this.#inflight.size
  }

  async ensure(id: BlockId, blockLength: number, objectSize: number, first: number, end: number): Promise<void> {
    const key = blockKey(id)
    const waits: Array<Promise<void>> = []
    for (const [s, e] of this.store.missingRuns(key, first, end)) {
      let i = s
      while (i < e) {
        const pending = this.#inflight.get(`${key}\0${i}`)
        if (pending !== undefined) {
          waits.push(pending.promise)
          i++
          continue
        }
        let j = i + 1
        while (j < e && !this.#inflight.has(`${key}\0${j}`)) j++
        waits.push(this.#fetchRun(id, key, blockLength, objectSize, i, j))
        i = j
      }
    }
    await Promise.all(waits)
  }

  /** One origin GET for units `[s, e)`; each unit is committed (and its waiters woken) as soon as it is complete. */
  #fetchRun(id: BlockId, key: string, blockLength: number, objectSize: number, s: number, e: number): Promise<void> {
    const ps = this.pageSize
    const unitStart = (i: number) => (ps > 0 ? i * ps : 0)
    const unitBytes = (i: number) => (ps > 0 ? Math.min(ps, blockLength - i * ps) : blockLength)
    const defs: Array<Deferred> = []
    for (let i = s; i < e; i++) {
      const d = deferred()
      defs.push(d)
      this.#inflight.set(`${key}\0${i}`, d)
    }
    const settle = (i: number, error?: unknown) => {
      const d = defs[i - s]!
      if (this.#inflight.get(`${key}\0${i}`) === d) this.#inflight.delete(`${key}\0${i}`)
      if (error === undefined) d.resolve()
      else d.reject(error)
    }
    const runStart = unitStart(s)
    const runBytes = unitStart(e - 1) + unitBytes(e - 1) - runStart
    let current = s
    let written = 0
    let tmp: { readonly path: string; readonly fd: number; readonly hash: UnitHash } | undefined
    /**
     * Finished units being fdatasynced and committed. The stream goes on into the next unit
     * meanwhile, so the fsync's latency overlaps the origin's instead of adding to it; at most
     * FINISHING wait at once (a slow disk then holds the stream back).
     */
    const finishing = new Set<Promise<void>>()
    let finishError: unknown = undefined
    const finish = async (done: NonNullable<typeof tmp>, index: number): Promise<void> => {
      try {
        try {
          await this.store.syncTemp(key, done.fd)
        } catch (e) {
          await this.store.discardTemp(done.path, done.fd)
          throw e
        }
        await this.store.commit(id, blockLength, objectSize, { tmpPath: done.path, fd: done.fd, index, sum: done.hash.digest() })
        settle(index)
      } catch (e) {
        finishError ??= e
        settle(index, e)
      }
    }
    const finished = async () => {
      while (finishing.size > 0) await Promise.all(finishing)
      if (finishError !== undefined) throw finishError
    }
    const sink = async (chunk: Uint8Array): Promise<void> => {
      if (finishError !== undefined) throw finishError
      let at = 0
      while (at < chunk.length) {
        if (current >= e) {
          throw new ReadFailed({
            reason: `origin sent more than the ${runBytes} bytes asked for at offset ${id.offset + runStart} of the object; it may have changed`,
            staleVersion: true
          })
        }
        tmp ??= { ...(await this.store.createTemp(key)), hash: newUnitHash() }
        const want = unitBytes(current) - written
        const piece = chunk.length - at <= want ? (at === 0 ? chunk : chunk.subarray(at)) : chunk.subarray(at, at + want)
        tmp.hash.update(piece)
        await this.store.writeTemp(key, tmp.fd, piece, written)
        written += piece.length
        at += piece.length
        if (written === unitBytes(current)) {
          const done = tmp
          tmp = undefined
          written = 0
          const p: Promise<void> = finish(done, current).finally(() => finishing.delete(p))
          finishing.add(p)
          current++
          if (finishing.size >= FINISHING) await Promise.race(finishing)
        }
      }
    }
    const objectOffset = id.offset + runStart
    return this.fetchRange(id.object, id.version, objectOffset, runBytes, sink)
      .then(async () => {
        await finished()
        if (current < e) {
          const got = unitStart(current) + written - runStart
          throw new ReadFailed({
            reason: `origin returned ${got} of ${runBytes} bytes at offset ${objectOffset}; the object may have changed`,
            staleVersion: true
          })
        }
      })
      .catch(async (error: unknown) => {
        if (tmp !== undefined) await this.store.discardTemp(tmp.path, tmp.fd)
        await finished().catch(() => {})
        for (let i = current; i < e; i++) settle(i, error)
        throw error
      })
  }
}
