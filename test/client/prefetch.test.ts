/**
 * `Prefetch` end to end on a local cluster (what `talon up` runs): warm a prefix, then make
 * the origin refuse every request and read every byte of every object from the cache; a
 * second prefetch fetches nothing; a prefix over the cluster's capacity and bad prefixes
 * are refused before anything is loaded.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import type { PrefetchProgress } from "../../src/client/prefetch.js"
import { clusterCapacity } from "../../src/client/prefetchCapacity.js"
import { connect, DATASET, originGets, startCluster, TOTAL } from "./fixtures/prefetchCluster.js"

const KiB = 1024
const MiB = 1024 * KiB

describe("Prefetch on a local cluster", () => {
  it.scopedLive(
    "warms a prefix, serves every byte with the origin refusing everything, and a second run fetches nothing",
    () =>
      Effect.gen(function* () {
        const cluster = yield* startCluster
        const { prefetch, client } = yield* connect(cluster)
        const seen: Array<PrefetchProgress> = []

        const first = yield* prefetch.prefetch("s3://data/set/", { loadBytes: 512 * KiB, concurrency: 4, onProgress: (p) => void seen.push(p) })
        expect(first).toMatchObject({ objects: 5, objectsDone: 5, datasetBytes: TOTAL, bytes: TOTAL, bytesDone: TOTAL, failed: 0, replicas: 1, workers: 2 })
        expect(first.fetched).toBe(TOTAL)
        expect(first.resident).toBe(0)
        expect(seen.length).toBeGreaterThan(5)
        expect(seen.at(-1)!.bytesDone).toBe(TOTAL)
        for (let i = 1; i < seen.length; i++) expect(seen[i]!.bytesDone).toBeGreaterThanOrEqual(seen[i - 1]!.bytesDone)

        // Resumable: everything is resident, so the origin serves no GET at all.
        const getsBefore = yield* originGets(cluster)
        const second = yield* prefetch.prefetch("s3://data/set")
        expect(second).toMatchObject({ objects: 5, fetched: 0, resident: TOTAL, failed: 0 })
        expect(yield* originGets(cluster)).toBe(getsBefore)

        // The origin now resets every connection: every byte must come from the cache.
        yield* cluster.origin.setFaults({ failureRate: 1, failureMode: "reset" })
        for (const [key, want] of Object.entries(DATASET)) {
          const got = yield* client.read(`s3://data/${key}`, 0, want.length)
          expect(got.length).toBe(want.length)
          expect(Buffer.compare(Buffer.from(got), want)).toBe(0)
        }
        expect(yield* originGets(cluster)).toBe(getsBefore)
      }),
    120_000
  )

  it.scopedLive(
    "refuses a prefix larger than the cluster's capacity before loading anything, unless forced; refuses bad prefixes clearly",
    () =>
      Effect.gen(function* () {
        const cluster = yield* startCluster
        const { prefetch } = yield* connect(cluster)
        const capacity = yield* clusterCapacity(cluster.coordinator.adminAddress)
        expect(capacity).toMatchObject({ capacityBytes: 32 * MiB, workers: 2 })

        const getsBefore = yield* originGets(cluster)
        const refused = yield* Effect.flip(prefetch.prefetch("s3://data/big/", { capacityBytes: capacity.capacityBytes }))
        expect(refused._tag).toBe("PrefetchTooLarge")
        expect(refused.message).toMatch(/data\/big\/ holds 1 object\(s\), 0\.04 GiB, more than the cluster's cache capacity of 0\.03 GiB \(2 worker\(s\)\).*--force/)
        // The dataset fits once, not on two replicas of each block.
        const twice = yield* Effect.flip(prefetch.prefetch("s3://data/", { capacityBytes: 2 * TOTAL - 1, replicas: 2 }))
        expect(twice._tag).toBe("PrefetchTooLarge")
        expect(yield* originGets(cluster)).toBe(getsBefore)

        // Forced past a (pretend) small capacity; then replicas: each block warmed on both owners.
        const forced = yield* prefetch.prefetch("s3://data/set/b", { capacityBytes: 1, force: true })
        expect(forced).toMatchObject({ objects: 1, fetched: DATASET["set/b.bin"]!.length, failed: 0 })
        const both = yield* prefetch.prefetch("s3://data/set/deep/", { capacityBytes: capacity.capacityBytes, replicas: 2 })
        const deep = DATASET["set/deep/d.bin"]!.length + DATASET["set/deep/e.bin"]!.length
        expect(both).toMatchObject({ objects: 2, replicas: 2, bytes: 2 * deep, fetched: 2 * deep, failed: 0 })

        for (const bad of ["ftp://data/set/", "s3://", "s3:///set", "data/set", "/nfs/data/set"]) {
          const e = yield* Effect.flip(prefetch.prefetch(bad))
          expect(e._tag).toBe("InvalidRequest")
          expect(e.message).toContain(`cannot prefetch ${JSON.stringify(bad)}`)
          expect(e.message).toContain("expected s3://bucket/prefix or az://container/prefix")
        }
        const empty = yield* Effect.flip(prefetch.prefetch("s3://data/nothing-here/"))
        expect(empty._tag).toBe("NothingToPrefetch")
        expect(empty.message).toContain("no objects under s3://data/nothing-here/")
        const either = yield* Effect.either(prefetch.prefetch("az://data/set/deep/d"))
        expect(Either.isRight(either) && either.right.objects).toBe(1)
      }),
    120_000
  )
})
