/**
 * Read-ahead across `read` calls and `readStream`'s window, on a real cluster (origin stub,
 * coordinator, in-process workers on loopback): sequential runs are read ahead of and served
 * from the cache, random reads are not; every byte is checked; the cache stays within its
 * bound; an object overwritten mid-run yields bytes of one version per read (or the typed
 * VersionChanged), never a mix; a worker stopped mid-run costs time, never wrong bytes.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Duration, Effect, Exit, Schedule, Scope, Stream } from "effect"
import { randomBytes } from "node:crypto"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import { clusterWithVersionLog, explain, matchingVersion, versionBytes } from "../support/overwrites.js"
import { stoppableCluster } from "./fixtures/stoppableCluster.js"

const KiB = 1024
const BLOCK = 64 * KiB
const PAGE = 16 * KiB
const READ = 16 * KiB
/** Chunks of one block, a window of four. */
const clientOptions = { blockSize: BLOCK, maxRequestBytes: BLOCK, readAheadBytes: 4 * BLOCK, readAheadCacheBytes: 16 * BLOCK, statTtlMs: 60_000 }

/** A small deterministic generator, so a failing random pattern can be replayed. */
const lcg = (seed: number) => () => {
  seed = (seed * 1103515245 + 12345) >>> 0
  return seed / 2 ** 32
}

describe("TalonClient read-ahead", () => {
  it.live(
    "a sequential run of read calls is read ahead of and served from the cache; random reads are not read ahead",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { origin, coordinator, put } = yield* stoppableCluster(BLOCK, PAGE, 2)
          const seq = randomBytes(32 * BLOCK + 1234)
          const rnd = randomBytes(512 * BLOCK)
          yield* put("seq.bin", seq)
          yield* put("rnd.bin", rnd)
          const client = yield* makeTalonClient({ coordinator, ...clientOptions })

          // Random 16 KiB reads: every byte right, nothing fetched ahead, the origin asked for no more than the pages read.
          const next = lcg(7)
          yield* origin.resetStats()
          const pages = new Set<number>()
          for (let i = 0; i < 40; i++) {
            const at = Math.floor(next() * (rnd.length - READ))
            const got = yield* client.read("s3://bucket/rnd.bin", at, READ)
            expect(Buffer.from(got).equals(rnd.subarray(at, at + READ))).toBe(true)
            for (let p = Math.floor(at / PAGE); p * PAGE < at + READ; p++) pages.add(p)
          }
          const random = client.readAhead()
          expect(random.fetchedBytes).toBe(0)
          expect(random.sequentialReads).toBe(0)
          expect((yield* origin.stats()).bytesServed).toBeLessThanOrEqual(pages.size * PAGE)

          // A sequential run: after its first reads, the origin has sent bytes beyond what was read (read ahead).
          yield* origin.resetStats()
          let at = 0
          for (; at < 6 * READ; at += READ) {
            const got = yield* client.read("s3://bucket/seq.bin", at, READ)
            expect(Buffer.from(got).equals(seq.subarray(at, at + READ))).toBe(true)
          }
          const ahead = client.readAhead()
          expect(ahead.fetchedBytes).toBeGreaterThan(0)
          // The chunks fetched ahead are (being) read from the origin: wait for them, then more came than was read.
          yield* Effect.gen(function* () {
            return (yield* origin.stats()).bytesServed
          }).pipe(
            Effect.repeat({ until: (served) => served > at + 2 * BLOCK, schedule: Schedule.spaced("10 millis") }),
            Effect.timeout(Duration.seconds(20))
          )
          // The rest of the run, to the end (the last read short): every byte right, most served by the cache.
          for (; at < seq.length; at += READ) {
            const got = yield* client.read("s3://bucket/seq.bin", at, READ)
            expect(Buffer.from(got).equals(seq.subarray(at, Math.min(seq.length, at + READ)))).toBe(true)
          }
          const done = client.readAhead()
          expect(done.servedBytes).toBeGreaterThan(seq.length - 4 * READ)
          // Fetched for nothing: at most the part of the first chunk the run had already read directly.
          expect(done.unreadBytes).toBeLessThanOrEqual(BLOCK)
          expect(done.residentBytes).toBe(0)
          // The origin sent each byte of the object about once, not once per read and once per read-ahead.
          expect((yield* origin.stats()).bytesServed).toBeLessThanOrEqual(seq.length + 2 * BLOCK)
        })
      ),
    60_000
  )

  it.live(
    "the cache never holds more than its bound: four interleaved sequential readers over a cache of three windows",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { coordinator, put } = yield* stoppableCluster(BLOCK, PAGE, 2)
          const objects = [0, 1, 2, 3].map(() => randomBytes(24 * BLOCK + 99))
          for (const [i, o] of objects.entries()) yield* put(`o${i}.bin`, o)
          const cap = 12 * BLOCK
          const client = yield* makeTalonClient({ coordinator, ...clientOptions, readAheadCacheBytes: cap })
          let peak = 0
          yield* Effect.forEach(
            objects,
            (o, i) =>
              Effect.gen(function* () {
                for (let at = 0; at < o.length; at += READ) {
                  const got = yield* client.read(`s3://bucket/o${i}.bin`, at, READ)
                  expect(Buffer.from(got).equals(o.subarray(at, Math.min(o.length, at + READ)))).toBe(true)
                  peak = Math.max(peak, client.readAhead().residentBytes)
                }
              }),
            { concurrency: "unbounded", discard: true }
          )
          const s = client.readAhead()
          expect(peak).toBeGreaterThan(0)
          expect(peak).toBeLessThanOrEqual(cap)
          expect(s.servedBytes).toBeGreaterThan(0)
        })
      ),
    60_000
  )

  it.live(
    "readStream reads ahead within its window, across blocks and workers, bytes in order",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { coordinator, put } = yield* stoppableCluster(BLOCK, PAGE, 2)
          const bytes = randomBytes(40 * BLOCK + 777)
          yield* put("s.bin", bytes)
          const client = yield* makeTalonClient({ coordinator, ...clientOptions, parallelism: 1 })
          const parts = yield* Stream.runCollect(client.readStream("s3://bucket/s.bin", 5, bytes.length))
          expect(Buffer.concat(Chunk.toArray(parts)).equals(bytes.subarray(5))).toBe(true)
        })
      ),
    60_000
  )

  it.live(
    "a worker stopped during a sequential run costs time, never wrong bytes",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { coordinator, scopes, put } = yield* stoppableCluster(BLOCK, PAGE, 2)
          const bytes = randomBytes(48 * BLOCK + 5)
          yield* put("k.bin", bytes)
          const client = yield* makeTalonClient({ coordinator, ...clientOptions, replicas: 2, requestTimeoutMs: 3000, connectTimeoutMs: 500, membershipTtlMs: 200 })
          // Reads via `read`, and a stream alongside, while one of the two workers goes away.
          const streamed = client.readStream("s3://bucket/k.bin", 0, bytes.length).pipe(Stream.runCollect, Effect.fork)
          for (let at = 0; at < bytes.length; at += READ) {
            if (at === 12 * BLOCK) yield* Scope.close(scopes[0]!, Exit.void)
            const got = yield* client.read("s3://bucket/k.bin", at, READ)
            expect(Buffer.from(got).equals(bytes.subarray(at, Math.min(bytes.length, at + READ)))).toBe(true)
          }
          const parts = yield* Effect.flatMap(streamed, (f) => f.await).pipe(Effect.flatten)
          expect(Buffer.concat(Chunk.toArray(parts)).equals(bytes)).toBe(true)
          expect(client.readAhead().sequentialReads).toBeGreaterThan(0)
        })
      ),
    90_000
  )
})

