/**
 * TalonClient against a real coordinator (real sockets) and small fake workers
 * that answer GetRange from memory: placement, segment planning, streaming,
 * replica fallback, refresh-and-retry, short bodies, pipelining, typed errors.
 */
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Either, Stream, TestClock, type Scope } from "effect"
import { ControlChannel } from "../../src/transport/ControlChannel.js"
import { createTalonClient, makeTalonClient, type RawRead, type TalonClientShape } from "../../src/client/TalonClient.js"
import { SlabPool } from "../../src/client/SlabPool.js"
import { type FetchResult, WorkerPool } from "../../src/client/WorkerPool.js"
import type { TalonClientOptions } from "../../src/client/config.js"
import type { CoordinatorOptions } from "../../src/coordinator/config.js"
import { NodeRole, type BlockId } from "../../src/core/ids.js"
import { objectIdFromUri } from "../../src/core/objectId.js"
import { Maglev } from "../../src/placement/index.js"
import { encodeControlFrame, type ControlMessage } from "../../src/protocol/index.js"
import type { MemoryObject } from "../coordinator/fixtures/memoryBackend.js"
import { testCoordinator } from "../coordinator/fixtures/harness.js"
import { FakeWorker } from "./fixtures/fakeWorker.js"
import { scopedFakeWorker } from "./fixtures/registeredWorker.js"
import { scriptedControl } from "./fixtures/scriptedControl.js"
import { eventually } from "../support/eventually.js"

const BLOCK = 64 * 1024
const data = randomBytes(5 * BLOCK + 1234)
const store = new Map<string, MemoryObject>([
  ["/s3/bucket/big.bin", { bytes: data, version: "v1" }],
  ["/s3/bucket/small.txt", { bytes: Buffer.from("hello talon\n"), version: "v2" }],
  ["/az/box/empty", { bytes: new Uint8Array(0), version: "v3" }]
])
const URI = "s3://bucket/big.bin"

interface Cluster {
  readonly client: TalonClientShape
  readonly workers: ReadonlyArray<FakeWorker>
  readonly register: (w: FakeWorker, id: string) => Effect.Effect<void, unknown>
}

/** A coordinator, `n` fake workers registered with it, and a client with a 64 KiB block size. */
const withCluster = <A, E>(
  n: number,
  body: (cluster: Cluster) => Effect.Effect<A, E, Scope.Scope>,
  clientOptions: Partial<TalonClientOptions> = {},
  coordinatorOptions: Partial<CoordinatorOptions> = { heartbeatIntervalMs: 60_000 }
) =>
  testCoordinator(
    coordinatorOptions,
    (c) =>
      Effect.gen(function* () {
        const control = yield* ControlChannel.make(c.controlAddress)
        const workers = yield* Effect.acquireRelease(
          Effect.promise(() => Promise.all(Array.from({ length: n }, () => FakeWorker.start(store)))),
          (ws) => Effect.promise(() => Promise.all(ws.map((w) => w.stop())))
        )
        const register = (w: FakeWorker, id: string) =>
          Effect.asVoid(control.request({ _tag: "Register", node: { id, address: w.address, role: NodeRole.Worker } }))
        for (const [i, w] of workers.entries()) yield* register(w, `worker-${i}`)
        const client = yield* makeTalonClient({
          coordinator: c.controlAddress,
          blockSize: BLOCK,
          maxRequestBytes: 16 * 1024,
          requestTimeoutMs: 5000,
          ...clientOptions
        })
        return yield* body({ client, workers, register })
      }),
    store
  )

const blockOf = (offset: number, version = "v1"): BlockId => {
  const object = Either.getOrThrow(objectIdFromUri(URI))
  return { object, offset: Math.floor(offset / BLOCK) * BLOCK, blockSize: BLOCK, version }
}

