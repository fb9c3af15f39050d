/**
 * The gateway's stat cache: one origin HEAD per object at a time, answers trusted for
 * the TTL, refreshed in the background past half of it, invalidation that a HEAD
 * already in flight cannot undo, and the fresh-after-write window.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Stream } from "effect"
import { BackendNotFound, type BackendStoreShape, type ObjectStat } from "../../src/backend/BackendStore.js"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import { OriginStatCache } from "../../src/gateway/originStatCache.js"
import { eventually } from "../support/eventually.js"

const OBJ: ObjectId = { backend: Backend.S3, bucket: "b", objectPath: "k" }

/** An origin whose HEADs are counted and answered when the test says so. */
const scriptedOrigin = Effect.gen(function* () {
  let heads = 0
  let version = 1
  let gate = yield* Deferred.make<void>()
  let open = true
  const backend: BackendStoreShape = {
    stat: () =>
      Effect.gen(function* () {
        heads++
        const v = version
        if (!open) yield* Deferred.await(gate)
        if (v < 0) return yield* Effect.fail(new BackendNotFound({ object: "s3://b/k" }))
        return { size: 10 * v, version: `v${v}` } satisfies ObjectStat
      }),
    getRange: () => Stream.empty,
    list: () => Effect.succeed({ objects: [], commonPrefixes: [] }),
    put: () => Effect.succeed({ size: 0, version: "x" }),
    delete: () => Effect.void
  }
  return {
    backend,
    heads: () => heads,
    setVersion: (v: number) => (version = v),
    hold: () =>
      Effect.gen(function* () {
        open = false
        gate = yield* Deferred.make<void>()
      }),
    release: () =>
      Effect.gen(function* () {
        open = true
        yield* Deferred.succeed(gate, undefined)
      })
  }
})

describe("gateway stat cache", () => {
  it.live("shares one HEAD among concurrent callers, trusts it for the TTL, refreshes ahead past half of it", () =>
    Effect.gen(function* () {
      const origin = yield* scriptedOrigin
      let now = 1_000
      const cache = new OriginStatCache(origin.backend, yield* Effect.runtime<never>(), 1000, 5000, () => now)
      yield* origin.hold()
      const waiting = yield* Effect.all([cache.stat(OBJ), cache.stat(OBJ), cache.stat(OBJ)], { concurrency: "unbounded" }).pipe(Effect.fork)
      yield* eventually(Effect.sync(() => expect(origin.heads()).toBe(1)), { what: "the HEAD at the origin" })
      yield* origin.release()
      const answers = yield* waiting.await.pipe(Effect.flatten)
      expect(answers.map((a) => a.version)).toEqual(["v1", "v1", "v1"])
      expect(origin.heads()).toBe(1)

      now += 400 // within the first half: no origin traffic
      expect((yield* cache.stat(OBJ)).version).toBe("v1")
      expect(origin.heads()).toBe(1)

      origin.setVersion(2)
      now += 200 // past half: the cached answer now, a refresh behind it
      expect((yield* cache.stat(OBJ)).version).toBe("v1")
      // One refresh HEAD, whose answer is then cached (asking meanwhile starts no other).
      yield* eventually(
        Effect.gen(function* () {
          expect((yield* cache.stat(OBJ)).version).toBe("v2")
        }),
        { what: "the background refresh's answer cached" }
      )
      expect(origin.heads()).toBe(2)

      now += 5_000 // expired: the caller waits for the origin
      origin.setVersion(3)
      expect((yield* cache.stat(OBJ)).version).toBe("v3")
      expect(origin.heads()).toBe(3)
      // `fresh` always asks.
      expect((yield* cache.stat(OBJ, true)).version).toBe("v3")
      expect(origin.heads()).toBe(4)
      // Failures are not cached.
      origin.setVersion(-1)
      expect((yield* Effect.flip(cache.stat(OBJ, true)))._tag).toBe("BackendNotFound")
    })
  )

  it.live("an invalidation wins over a HEAD already in flight; a write keeps the object off the cache for the window", () =>
    Effect.gen(function* () {
      const origin = yield* scriptedOrigin
      let now = 1_000
      const cache = new OriginStatCache(origin.backend, yield* Effect.runtime<never>(), 10_000, 500, () => now)
      yield* origin.hold()
      const inflight = yield* cache.stat(OBJ).pipe(Effect.fork)
      yield* eventually(Effect.sync(() => expect(origin.heads()).toBe(1)), { what: "the HEAD at the origin" })
      origin.setVersion(2)
      cache.written(OBJ) // the old HEAD's answer must not be remembered
      yield* origin.release()
      expect((yield* inflight.await.pipe(Effect.flatten)).version).toBe("v1")
      expect((yield* cache.stat(OBJ)).version).toBe("v2")
      expect(origin.heads()).toBe(2)

      expect(cache.recentlyWritten(OBJ)).toBe(true)
      now += 499
      expect(cache.recentlyWritten(OBJ)).toBe(true)
      now += 2
      expect(cache.recentlyWritten(OBJ)).toBe(false)
      expect(cache.recentlyWritten({ ...OBJ, objectPath: "other" })).toBe(false)
    })
  )
})
