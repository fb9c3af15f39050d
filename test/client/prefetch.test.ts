/**
 * `Prefetch` end to end on a local cluster (what `talon up` runs): warm a prefix, then make
 * the origin refuse every request and read every byte of every object from the cache; a
 * second prefetch fetches nothing; a prefix over the cluster's capacity and bad prefixes
 * are refused before anything is loaded.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Either, Layer } from "effect"
import { LocalCluster, type LocalClusterShape } from "../../src/cluster/LocalCluster.js"
import { Prefetch, type PrefetchProgress } from "../../src/client/prefetch.js"
import { clusterCapacity } from "../../src/client/prefetchCapacity.js"
import { TalonClient } from "../../src/client/TalonClient.js"

const KiB = 1024
const MiB = 1024 * KiB
const BLOCK = 1 * MiB

/** Deterministic bytes per object, so every read can be checked. */
const bytesOf = (n: number, seed: number): Buffer => {
  const out = Buffer.alloc(n)
  let x = seed * 2654435761 >>> 0 || 1
  for (let i = 0; i < n; i++) {
    x ^= x << 13
    x >>>= 0
    x ^= x >>> 17
    x ^= x << 5
    x >>>= 0
    out[i] = x & 0xff
  }
  return out
}

const DATASET: Record<string, Buffer> = {
  "set/a.bin": bytesOf(1, 1),
  "set/b.bin": bytesOf(300 * KiB + 5, 2),
  "set/c.bin": bytesOf(BLOCK + 17, 3),
  "set/deep/d.bin": bytesOf(2 * BLOCK + 512 * KiB, 4),
  "set/deep/e.bin": bytesOf(3 * BLOCK, 5)
}
const TOTAL = Object.values(DATASET).reduce((n, b) => n + b.length, 0)

/** A temp dir whose origin holds bucket `data` with DATASET and one object too big for the cache. */
const clusterDir = Effect.acquireRelease(
  Effect.sync(() => {
    const dir = mkdtempSync(join(tmpdir(), "talon-prefetch-"))
    const put = (key: string, bytes: Buffer) => {
      const file = join(dir, "origin", "data", key)
      mkdirSync(join(file, ".."), { recursive: true })
      writeFileSync(file, bytes)
    }
    for (const [key, bytes] of Object.entries(DATASET)) put(key, bytes)
    put("big/huge.bin", bytesOf(40 * MiB, 6))
    return dir
  }),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

const startCluster = Effect.gen(function* () {
  const dir = yield* clusterDir
  const cluster = yield* LocalCluster.make({
    dir,
    ephemeral: true,
    workers: 2,
    gateway: false,
    heartbeatIntervalMs: 200,
    worker: { blockSize: BLOCK, pageSize: 256 * KiB, capacity: 16 * MiB, versionTtlMs: 600_000 }
  })
  // Workers register asynchronously, and report their capacity with their status.
  for (let i = 0; ; i++) {
    const status = yield* cluster.coordinator.cluster
    if (status.members.length === 2 && status.members.every((m) => (m.capacityBytes ?? 0) > 0)) break
    if (i === 100) return yield* Effect.dieMessage("workers did not join the cluster")
    yield* Effect.sleep("100 millis")
  }
  return cluster
})

const clientOptions = (cluster: LocalClusterShape) => ({
  coordinator: cluster.coordinator.controlAddress,
  blockSize: BLOCK,
  // The reads after the origin is gone use the stats the prefetch took.
  statTtlMs: 600_000
})

/** Prefetch and the client it runs on, closed with the test's scope. */
const connect = (cluster: LocalClusterShape) =>
  Effect.map(Layer.build(Prefetch.layer(clientOptions(cluster))), (ctx) => ({
    prefetch: Context.get(ctx, Prefetch),
    client: Context.get(ctx, TalonClient)
  }))

const originGets = (cluster: LocalClusterShape) => Effect.map(cluster.origin.stats(), (s) => s.requests.get)

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