describe("TalonClient reads", () => {
  it.live("whole object, ranges across blocks, EOF clamping, stream and buffer agree with the origin bytes", () =>
    withCluster(3, ({ client, workers }) =>
      Effect.gen(function* () {
        const info = yield* client.stat(URI)
        expect(info).toMatchObject({ size: data.length, version: "v1" })
        expect(Buffer.from(yield* client.read(URI, 0, data.length)).equals(data)).toBe(true)
        const cases: Array<[number, number]> = [
          [0, 1],
          [BLOCK - 3, 10],
          [BLOCK + 17, 3 * BLOCK + 5],
          [data.length - 10, 10],
          [data.length - 10, 1000], // clamped at the end
          [data.length, 5], // empty at EOF
          [123, 0]
        ]
        for (const [offset, length] of cases) {
          const expected = data.subarray(offset, Math.min(offset + length, data.length))
          const got = yield* client.read(URI, offset, length)
          expect(Buffer.from(got).equals(expected), `${offset}+${length}`).toBe(true)
          const pieces = yield* Stream.runCollect(client.readStream(URI, offset, length))
          expect(Buffer.concat(Chunk.toArray(pieces)).equals(expected), `stream ${offset}+${length}`).toBe(true)
          for (const p of pieces) expect(p.length).toBeLessThanOrEqual(16 * 1024)
        }
        // Every request went to the block's Maglev primary (all workers healthy), never crossed a block,
        // and never asked for more than the request cap.
        const members = yield* client.members()
        const placement = Maglev.build(members)
        for (const [i, w] of workers.entries()) {
          for (const r of w.served) {
            expect(r.path).toBe("/s3/bucket/big.bin")
            expect(placement.primary(blockOf(r.offset))).toBe(`worker-${i}`)
            expect(Math.floor(r.offset / BLOCK)).toBe(Math.floor((r.offset + r.len - 1) / BLOCK))
            expect(r.len).toBeLessThanOrEqual(16 * 1024)
          }
        }
        expect(workers.filter((w) => w.served.length > 0).length).toBeGreaterThan(1)
      })
    )
  )

  it.live("a replica that is down is skipped: the next-ranked replica serves the same bytes", () =>
    withCluster(3, ({ client, workers }) =>
      Effect.gen(function* () {
        yield* client.members()
        yield* Effect.promise(() => workers[0]!.stop())
        const got = yield* client.read(URI, 0, data.length)
        expect(Buffer.from(got).equals(data)).toBe(true)
        expect(workers[0]!.served).toHaveLength(0)
      })
    )
  )

  it.live("when every cached replica fails, membership is refreshed and the read retried once", () =>
    withCluster(
      2,
      ({ client, workers, register }) =>
        Effect.gen(function* () {
          // Cache a membership of the two workers, then lose both and bring up a third.
          expect((yield* client.members()).map((n) => n.id)).toEqual(["worker-0", "worker-1"])
          const fresh = yield* scopedFakeWorker(store)
          yield* register(fresh, "worker-2")
          for (const w of workers) yield* Effect.promise(() => w.stop())
          // The coordinator still lists the dead ones (no expiry in this test); the client tries
          // its cached replicas (both dead), refreshes, and finds worker-2 among the new owners.
          const got = yield* client.read(URI, BLOCK, BLOCK)
          expect(Buffer.from(got).equals(data.subarray(BLOCK, 2 * BLOCK))).toBe(true)
          expect(fresh.served.length).toBeGreaterThan(0)
        }),
      { membershipTtlMs: 60_000, replicas: 3 }
    )
  )

  it.live("a body cut short closes that connection; the client reconnects and gets the right bytes", () =>
    withCluster(1, ({ client, workers }) =>
      Effect.gen(function* () {
        workers[0]!.mode = { kind: "truncate", times: 1 }
        const got = yield* client.read(URI, 100, 5000)
        expect(Buffer.from(got).equals(data.subarray(100, 5100))).toBe(true)
        expect(workers[0]!.connections).toBeGreaterThanOrEqual(2)
      })
    )
  )

  it.live("requests are pipelined on one connection per worker", () =>
    withCluster(
      1,
      ({ client, workers }) =>
        Effect.gen(function* () {
          workers[0]!.replyDelayMs = 30
          const got = yield* client.read(URI, 0, 2 * BLOCK)
          expect(Buffer.from(got).equals(data.subarray(0, 2 * BLOCK))).toBe(true)
          expect(workers[0]!.connections).toBe(1)
          expect(workers[0]!.maxInFlightPerConnection).toBeGreaterThan(1)
        }),
      { connectionsPerWorker: 1, parallelism: 8 }
    )
  )

  it.live("readStream keeps at most its window (`readAheadBytes`, at least `parallelism` pieces) ahead of a consumer that has not pulled", () =>
    withCluster(
      1,
      ({ client, workers }) =>
        Effect.gen(function* () {
          // Pull only the first piece, then stop: far fewer than all 20 pieces may have been requested.
          const first = Chunk.unsafeGet(yield* client.readStream(URI, 0, 20 * 16 * 1024).pipe(Stream.take(1), Stream.runCollect), 0)
          expect(Buffer.from(first).equals(data.subarray(0, first.length))).toBe(true)
          yield* Effect.sleep("100 millis")
          // The window is 32 KiB in pieces of an eighth of it: 8 pieces (of 80), and one or two more as the first was taken.
          expect(first.length).toBe(4 * 1024)
          expect(workers[0]!.served.length).toBeLessThanOrEqual(8 + 2)
        }),
      { parallelism: 2, readAheadBytes: 2 * 16 * 1024 }
    )
  )
})

