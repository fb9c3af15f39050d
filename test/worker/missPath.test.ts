/**
 * The miss path at origin parallelism, against the real origin stub over HTTP: a cold read of a
 * long range becomes several concurrent origin GETs of at most the fetch size, no page fetched
 * twice, at most the per-object bound at once; concurrent readers of the same pages share one
 * fetch each; a pipelined connection's queued misses all start at once; an origin that throttles
 * (503 SlowDown), resets or cuts responses short costs retries, never a wrong byte. Origin
 * traffic is read off the stub's counters; every read's bytes are compared with the object's.
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import * as Router from "../../src/backend/Router.js"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import { encodeGetRangeFrame, Flags } from "../../src/protocol/index.js"
import type { OriginStubShape } from "../../src/origin/index.js"
import { WorkerConfig, type WorkerSettings } from "../../src/worker/config.js"
import { WorkerMetrics } from "../../src/worker/metrics.js"
import { MissPath } from "../../src/worker/miss/MissPath.js"
import { ReadPath } from "../../src/worker/ReadPath.js"
import { BlockStore } from "../../src/worker/store/BlockStore.js"
import { pattern } from "./support/dirBackend.js"
import { makeCleanup, startWorker, tempDir } from "./support/harness.js"
import { putObjectAt, replyBytes, startOriginStub, stubStats } from "./support/originFiles.js"
import { connect } from "./support/rawClient.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const KiB = 1024
const MiB = 1024 * KiB
const BUCKET = "misses"
const obj = (key: string): ObjectId => ({ backend: Backend.S3, bucket: BUCKET, objectPath: key })

const startOrigin = () => startOriginStub(cleanup, "talon-miss-origin-")
const put = (stub: OriginStubShape, key: string, bytes: Uint8Array) => putObjectAt(stub.root, BUCKET, key, bytes)
const slowGets = (stub: OriginStubShape, ms: number) => Effect.runPromise(stub.setFaults({ latency: { kind: "fixed", ms }, kinds: ["get"] }))

/** Small geometry, same shape as production: 4 MiB blocks of 64 KiB pages, GETs of at most 256 KiB (4 pages). */
const GEOMETRY: Partial<WorkerSettings> = { blockSize: 4 * MiB, pageSize: 64 * KiB, originFetchSize: 256 * KiB, readAhead: 0 }

/** ReadPath ← MissPath ← BlockStore, the Router backend talking HTTP to the stub. */
const startReader = async (stub: OriginStubShape, settings: Partial<WorkerSettings>) => {
  const layer = ReadPath.layer.pipe(
    Layer.provideMerge(MissPath.layer),
    Layer.provideMerge(BlockStore.layer),
    Layer.provideMerge(Layer.mergeAll(WorkerMetrics.layer, Router.layerLocal(stub.url))),
    Layer.provideMerge(
      WorkerConfig.layerSettings({ cacheDirs: [await tempDir(cleanup, "talon-miss-cache-")], versionTtlMs: 600_000, ...GEOMETRY, ...settings })
    )
  )
  const runtime = ManagedRuntime.make(layer)
  cleanup.add(() => runtime.dispose())
  const reader = await runtime.runPromise(ReadPath)
  const stats = await runtime.runPromise(WorkerMetrics)
  const read = async (key: string, offset: number, len: number): Promise<Buffer | { readonly _tag: string; readonly reason: string }> => {
    const out = await reader.read(obj(key), offset, len)
    if (out._tag === "ReadFailed") return { _tag: out._tag, reason: out.reason }
    return replyBytes(out, (r) => reader.release(r))
  }
  return { read, stats }
}

const expectBytes = (got: Buffer | { readonly reason: string }, want: Uint8Array) => {
  if (!Buffer.isBuffer(got)) throw new Error(`read failed: ${got.reason}`)
  expect(got.length).toBe(want.length)
  expect(Buffer.compare(got, Buffer.from(want))).toBe(0)
}

