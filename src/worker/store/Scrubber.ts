/**
 * Background integrity checks of the store, off the hit path (which stays a Map lookup and
 * a pin: hashing a page per hit would cost more than serving it, see BENCHMARKS.md):
 *
 * - every `sizeCheckMs`, a stat of each open unit's file: a truncated file is dropped
 *   within that interval, instead of failing every read past the cut (sendfile comes up
 *   short and the connection must close) until a restart;
 * - units found on disk at start-up are hashed first, as fast as the disk allows (a read
 *   hashes them on demand before that: DiskStore.ensureOpen);
 * - then, at `bytesPerSecond`, every resident unit is hashed again in turn, so a byte
 *   flipped on disk is dropped within one pass and never served after that.
 *
 * The re-hash yields to fills: while an origin fill streams into the store, the next unit
 * waits for the fills to finish, up to `maxDeferMs` in all per pass. A cold read is one
 * worker thread's work per byte, and re-reading and hashing pages beside it takes that
 * thread and the disk from it; a unit filled during a pass is not in that pass's list anyway
 * (its checksum was taken from the bytes as they were written). So a pass takes at most
 * max(resident bytes / rate, `minPassMs`) + `maxDeferMs`, and a resident unit is re-hashed
 * within two passes of being filled.
 */
import { Clock, Deferred, Duration, Effect } from "effect"
import type { Scope } from "effect"
import { checkScratch, READ_CHUNK } from "./checksum.js"
import type { Unit } from "./entry.js"
import type { FillActivity } from "./fillActivity.js"
import type { StoreHealth } from "./health.js"

export interface ScrubOptions {
  /** Bytes hashed per second by the periodic re-verify; 0 = only start-up verify and size checks. */
  readonly bytesPerSecond: number
  readonly sizeCheckMs?: number
  /** A pass over every resident unit takes at least this long (a small cache is not re-read in a tight loop). */
  readonly minPassMs?: number
  /** How long a pass may wait, in all, for fills in flight to finish before it hashes anyway; 0 = never waits. */
  readonly maxDeferMs?: number
}

/** What the scrub needs of the store (DiskStore). */
export interface ScrubbedStore {
  readonly health: StoreHealth
  readonly fills: FillActivity
  units(): Iterable<Unit>
  verify(u: Unit, scratch?: Uint8Array): Promise<boolean>
  checkSizes(): Promise<number>
}

export interface Scrubber {
  /** Completes once every unit found on disk at start-up has been hashed (or the scrub was stopped). */
  readonly startup: Effect.Effect<void>
}

/** Starts the scrub's fibers in the scope; closing the scope stops them after the hash in progress. */
export const startScrubber = (store: ScrubbedStore, options: ScrubOptions): Effect.Effect<Scrubber, never, Scope.Scope> =>
  Effect.gen(function* () {
    const startup = yield* Deferred.make<void>()
    const sizeCheck = Duration.millis(options.sizeCheckMs ?? 1000)
    yield* Effect.promise(() => store.checkSizes().catch(() => 0)).pipe(
      Effect.delay(sizeCheck),
      Effect.forever,
      Effect.forkScoped
    )
    yield* verifyLoop(store, options, Deferred.succeed(startup, undefined)).pipe(
      Effect.ensuring(Deferred.succeed(startup, undefined)),
      Effect.forkScoped
    )
    return { startup: Deferred.await(startup) }
  })

const verifyLoop = (store: ScrubbedStore, options: ScrubOptions, startupDone: Effect.Effect<boolean>) =>
  Effect.gen(function* () {
    // One read per unit of up to a default page (checksum.ts), the buffer reused for every unit.
    const scratch = checkScratch(READ_CHUNK)
    const rate = options.bytesPerSecond
    const minPassMs = options.minPassMs ?? 10_000
    const maxDeferMs = options.maxDeferMs ?? 0
    // Uninterruptible: stopping waits for the hash in progress, so no read outlives the store.
    const verify = (u: Unit) => Effect.uninterruptible(Effect.promise(() => store.verify(u, scratch)))

    for (const u of [...store.units()]) {
      if (!u.verified && !u.gone) yield* verify(u)
    }
    yield* startupDone
    if (rate <= 0) return
    while (true) {
      const passStart = yield* Clock.currentTimeMillis
      let deferBudget = maxDeferMs
      for (const u of [...store.units()]) {
        if (u.gone) continue
        if (deferBudget > 0 && store.fills.busy) {
          const waitStart = yield* Clock.currentTimeMillis
          yield* Effect.race(Effect.promise(() => store.fills.idle()), Effect.sleep(Duration.millis(deferBudget)))
          const waited = (yield* Clock.currentTimeMillis) - waitStart
          deferBudget -= waited
          store.health.scrubDeferredSeconds += waited / 1000
          if (u.gone) continue
        }
        const started = yield* Clock.currentTimeMillis
        if (yield* verify(u)) store.health.scrubbedBytes += u.bytes
        // Paced to the rate: this unit's share of a second, less the time hashing it took.
        const wait = (u.bytes / rate) * 1000 - ((yield* Clock.currentTimeMillis) - started)
        if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
      }
      const rest = minPassMs - ((yield* Clock.currentTimeMillis) - passStart)
      if (rest > 0) yield* Effect.sleep(Duration.millis(rest))
    }
  })