describe("TalonClient errors and metadata", () => {
  it.live("a worker's error frame reaches the caller verbatim", () =>
    withCluster(2, ({ client, workers }) =>
      Effect.gen(function* () {
        const message = "origin refused: object /s3/bucket/big.bin is locked (HTTP 423)"
        for (const w of workers) w.mode = { kind: "error", message }
        const err = yield* Effect.flip(client.read(URI, 0, 10))
        expect(err._tag).toBe("ReadFailed")
        if (err._tag === "ReadFailed") {
          expect(err.detail).toBe(message)
          expect(err.message).toContain(message)
          // Both replicas tried, before and after the membership refresh.
          expect(err.attempts).toHaveLength(4)
        }
      })
    )
  )

  it.live("every request names the stat'ed version; a VersionMismatch stats again and rereads, then VersionChanged", () =>
    withCluster(2, ({ client, workers }) =>
      Effect.gen(function* () {
        const key = "/s3/bucket/moving.bin"
        const a = randomBytes(3 * BLOCK + 10)
        const b = randomBytes(2 * BLOCK + 99)
        store.set(key, { bytes: a, version: "a" })
        const first = yield* client.read("s3://bucket/moving.bin", 0, 4 * BLOCK)
        expect(Buffer.from(first).equals(a)).toBe(true)
        expect(workers.flatMap((w) => w.served.filter((s) => s.path === key)).every((s) => s.version === "a")).toBe(true)
        // Overwritten (and smaller); the client's stat cache still says "a": the workers refuse it,
        // the client stats again and reads "b" whole, never a mix.
        store.set(key, { bytes: b, version: "b" })
        const second = yield* client.read("s3://bucket/moving.bin", 0, 4 * BLOCK)
        expect(Buffer.from(second).equals(b)).toBe(true)
        expect((yield* client.stat("s3://bucket/moving.bin")).version).toBe("b")
        // A version the workers keep refusing: three pinned attempts, then the typed error.
        for (const w of workers) {
          w.originVersion = "c"
          w.served.length = 0
        }
        const err = yield* Effect.flip(client.read("s3://bucket/moving.bin", 0, 10))
        expect(err._tag).toBe("VersionChanged")
        if (err._tag === "VersionChanged") {
          expect(err.attempts).toBe(3)
          expect(err.message).toContain("version mismatch: expected b, found c")
        }
        expect(workers.reduce((n, w) => n + w.served.length, 0)).toBe(3)
        // A stream (whose earlier bytes may be with the consumer already) is not reread: it fails typed.
        const streamed = yield* Effect.flip(Stream.runCollect(client.readStream("s3://bucket/moving.bin", 0, 10)))
        expect(streamed._tag).toBe("VersionChanged")
        store.delete(key)
      })
    )
  )

  it.live("no workers → NoWorkers naming the coordinator; unknown object → ObjectNotFound; bad URI → InvalidRequest", () =>
    withCluster(0, ({ client }) =>
      Effect.gen(function* () {
        const none = yield* Effect.flip(client.read(URI, 0, 10))
        expect(none._tag).toBe("NoWorkers")
        expect(none.message).toContain(client.options.coordinator)
        const missing = yield* Effect.flip(client.read("s3://bucket/missing", 0, 10))
        expect(missing._tag).toBe("ObjectNotFound")
        expect(missing.message).toContain("s3://bucket/missing")
        const bad = yield* Effect.flip(client.read("s3://bucket/../etc", 0, 10))
        expect(bad._tag).toBe("InvalidRequest")
        const negative = yield* Effect.flip(client.read(URI, -1, 10))
        expect(negative._tag).toBe("InvalidRequest")
        // An empty object reads as empty without asking any worker.
        expect((yield* client.read("az://box/empty", 0, 100)).length).toBe(0)
      })
    )
  )

  it.live("stat is cached briefly; list accepts URI and path prefixes", () =>
    withCluster(
      0,
      ({ client }) =>
        Effect.gen(function* () {
          expect(yield* client.stat("/s3/bucket/small.txt")).toMatchObject({ size: 12, version: "v2" })
          const entries = yield* client.list("s3://bucket/")
          expect(entries).toEqual([
            { path: "/s3/bucket/big.bin", size: data.length },
            { path: "/s3/bucket/small.txt", size: 12 }
          ])
          expect(yield* client.list("/s3/bucket/sm")).toEqual([{ path: "/s3/bucket/small.txt", size: 12 }])
          const bad = yield* Effect.flip(client.list("nonsense"))
          expect(bad._tag).toBe("InvalidRequest")
        }),
      { statTtlMs: 60_000 }
    )
  )

  it.live("the coordinator being unreachable is a CoordinatorUnavailable naming its address", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const client = yield* makeTalonClient({ coordinator: "127.0.0.1:1", connectTimeoutMs: 500 })
        const err = yield* Effect.flip(client.stat(URI))
        expect(err._tag).toBe("CoordinatorUnavailable")
        expect(err.message).toContain("127.0.0.1:1")
      })
    )
  )
})



