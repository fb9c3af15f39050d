/**
 * The scrub's pacing around fills, on the TestClock over a real DiskStore: while an origin fill
 * streams into the store the scrub does not re-read pages, and it resumes as soon as the fill
 * ends; a fill that never ends holds it back for at most the defer budget, after which a byte
 * flipped on disk is still found and dropped within the pass.
 */
import * as fsp from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, TestClock } from "effect"
import { Backend, type BlockId } from "../../../src/core/ids.js"
import { fetchRun, type RangeFetch } from "../../../src/worker/miss/fetchRun.js"
import { DiskStore } from "../../../src/worker/store/DiskStore.js"
import type { Unit } from "../../../src/worker/store/entry.js"
import { blockKey } from "../../../src/worker/store/layout.js"
import { type ScrubbedStore, startScrubber } from "../../../src/worker/store/Scrubber.js"

const PAGE = 4096
const PAGES = 4
const DEFER_MS = 5000

const block = (name: string): BlockId => ({ object: { backend: Backend.S3, bucket: "b", objectPath: name }, offset: 0, blockSize: PAGE * PAGES, version: "v1" })

const bytesOf = (seed: number) => Uint8Array.from({ length: PAGE * PAGES }, (_, i) => (i * 31 + seed) & 0xff)

/** An origin that sends the whole range in one chunk once `go` completes. */
const originAfter =
  (bytes: Uint8Array, go: Effect.Effect<void>): RangeFetch =>
  async (_object, _version, offset, length, sink) => {
    await Effect.runPromise(go)
    await sink(bytes.subarray(offset, offset + length))
  }

const fill = (store: DiskStore, id: BlockId, fetchRange: RangeFetch) =>
  fetchRun({ store, pageSize: PAGE, fetchRange }, id, blockKey(id), PAGE * PAGES, PAGE * PAGES, 0, PAGES, () => {})

/** A real store in a temp dir holding one filled block; the scrub sees it through a recorder of verify calls. */
const storeWithBlock = Effect.gen(function* () {
  const dir = yield* Effect.acquireRelease(
    Effect.promise(() => fsp.mkdtemp(path.join(os.tmpdir(), "talon-scrub-"))),
    (d) => Effect.promise(() => fsp.rm(d, { recursive: true, force: true }))
  )
  const store = yield* Effect.acquireRelease(
    Effect.promise(() => DiskStore.open({ dirs: [dir], capacity: 1024 * PAGE, pageSize: PAGE })),
    (s) => Effect.promise(() => s.close())
  )
  yield* Effect.promise(() => fill(store, block("resident"), originAfter(bytesOf(1), Effect.void)))
  const verified: Array<Unit> = []
  const recorded: ScrubbedStore = {
    health: store.health,
    fills: store.fills,
    units: () => store.units(),
    checkSizes: () => store.checkSizes(),
    verify: (u, scratch) => {
      verified.push(u)
      return store.verify(u, scratch)
    }
  }
  return { store, recorded, verified }
})

/** A fill of another block whose origin holds its body until the returned effect runs. */
const stalledFill = (store: DiskStore) =>
  Effect.gen(function* () {
    const go = yield* Deferred.make<void>()
    const done = Effect.promise(() => fill(store, block("cold"), originAfter(bytesOf(2), Deferred.await(go))))
    const fiber = yield* Effect.fork(done)
    return Deferred.succeed(go, undefined).pipe(Effect.zipRight(fiber.await))
  })

/** Lets real file I/O finish: event-loop turns, advancing the TestClock by `stepMs` each, until `done`. */
const settle = (done: () => boolean, stepMs = 0) =>
  Effect.gen(function* () {
    for (let i = 0; i < 5000 && !done(); i++) {
      if (stepMs > 0) yield* TestClock.adjust(stepMs)
      yield* Effect.promise(() => new Promise<void>((r) => setImmediate(r)))
    }
    expect(done()).toBe(true)
  })

const turns = (n: number) => Effect.forEach(Array.from({ length: n }), () => Effect.promise(() => new Promise<void>((r) => setImmediate(r))), { discard: true })

describe("Scrubber", () => {
  it.scoped("re-hashes nothing while a fill streams and resumes as soon as it ends", () =>
    Effect.gen(function* () {
      const { store, recorded, verified } = yield* storeWithBlock
      const release = yield* stalledFill(store)
      yield* settle(() => store.fills.busy)
      yield* startScrubber(recorded, { bytesPerSecond: 1024 ** 3, maxDeferMs: DEFER_MS, sizeCheckMs: 60_000 })
      yield* TestClock.adjust(DEFER_MS - 1)
      yield* turns(20)
      expect(verified).toEqual([])
      yield* release
      expect(store.fills.busy).toBe(false)
      yield* settle(() => store.health.scrubbedBytes === PAGE * PAGES, 1)
      expect(store.health.corruptTotal).toBe(0)
      expect(store.health.scrubDeferredSeconds).toBe((DEFER_MS - 1) / 1000)
    })
  )

  it.scoped("a fill that never ends holds the scrub back at most the defer budget: a flipped byte is still dropped", () =>
    Effect.gen(function* () {
      const { store, recorded, verified } = yield* storeWithBlock
      yield* stalledFill(store)
      yield* settle(() => store.fills.busy)
      const victim = [...store.units()][2]!
      const fh = yield* Effect.promise(() => fsp.open(victim.path, "r+"))
      yield* Effect.promise(() => fh.write(Buffer.from([0xff ^ bytesOf(1)[2 * PAGE + 7]!]), 0, 1, 7).then(() => fh.close()))
      yield* startScrubber(recorded, { bytesPerSecond: 1024 ** 3, maxDeferMs: DEFER_MS, sizeCheckMs: 60_000 })
      yield* TestClock.adjust(DEFER_MS - 1)
      yield* turns(20)
      expect(verified).toEqual([])
      yield* TestClock.adjust(1)
      // The pass goes on past the flipped page: wait for the whole pass, not just the find.
      yield* settle(() => store.health.corrupt.checksum === 1 && store.health.scrubbedBytes === PAGE * (PAGES - 1), 1)
      expect(store.fills.busy).toBe(true)
      expect(victim.gone).toBe(true)
      expect(store.health.scrubbedBytes).toBe(PAGE * (PAGES - 1))
      expect(store.health.scrubDeferredSeconds).toBe(DEFER_MS / 1000)
    })
  )

  it.scoped("with no defer budget it re-hashes beside a fill, as before", () =>
    Effect.gen(function* () {
      const { store, recorded } = yield* storeWithBlock
      yield* stalledFill(store)
      yield* settle(() => store.fills.busy)
      yield* startScrubber(recorded, { bytesPerSecond: 1024 ** 3, maxDeferMs: 0, sizeCheckMs: 60_000 })
      yield* settle(() => store.health.scrubbedBytes === PAGE * PAGES, 1)
    })
  )
})
