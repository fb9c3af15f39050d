/**
 * Cache-only reads and data-port listings on a local cluster (origin stub, coordinator, two
 * workers): `TalonClient.readCached` answers a typed CacheMiss while nothing is resident and
 * the origin stub counts zero requests of any kind; once `read` filled the blocks, the same
 * bytes; another version or a range past the end, CacheMiss. A worker's data port answers
 * Talon's ListObjects with an ObjectList in Talon's paths, or a refusal for a bad prefix.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { cachedPieces } from "../../src/client/cachedReads.js"
import { CacheMiss } from "../../src/client/errors.js"
import { decodeControl, encodeControlFrame } from "../../src/protocol/index.js"
import { connect as rawConnect } from "../worker/support/rawClient.js"
import { BLOCK, connect, DATASET, startCluster } from "./fixtures/prefetchCluster.js"

const same = (got: Uint8Array, want: Uint8Array) => expect(Buffer.compare(Buffer.from(got), Buffer.from(want))).toBe(0)

describe("cachedPieces", () => {
  it("cuts at block boundaries and the request cap, covering the range exactly", () => {
    expect(cachedPieces(10, 0, 100, 30)).toEqual([])
    expect(cachedPieces(90, 120, 100, 1000)).toEqual([[90, 10], [100, 100], [200, 10]])
    expect(cachedPieces(0, 100, 100, 40)).toEqual([[0, 40], [40, 40], [80, 20]])
  })
})

describe("TalonClient.readCached and data-port ListObjects on a local cluster", () => {
  it.scopedLive(
    "CacheMiss with zero origin requests cold, the bytes warm, CacheMiss for another version",
    () =>
      Effect.gen(function* () {
        const cluster = yield* startCluster
        const { client } = yield* connect(cluster)
        const key = "set/deep/d.bin"
        const want = DATASET[key]!
        const uri = `s3://data/${key}`
        const { version } = yield* client.stat(uri)
        yield* cluster.origin.resetStats()

        // Cold, across a block boundary: a typed miss, and the origin heard nothing at all.
        const cold = yield* Effect.either(client.readCached(uri, BLOCK - 100, 200, version))
        expect(Either.isLeft(cold) && cold.left).toBeInstanceOf(CacheMiss)
        if (Either.isLeft(cold) && cold.left._tag === "CacheMiss") expect(cold.left.attempts.length).toBeGreaterThan(0)
        expect((yield* cluster.origin.stats()).total).toBe(0)

        // Warm the whole object through the filling read, then cache-only reads need no origin.
        same(yield* client.read(uri, 0, want.length), want)
        const warm = (yield* cluster.origin.stats()).total
        same(yield* client.readCached(uri, BLOCK - 100, 200, version), want.subarray(BLOCK - 100, BLOCK + 100))
        same(yield* client.readCached(uri, 0, want.length, version), want)
        expect(yield* client.readCached(uri, 5, 0, version)).toHaveLength(0)
        // Another version, or past the end of this one: a miss, still without the origin.
        const other = yield* Effect.either(client.readCached(uri, 0, 10, "0".repeat(32)))
        expect(Either.isLeft(other) && other.left._tag).toBe("CacheMiss")
        const past = yield* Effect.either(client.readCached(uri, want.length - 5, 10, version))
        expect(Either.isLeft(past) && past.left._tag).toBe("CacheMiss")
        const bad = yield* Effect.either(client.readCached(uri, 0, 10, ""))
        expect(Either.isLeft(bad) && bad.left._tag).toBe("InvalidRequest")
        expect((yield* cluster.origin.stats()).total).toBe(warm)

        // ListObjects on a worker's data port, in Talon's path form.
        const c = yield* Effect.promise(() => rawConnect(cluster.workers[0]!.dataPort))
        yield* Effect.addFinalizer(() => Effect.sync(() => c.close()))
        const ask = (prefix: string) =>
          Effect.promise(async () => {
            c.send(encodeControlFrame(41, { _tag: "ListObjects", prefix }))
            const f = await c.next()
            expect(f.header.requestId).toBe(41)
            return Either.getOrThrow(decodeControl(f.payload)).message
          })
        const listed = yield* ask("/s3/data/set/deep/")
        expect(listed).toEqual({
          _tag: "ObjectList",
          entries: [
            { path: "s3/data/set/deep/d.bin", size: DATASET["set/deep/d.bin"]!.length },
            { path: "s3/data/set/deep/e.bin", size: DATASET["set/deep/e.bin"]!.length }
          ]
        })
        expect(yield* ask("s3/data/nothing-here/")).toEqual({ _tag: "ObjectList", entries: [] })
        const refused = yield* ask("/s3")
        expect(refused).toMatchObject({ _tag: "Ack", ok: false })
        expect(refused._tag === "Ack" && refused.detail).toContain("bucket")
      }),
    120_000
  )
})