describe("TalonClient when the coordinator goes away", () => {
  it.live("reads keep working on the cached membership (stale after its TTL) and stat cache", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const worker = yield* scopedFakeWorker(store)
        // A one-shot coordinator: answers until it is stopped, then stops listening for good.
        const { address, stop } = yield* scriptedControl((message, requestId, socket) => {
          const reply: ControlMessage =
            message._tag === "MembershipQuery"
              ? { _tag: "MembershipList", nodes: [{ id: "only", address: worker.address, role: NodeRole.Worker }] }
              : { _tag: "ObjectStat", size: data.length, version: "v1" }
          socket.write(encodeControlFrame(requestId, reply))
        })
        const client = yield* makeTalonClient({
          coordinator: address,
          blockSize: BLOCK,
          membershipTtlMs: 1,
          statTtlMs: 60_000,
          connectTimeoutMs: 500
        })
        expect(Buffer.from(yield* client.read(URI, 0, 1000)).equals(data.subarray(0, 1000))).toBe(true)
        yield* Effect.promise(stop)
        yield* Effect.sleep("10 millis")
        // The membership TTL has passed and the coordinator is gone: the stale membership serves.
        expect(Buffer.from(yield* client.read(URI, BLOCK, 1000)).equals(data.subarray(BLOCK, BLOCK + 1000))).toBe(true)
        // An explicit refresh does report the outage.
        const err = yield* Effect.flip(client.members(true))
        expect(err._tag).toBe("CoordinatorUnavailable")
      })
    )
  )
})

