/**
 * Many pieces in flight for one reader, on a real cluster (origin stub, coordinator, two
 * in-process workers on loopback): every byte right across block and worker boundaries
 * whatever the window, piece size and connections per worker; a worker stopped under a
 * full window costs time or fails typed, never wrong bytes; a read given up midway leaves
 * no buffer held and no connection beyond the pool's bound.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Context, Effect, Exit, Fiber, Layer, Scope, Stream } from "effect"
import { randomBytes } from "node:crypto"
import type { TalonClientOptions } from "../../src/client/config.js"
import { clientWithParts, TalonClient } from "../../src/client/TalonClient.js"
import { Workers } from "../../src/client/Workers.js"
import { eventually } from "../support/eventually.js"
import { stoppableCluster } from "./fixtures/stoppableCluster.js"

const KiB = 1024
const BLOCK = 64 * KiB
const PAGE = 16 * KiB
const URI = "s3://bucket/f.bin"

/** A client and its data-plane pool (read buffers, connections), released with the scope. */
const clientAndPool = (options: Partial<TalonClientOptions>) =>
  Effect.map(Layer.build(clientWithParts({ blockSize: BLOCK, statTtlMs: 60_000, ...options })), (ctx) => ({
    client: Context.get(ctx, TalonClient),
    pool: Context.get(ctx, Workers).pool
  }))

const same = (got: Uint8Array, want: Uint8Array) => Buffer.from(got.buffer, got.byteOffset, got.byteLength).equals(want)