describe("miss path ← origin stub", () => {
  for (const originReceive of ["native", "reused", "stream"] as const) {
    it(`a cold 1 MiB read is page-aligned GETs of at most the fetch size, concurrent, no page twice (origin bodies: ${originReceive})`, { timeout: 60_000 }, async () => {
      const stub = await startOrigin()
      const data = pattern(4 * MiB, 51)
      await put(stub, "long", data)
      await slowGets(stub, 150)
      const { read, stats } = await startReader(stub, { originReceive })
      // [100 KiB, 1124 KiB) covers pages 1..17: cut at multiples of 4 pages, [1,4) [4,8) [8,12) [12,16) [16,18).
      expectBytes(await read("long", 100 * KiB, MiB), data.subarray(100 * KiB, 1124 * KiB))
      const s = await stubStats(stub)
      expect(s.requests.get).toBe(5)
      expect(s.bytesServed).toBe(17 * 64 * KiB)
      expect(s.peakInflight.get).toBe(5)
      expect(stats.originFetches).toBe(5)
      expect(stats.originBytes).toBe(17 * 64 * KiB)
      // Natively, the bodies past what came with each head were received off the JS thread; otherwise none.
      if (originReceive === "native") expect(stats.originNativeBytes).toBeGreaterThan(0)
      else expect(stats.originNativeBytes).toBe(0)
      // Warm now: the same range again costs the origin nothing.
      expectBytes(await read("long", 100 * KiB, MiB), data.subarray(100 * KiB, 1124 * KiB))
      expect((await stubStats(stub)).requests.get).toBe(5)
    })
  }

  it("whole blocks larger than a staging buffer are received natively a buffer at a time, right bytes", { timeout: 60_000 }, async () => {
    const stub = await startOrigin()
    const data = pattern(9 * MiB + 123, 57)
    await put(stub, "blocks", data)
    // 6 MiB blocks, no pages: each unit spans two 4 MiB staging buffers, hashed as it streams.
    const { read, stats } = await startReader(stub, { blockSize: 6 * MiB, pageSize: 0, originReceive: "native" })
    expectBytes(await read("blocks", 5 * MiB, 2 * MiB), data.subarray(5 * MiB, 7 * MiB))
    expectBytes(await read("blocks", 0, data.length), data)
    expect(stats.originNativeBytes).toBeGreaterThan(0)
    expect(stats.originBytes).toBe(data.length)
  })

  it("one object's GETs in flight stay within originConcurrencyPerObject; other objects are not held back", { timeout: 60_000 }, async () => {
    const stub = await startOrigin()
    const a = pattern(2 * MiB, 52)
    const b = pattern(2 * MiB, 53)
    await put(stub, "a", a)
    await put(stub, "b", b)
    await slowGets(stub, 150)
    const { read } = await startReader(stub, { originConcurrencyPerObject: 2, originConcurrency: 16 })
    expectBytes(await read("a", 0, 2 * MiB), a)
    const one = await stubStats(stub)
    expect(one.requests.get).toBe(8)
    expect(one.peakInflight.get).toBe(2)
    await Effect.runPromise(stub.resetStats())
    const [ga, gb] = await Promise.all([read("a", 0, 2 * MiB), read("b", 0, 2 * MiB)])
    expectBytes(ga, a)
    expectBytes(gb, b)
    const two = await stubStats(stub)
    // "a" is warm; "b" alone fetched, two at a time.
    expect(two.requests.get).toBe(8)
    expect(two.peakInflight.get).toBe(2)
  })

  it("concurrent overlapping readers of a cold range fetch each page once", { timeout: 60_000 }, async () => {
    const stub = await startOrigin()
    const data = pattern(4 * MiB, 54)
    await put(stub, "shared", data)
    await slowGets(stub, 200)
    const { read } = await startReader(stub, {})
    const ranges = Array.from({ length: 24 }, (_, i) => [(i % 6) * 200 * KiB + i * 7, 700 * KiB + i * 13] as const)
    const got = await Promise.all(ranges.map(([o, l]) => read("shared", o, l)))
    got.forEach((g, i) => expectBytes(g, data.subarray(ranges[i]![0], ranges[i]![0] + ranges[i]![1])))
    const end = Math.max(...ranges.map(([o, l]) => o + l))
    const pages = Math.ceil(end / (64 * KiB))
    const s = await stubStats(stub)
    expect(s.bytesServed).toBe(pages * 64 * KiB)
    // At most one GET per 4-page piece (a piece may be fetched as smaller runs, never twice).
    expect(s.requests.get).toBeLessThanOrEqual(pages)
    expect(s.requests.get).toBeGreaterThanOrEqual(Math.ceil(pages / 4))
  })

  for (const failureMode of ["503", "reset", "truncate"] as const) {
    it(`an origin failing GETs (${failureMode}) costs retries, never a wrong byte`, { timeout: 120_000 }, async () => {
      const stub = await startOrigin()
      const data = pattern(4 * MiB, 55)
      await put(stub, "flaky", data)
      await Effect.runPromise(stub.setFaults({ failureRate: 0.3, failureMode, seed: 7, latency: { kind: "fixed", ms: 20 }, kinds: ["get"] }))
      const { read, stats } = await startReader(stub, { readAhead: 2 * MiB })
      // Sequential 512 KiB reads (read-ahead joins in), each retried until it succeeds; every success checked.
      for (let off = 0; off < data.length; off += 512 * KiB) {
        for (let attempt = 0; ; attempt++) {
          const got = await read("flaky", off, 512 * KiB)
          if (Buffer.isBuffer(got)) {
            expectBytes(got, data.subarray(off, off + 512 * KiB))
            break
          }
          expect(got._tag).toBe("ReadFailed")
          expect(attempt).toBeLessThan(20)
        }
      }
      const s = await stubStats(stub)
      expect(s.faults.failed + s.faults.reset).toBeGreaterThan(0)
      // Retried GETs cost bytes, but nothing unread was fetched twice beyond what failed.
      expect(s.bytesServed).toBeGreaterThanOrEqual(data.length)
      // The default receive: most body bytes came in off the JS thread, and every one was counted.
      expect(stats.originNativeBytes).toBeGreaterThan(0)
      expect(stats.originBytes).toBeGreaterThanOrEqual(data.length)
    })
  }
})