describe("createTalonClient (promise facade)", () => {
  it.live("read, readInto, readStream as an async iterable, stat and list, then close", () =>
    withCluster(2, ({ client }) =>
      Effect.promise(async () => {
        const facade = createTalonClient({ coordinator: client.options.coordinator, blockSize: BLOCK })
        try {
          expect(Buffer.from(await facade.read(URI, 10, 2 * BLOCK)).equals(data.subarray(10, 10 + 2 * BLOCK))).toBe(true)
          const dest = new Uint8Array(BLOCK + 3)
          const into = await facade.readInto(URI, data.length - 100, dest)
          expect(into.buffer).toBe(dest.buffer)
          expect(Buffer.from(into).equals(data.subarray(data.length - 100))).toBe(true)
          const untouched = new Uint8Array(8).fill(7)
          await expect(facade.readInto("s3://bucket/missing", 0, untouched)).rejects.toMatchObject({ _tag: "ObjectNotFound" })
          expect([...untouched]).toEqual([7, 7, 7, 7, 7, 7, 7, 7])
          const pieces: Array<Uint8Array> = []
          for await (const piece of facade.readStream(URI, 0, data.length)) pieces.push(piece)
          expect(Buffer.concat(pieces).equals(data)).toBe(true)
          expect(await facade.stat("s3://bucket/small.txt")).toMatchObject({ size: 12 })
          expect((await facade.list("/s3/bucket/")).map((e) => e.path)).toEqual(["/s3/bucket/big.bin", "/s3/bucket/small.txt"])
          await expect(facade.read("s3://bucket/missing", 0, 1)).rejects.toMatchObject({ _tag: "ObjectNotFound" })
        } finally {
          await facade.close()
        }
      })
    )
  )
})

describe("TalonClient stat cache", () => {
  // On TestClock: the stat TTL is the client's Clock, so half of it passes with TestClock.adjust, not a sleep.
  it.effect("concurrent stats share one StatObject; past half the TTL the cached answer is served while one refresh runs", () =>
    Effect.scoped(
      Effect.gen(function* () {
        // A coordinator that counts StatObject requests and answers them only when told to.
        let asked = 0
        let version = "v1"
        const held: Array<() => void> = []
        const control = yield* scriptedControl((message, requestId, socket) => {
          if (message._tag !== "StatObject") return
          asked++
          const answer = version
          held.push(() => socket.write(encodeControlFrame(requestId, { _tag: "ObjectStat", size: data.length, version: answer })))
        })
        const release = () => {
          for (const answer of held.splice(0)) answer()
        }
        const waitAsked = (n: number) => eventually(Effect.sync(() => expect(asked).toBeGreaterThanOrEqual(n)), { what: `StatObject asked ${n} times` })
        const client = yield* makeTalonClient({
          coordinator: control.address,
          statTtlMs: 3000
        })
        const object = Either.getOrThrow(objectIdFromUri(URI))

        const first = yield* Effect.fork(Effect.all(Array.from({ length: 5 }, () => client.stat(URI)), { concurrency: "unbounded" }))
        yield* waitAsked(1)
        release()
        const infos = yield* first.await.pipe(Effect.flatten)
        expect(infos.map((i) => i.version)).toEqual(Array(5).fill("v1"))
        expect(asked).toBe(1)
        expect(client.cachedStat(object)?.version).toBe("v1")

        // Past half the TTL: the cached answer comes at once (the refresh is still held), and one refresh went out.
        yield* TestClock.adjust("1499 millis")
        expect(client.cachedStat(object)?.version).toBe("v1")
        expect(asked).toBe(1)
        yield* TestClock.adjust("1 millis")
        version = "v2"
        expect((yield* client.stat(URI)).version).toBe("v1")
        expect(client.cachedStat(object)?.version).toBe("v1")
        yield* waitAsked(2)
        expect(asked).toBe(2)
        release()
        yield* eventually(Effect.sync(() => expect(client.cachedStat(object)?.version).toBe("v2")), { what: "the refreshed stat cached" })
        expect((yield* client.stat(URI)).version).toBe("v2")
        expect(asked).toBe(2)
        // The refreshed stat lives a full TTL from its refresh, then is asked again.
        yield* TestClock.adjust("3000 millis")
        expect(client.cachedStat(object)).toBeUndefined()
      })
    )
  )
})