describe("TalonClient with many pieces in flight", () => {
  it.live(
    "readStream, read and readInto give every byte across block and worker boundaries, for deep and shallow windows, odd piece sizes and one or many connections",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { coordinator, put } = yield* stoppableCluster(BLOCK, PAGE, 2)
          const bytes = randomBytes(20 * BLOCK + 4321)
          yield* put("f.bin", bytes)
          const variants: ReadonlyArray<Partial<TalonClientOptions>> = [
            // Deep: 16 pieces of a block in flight on one connection per worker, every buffer kept for reuse.
            { readAheadBytes: 16 * BLOCK, parallelism: 16, maxRequestBytes: BLOCK, connectionsPerWorker: 1, readBuffersKeptBytes: 64 * 1024 * KiB },
            // Pieces that never line up with blocks, many connections.
            { readAheadBytes: 5 * BLOCK, parallelism: 8, maxRequestBytes: 20_011, connectionsPerWorker: 6 },
            // No read-ahead: only `parallelism` pieces at a time; no idle buffer kept.
            { readAheadBytes: 0, parallelism: 3, maxRequestBytes: 7 * KiB + 3, connectionsPerWorker: 2, readBuffersKeptBytes: 0 }
          ]
          for (const options of variants) {
            const { client, pool } = yield* clientAndPool({ coordinator, ...options })
            const what = JSON.stringify(options)
            const streamed = yield* Stream.runCollect(client.readStream(URI, 777, bytes.length))
            expect(same(Buffer.concat(Chunk.toArray(streamed)), bytes.subarray(777)), `stream ${what}`).toBe(true)
            const ranged = yield* client.read(URI, BLOCK - 5, 9 * BLOCK + 10)
            expect(same(ranged, bytes.subarray(BLOCK - 5, 10 * BLOCK + 5)), `read ${what}`).toBe(true)
            // A run of read calls straddling blocks: read ahead of across both workers.
            for (let at = 3 * BLOCK + 100; at < bytes.length; at += 24 * KiB) {
              const got = yield* client.read(URI, at, 24 * KiB)
              expect(same(got, bytes.subarray(at, at + 24 * KiB)), `read at ${at} ${what}`).toBe(true)
            }
            // readInto: one buffer reused for every call, the last one clamped at the object's end.
            const dest = new Uint8Array(24 * KiB + 7)
            for (let at = 5 * BLOCK - 3; at < bytes.length; at += dest.length) {
              const got = yield* client.readInto(URI, at, dest)
              expect(got.buffer, "readInto writes into the caller's buffer").toBe(dest.buffer)
              expect(got.length).toBe(Math.min(dest.length, bytes.length - at))
              expect(same(got, bytes.subarray(at, at + dest.length)), `readInto at ${at} ${what}`).toBe(true)
            }
            // Idle buffers kept within the setting.
            expect(pool.slabs.freeCount * pool.slabs.slabBytes, what).toBeLessThanOrEqual(Math.max(options.readBuffersKeptBytes ?? 16 * 1024 * KiB, 0) + pool.slabs.slabBytes)
            // The blocks are spread over both workers, and no pool grew past its bound.
            const counts = Object.values(pool.connectionCounts)
            expect(counts.length, what).toBe(2)
            for (const n of counts) expect(n, what).toBeLessThanOrEqual(options.connectionsPerWorker!)
          }
        })
      ),
    60_000
  )

  it.live(
    "a worker stopped while a deep window is in flight: the stream still gives every byte (the other replica), or with one replica fails typed",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { coordinator, scopes, put } = yield* stoppableCluster(BLOCK, PAGE, 2)
          const bytes = randomBytes(24 * BLOCK + 99)
          yield* put("f.bin", bytes)
          const deep = { coordinator, readAheadBytes: 8 * BLOCK, parallelism: 8, maxRequestBytes: 16 * KiB, requestTimeoutMs: 3000, connectTimeoutMs: 500, membershipTtlMs: 200 }
          const two = yield* clientAndPool({ ...deep, replicas: 2 })
          const one = yield* clientAndPool({ ...deep, replicas: 1 })
          // Both streams pulled a few chunks (their windows full) before the worker goes.
          const pulls = yield* Effect.all([two, one].map(({ client }) => Stream.toPull(client.readStream(URI, 0, bytes.length))))
          const firsts: Array<Array<Uint8Array>> = [[], []]
          for (let i = 0; i < 3; i++) for (const k of [0, 1]) firsts[k]!.push(...Chunk.toArray(yield* pulls[k]!))
          yield* Scope.close(scopes[0]!, Exit.void)
          const drain = (k: number) =>
            Effect.gen(function* () {
              const parts = [...firsts[k]!]
              for (;;) {
                const next = yield* Effect.either(pulls[k]!)
                if (next._tag === "Right") parts.push(...Chunk.toArray(next.right))
                else if (next.left._tag === "None") return parts
                else return yield* Effect.fail(next.left.value)
              }
            })
          const withTwo = yield* drain(0)
          expect(same(Buffer.concat(withTwo), bytes)).toBe(true)
          const withOne = yield* Effect.exit(drain(1))
          if (Exit.isSuccess(withOne)) expect(same(Buffer.concat(withOne.value), bytes)).toBe(true)
          else {
            const failure = withOne.cause._tag === "Fail" ? withOne.cause.error : undefined
            expect(failure?._tag, String(withOne.cause)).toBeOneOf(["ReadFailed", "NoWorkers"])
            expect(failure?.message).toMatch(/127\.0\.0\.1:\d+/)
          }
        })
      ),
    60_000
  )

  it.live(
    "streams and reads given up midway release every buffer they held and stay within the pool's connections; later reads are right",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { coordinator, put } = yield* stoppableCluster(BLOCK, PAGE, 2)
          const bytes = randomBytes(32 * BLOCK + 17)
          yield* put("f.bin", bytes)
          const { client, pool } = yield* clientAndPool({ coordinator, readAheadBytes: 16 * BLOCK, parallelism: 8, maxRequestBytes: 16 * KiB, connectionsPerWorker: 2 })
          // Warm: every block filled once, so later replies come back at once.
          yield* client.read(URI, 0, bytes.length)
          const live = () => Object.values(pool.connectionCounts).reduce((a, b) => a + b, 0)
          // Buffers still referenced: at most the one each open connection reads into.
          const settled = (what: string) =>
            eventually(
              Effect.sync(() => {
                expect(pool.slabs.held).toBeLessThanOrEqual(live())
                for (const n of Object.values(pool.connectionCounts)) expect(n).toBeLessThanOrEqual(2)
              }),
              { what }
            )
          yield* settled("buffers of the warm-up read released")

          for (let round = 0; round < 3; round++) {
            // A stream closed after its first chunk, with a full window requested ahead of it.
            const first = yield* Effect.scoped(
              Effect.gen(function* () {
                const pull = yield* Stream.toPull(client.readStream(URI, round * 1000, bytes.length))
                const chunk = yield* pull
                // Let the window's replies arrive before it is closed under them.
                yield* Effect.sleep("20 millis")
                return Chunk.toArray(chunk)
              })
            )
            expect(same(Buffer.concat(first), bytes.subarray(round * 1000, round * 1000 + Buffer.concat(first).length))).toBe(true)
            yield* settled(`round ${round}: the closed stream's pieces released`)

            // A read interrupted while some of its pieces are in and others in flight.
            const reading = yield* Effect.fork(client.read(URI, BLOCK + round, 30 * BLOCK))
            yield* Effect.sleep("1 millis")
            yield* Fiber.interrupt(reading)
            yield* settled(`round ${round}: the interrupted read's pieces released`)
          }
          // The same client still reads every byte right.
          const after = yield* Stream.runCollect(client.readStream(URI, 0, bytes.length))
          expect(same(Buffer.concat(Chunk.toArray(after)), bytes)).toBe(true)
        })
      ),
    60_000
  )
})