describe("TalonClient read-ahead while the object is overwritten", () => {
  it.live(
    "each read of a sequential run is one version's bytes, runs of the new version are not served the old one's chunks; a stream fails typed or is one version",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { cluster, log } = yield* clusterWithVersionLog({ workers: 2, blockSize: BLOCK, pageSize: PAGE, versionTtlMs: 100 })
          const size = 32 * BLOCK
          yield* Effect.promise(() => log.write(versionBytes(size)))
          const client = yield* makeTalonClient({ coordinator: cluster.coordinator, ...clientOptions, statTtlMs: 50 })
          const bad: Array<string> = []
          const seen = new Set<number>()
          const failures: Array<string> = []
          const stale: Array<string> = []
          let writes = 0
          for (let pass = 0; pass < 3; pass++) {
            for (let at = 0; at < size; at += READ) {
              // Overwritten twice per pass, mid-run.
              if (at === 8 * BLOCK || at === 20 * BLOCK) {
                yield* Effect.promise(() => log.write(versionBytes(size)))
                writes++
                // Past the client's stat TTL: the next read stats the new version, and must get its bytes,
                // not chunks read ahead for the old one.
                yield* Effect.sleep("300 millis")
              }
              const r = yield* Effect.either(client.read("s3://bucket/obj.bin", at, READ))
              if (r._tag === "Left") {
                if (r.left._tag !== "VersionChanged") failures.push(`${r.left._tag}: ${r.left.message}`)
                continue
              }
              const v = matchingVersion(log, at, READ, r.right)
              if (v < 0) bad.push(explain(log, at, r.right))
              else if (v !== log.versions.length - 1) stale.push(`read at ${at} got v${v} of ${log.versions.length}`)
              else seen.add(v)
            }
            // Streams over the same object: one version whole, or VersionChanged.
            const s = yield* Effect.either(Stream.runCollect(client.readStream("s3://bucket/obj.bin", 0, size)))
            if (s._tag === "Right") {
              const body = Buffer.concat(Chunk.toArray(s.right))
              if (matchingVersion(log, 0, size, body) < 0) bad.push(`stream: ${explain(log, 0, body)}`)
            } else if (s.left._tag !== "VersionChanged") failures.push(`stream ${s.left._tag}: ${s.left.message}`)
          }
          expect(bad.slice(0, 3)).toEqual([])
          expect(failures.slice(0, 3)).toEqual([])
          expect(stale.slice(0, 3)).toEqual([])
          expect(writes).toBe(6)
          // Reads saw every version written (the cache did not pin the run to the first).
          expect(seen.size).toBe(7)
          expect(client.readAhead().servedBytes).toBeGreaterThan(0)
        })
      ),
    120_000
  )
})