describe("zero-copy reads (readRaw, WorkerPool.fetch)", () => {
  const joined = (r: RawRead) => {
    if (!r.ok) throw new Error(r.error.message)
    const out = Buffer.concat(r.payloads.flatMap((p) => p.views))
    for (const p of r.payloads) p.release()
    return out
  }

  it.live("readRaw returns the bytes of any range (within and across blocks, EOF-clamped) as reply views", () =>
    withCluster(2, ({ client }) =>
      Effect.gen(function* () {
        const info = yield* client.stat(URI)
        const rawRead = (offset: number, length: number) =>
          Effect.async<RawRead>((resume) => Effect.sync(client.readRaw(info, offset, length, (r) => resume(Effect.succeed(r)))))
        for (const [offset, length] of [[0, 100], [BLOCK - 10, 30], [0, data.length], [data.length - 5, 100], [3 * BLOCK + 7, 16 * 1024 + 3]] as const) {
          const got = joined(yield* rawRead(offset, length))
          expect(got.equals(data.subarray(offset, Math.min(offset + length, data.length)))).toBe(true)
        }
        expect(client.cachedStat(info.object)).toEqual(info)
      })
    )
  )

  /** One connection to a fake worker through 8 small slabs, and a raw fetch that hands out the pool's payloads. */
  const slabbedPool = Effect.gen(function* () {
    const worker = yield* scopedFakeWorker(store)
    const slabs = new SlabPool(64 * 1024, 8)
    const pool = new WorkerPool({ connectionsPerWorker: 1, requestTimeout: "5 seconds", connectTimeout: "1 second", maxRequestBytes: BLOCK, slabs })
    yield* Effect.addFinalizer(() => Effect.sync(() => pool.close()))
    const object = Either.getOrThrow(objectIdFromUri(URI))
    const fetch = (offset: number, length: number) =>
      Effect.async<FetchResult>((resume) => Effect.sync(pool.fetch(worker.address, object, offset, length, (r) => resume(Effect.succeed(r)))))
    return { worker, slabs, pool, object, fetch }
  })

  it.live("a held payload is never overwritten by later reads; released slabs are reused, so the pool stays small", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { worker, slabs, pool, object, fetch } = yield* slabbedPool

        const held = yield* fetch(1000, 40_000)
        if (!held.ok) throw new Error(held.error.message)
        for (let i = 0; i < 200; i++) {
          const offset = (i * 7919) % (data.length - 30_000)
          const r = yield* fetch(offset, 30_000)
          if (!r.ok) throw new Error(r.error.message)
          expect(Buffer.concat(r.payload.views).equals(data.subarray(offset, offset + 30_000))).toBe(true)
          r.payload.release()
        }
        // 200 × 30 KB went through 64 KiB slabs; with reuse only a handful were ever allocated.
        expect(slabs.allocated).toBeLessThan(10)
        expect(Buffer.concat(held.payload.views).equals(data.subarray(1000, 41_000))).toBe(true)
        held.payload.release()
        // The Effect wrapper hands out a copy the caller owns.
        const copy = yield* pool.getRange(worker.address, object, 5, 60_000)
        expect(Buffer.from(copy).equals(data.subarray(5, 60_005))).toBe(true)
      })
    )
  )

  it.live("a disowned payload's bytes are never overwritten, even when slabs it shares are released by others", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { slabs, fetch } = yield* slabbedPool

        // Small replies share slabs with their neighbours, which are released right away.
        const kept: Array<readonly [number, ReadonlyArray<Uint8Array>]> = []
        for (let i = 0; i < 100; i++) {
          const offset = (i * 7919) % (data.length - 20_000)
          const r = yield* fetch(offset, 3000 + (i % 7) * 1000)
          if (!r.ok) throw new Error(r.error.message)
          if (i % 3 === 0) kept.push([offset, r.payload.disown()])
          else r.payload.release()
        }
        for (const [offset, views] of kept) {
          const got = Buffer.concat(views)
          expect(got.equals(data.subarray(offset, offset + got.length))).toBe(true)
        }
        // Released slabs not shared with a kept payload are still reused.
        expect(slabs.allocated).toBeLessThan(kept.length)
      })
    )
  )
})