describe("serve loop: misses queued on one connection", () => {
  for (const serveMode of ["pipelined", "multiplexed"] as const) {
    it(`${serveMode}: the fills of every queued request start at once; every reply has its bytes (in request order when pipelined)`, { timeout: 60_000 }, async () => {
      const stub = await startOrigin()
      const data = pattern(4 * MiB, 56)
      await put(stub, "queued", data)
      await slowGets(stub, 300)
      const cache = await tempDir(cleanup, "talon-miss-cache-")
      const { worker } = await startWorker(cleanup, Router.layerLocal(stub.url), {
        cacheDirs: [cache],
        ...GEOMETRY,
        serveMode,
        versionTtlMs: 600_000
      })
      const c = await connect(worker.dataPort)
      cleanup.add(async () => c.close())
      // Six requests in one write, each for its own cold 256 KiB piece (one GET each).
      const reqs = Array.from({ length: 6 }, (_, i) => ({ id: i + 1, offset: i * 512 * KiB, len: 256 * KiB }))
      c.send(Buffer.concat(reqs.map((r) => encodeGetRangeFrame(r.id, { object: obj("queued"), offset: r.offset, len: r.len }))))
      const replies = []
      for (let i = 0; i < reqs.length; i++) replies.push(await c.next())
      if (serveMode === "pipelined") expect(replies.map((f) => f.header.requestId)).toEqual(reqs.map((r) => r.id))
      for (const f of replies) {
        expect(f.header.flags & Flags.Error).toBe(0)
        const r = reqs.find((q) => q.id === f.header.requestId)!
        expect(Buffer.compare(Buffer.from(f.payload), data.subarray(r.offset, r.offset + r.len))).toBe(0)
      }
      const s = await stubStats(stub)
      expect(s.requests.get).toBe(6)
      // Had the first miss held back the others, at most one GET would have been in flight at a time.
      expect(s.peakInflight.get).toBe(6)
    })
  }
})
