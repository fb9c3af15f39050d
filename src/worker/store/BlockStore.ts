import { Context, Data, Effect, Layer } from "effect"
import { WorkerConfig } from "../config.js"
import { WorkerMetrics } from "../metrics.js"
import { DiskStore } from "./DiskStore.js"
import { startScrubber } from "./Scrubber.js"

export class BlockStoreOpenFailed extends Data.TaggedError("BlockStoreOpenFailed")<{
  readonly dirs: ReadonlyArray<string>
  readonly detail: string
}> {
  override get message() {
    return `cannot open the block store in ${this.dirs.join(", ")}: ${this.detail}`
  }
}

/**
 * The worker's on-disk block cache. The service is the DiskStore itself: the
 * serve loop calls its synchronous pin/release directly.
 */
export class BlockStore extends Context.Tag("talon/worker/BlockStore")<BlockStore, DiskStore>() {
  /** Opens (and rebuilds) the store in the configured cache dirs; closes its files when the scope ends. */
  static readonly layer = Layer.scoped(
    BlockStore,
    Effect.gen(function* () {
      const cfg = yield* WorkerConfig
      const stats = yield* WorkerMetrics
      const store = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () =>
            DiskStore.open({
              dirs: cfg.cacheDirs,
              capacity: cfg.capacity,
              pageSize: cfg.pageSize,
              maxOpenFiles: cfg.maxOpenFiles,
              fsync: cfg.syncFills,
              onEvict: (bytes) => {
                stats.evictions++
                stats.evictedBytes += bytes
              },
              onWarning: (message) => Effect.runFork(Effect.logWarning(message))
            }),
          catch: (e) => new BlockStoreOpenFailed({ dirs: cfg.cacheDirs, detail: String(e) })
        }),
        (store) => Effect.promise(() => store.close())
      )
      stats.store = store.health
      const scrubber = yield* startScrubber(store, { bytesPerSecond: cfg.scrubRate, maxDeferMs: cfg.scrubMaxDeferMs, minPassMs: cfg.scrubMinPassMs })
      // Serving loops open leased files without the store's verify-before-first-serve: start
      // serving only once every page found on disk has been hashed.
      if (cfg.loops > 1) {
        yield* scrubber.startup
        yield* Effect.logInfo(`block store: ${store.health.verifiedUnits} cached units verified at start-up`)
      }
      return store
    })
  )
}
