/**
 * Worker read-ahead against the real origin stub: a sequential reader's next pages are fetched
 * ahead (so its later reads are hits), never more than the read-ahead budget past it and never a
 * page twice; random access reads nothing ahead; a reader that jumps away leaves its read-ahead
 * counted as unused. Origin traffic from the stub's counters; every read's bytes checked. The
 * detector alone, over a target that records fills: reordered concurrent pieces are sequential,
 * and the bytes in flight stay within the budget whatever the reads (a property).
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import fc from "fast-check"
import { afterEach, describe, expect, it } from "vitest"
import * as Router from "../../src/backend/Router.js"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import type { OriginStubShape } from "../../src/origin/index.js"
import { WorkerConfig, type WorkerSettings } from "../../src/worker/config.js"
import { renderPrometheus, WorkerMetrics, WorkerStats } from "../../src/worker/metrics.js"
import { MissPath } from "../../src/worker/miss/MissPath.js"
import { ReadAhead } from "../../src/worker/miss/ReadAhead.js"
import { ReadPath } from "../../src/worker/ReadPath.js"
import { BlockStore } from "../../src/worker/store/BlockStore.js"
import { pattern } from "./support/dirBackend.js"
import { makeCleanup, tempDir } from "./support/harness.js"
import { putObjectAt, replyBytes, startOriginStub, stubStats } from "./support/originFiles.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const KiB = 1024
const MiB = 1024 * KiB
const PAGE = 64 * KiB
const PIECE = 256 * KiB
const BUDGET = MiB
const BUCKET = "ahead"
const obj = (key: string): ObjectId => ({ backend: Backend.S3, bucket: BUCKET, objectPath: key })

const SETTINGS: Partial<WorkerSettings> = {
  blockSize: 4 * MiB,
  pageSize: PAGE,
  originFetchSize: PIECE,
  readAhead: BUDGET,
  capacity: 64 * MiB,
  versionTtlMs: 600_000
}

const start = async (data: Uint8Array) => {
  const stub = await startOriginStub(cleanup, "talon-ahead-origin-")
  await putObjectAt(stub.root, BUCKET, "obj", data)
  await Effect.runPromise(stub.setFaults({ latency: { kind: "fixed", ms: 30 }, kinds: ["get"] }))
  const layer = ReadPath.layer.pipe(
    Layer.provideMerge(MissPath.layer),
    Layer.provideMerge(BlockStore.layer),
    Layer.provideMerge(Layer.mergeAll(WorkerMetrics.layer, Router.layerLocal(stub.url))),
    Layer.provideMerge(WorkerConfig.layerSettings({ cacheDirs: [await tempDir(cleanup, "talon-ahead-cache-")], ...SETTINGS }))
  )
  const runtime = ManagedRuntime.make(layer)
  cleanup.add(() => runtime.dispose())
  const reader = await runtime.runPromise(ReadPath)
  const stats = await runtime.runPromise(WorkerMetrics)
  /** Reads and checks `[offset, offset+len)`. */
  const read = async (offset: number, len: number) => {
    const out = await reader.read(obj("obj"), offset, len)
    if (out._tag === "ReadFailed") throw new Error(`read failed: ${out.reason}`)
    const got = replyBytes(out, (r) => reader.release(r))
    expect(got.length).toBe(len)
    expect(Buffer.compare(got, Buffer.from(data.subarray(offset, offset + len)))).toBe(0)
  }
  return { stub, read, stats }
}

/**
 * Until the origin has answered every GET it was sent (read-ahead fills run on after their read
 * returned). A quiet spell, not one event: the callers assert that nothing *more* was fetched, and
 * a fill waiting for its semaphore is visible neither at the origin nor in the worker's counters.
 */
const settled = async (stub: OriginStubShape) => {
  for (let quiet = 0; quiet < 3; ) {
    await new Promise((r) => setTimeout(r, 40))
    quiet = (await stubStats(stub)).inflight.get === 0 ? quiet + 1 : 0
  }
  return stubStats(stub)
}

describe("worker read-ahead", () => {
  it("a sequential reader is read ahead by at most the budget, its later reads hit, no page is fetched twice", { timeout: 60_000 }, async () => {
    const data = pattern(4 * MiB, 61)
    const { stub, read, stats } = await start(data)
    const len = 128 * KiB
    let readTo = 0
    for (; readTo < 3 * len; readTo += len) await read(readTo, len)
    let s = await settled(stub)
    expect(stats.readAheadBytes).toBeGreaterThan(0)
    // Never further ahead of the reader than the budget (rounded to whole pieces).
    expect(s.bytesServed).toBeLessThanOrEqual(readTo + BUDGET + PIECE)
    const hitsBefore = stats.hits
    for (; readTo < data.length; readTo += len) {
      await read(readTo, len)
      if (readTo % MiB === 0) {
        s = await settled(stub)
        expect(s.bytesServed).toBeLessThanOrEqual(readTo + len + BUDGET + PIECE)
      }
    }
    s = await settled(stub)
    // Every page once, whoever fetched it.
    expect(s.bytesServed).toBe(data.length)
    expect(stats.hits - hitsBefore).toBeGreaterThan(0)
    expect(stats.readAheadUnusedBytes).toBe(0)
    const text = renderPrometheus(stats, { residentBytes: 0, capacityBytes: 0, blocks: 0, openFiles: 0, dataPlane: "portable", serveMode: "pipelined", ready: true, registered: true })
    expect(text).toContain(`talon_worker_read_ahead_bytes_total ${stats.readAheadBytes}`)
    expect(text).toContain("talon_worker_read_ahead_unused_bytes_total 0")
  })

  it("random reads fetch only the pages they read", { timeout: 60_000 }, async () => {
    const data = pattern(4 * MiB, 62)
    const { stub, read, stats } = await start(data)
    // 64 KiB reads at pages visited by a stride that never lands near the last read's end.
    const pages = data.length / PAGE
    for (let i = 0; i < 24; i++) await read(((i * 23) % pages) * PAGE, PAGE)
    const s = await settled(stub)
    expect(stats.readAheadBytes).toBe(0)
    expect(s.bytesServed).toBe(24 * PAGE)
  })

  it("a reader that jumps away stops read-ahead; what it never reached is counted unused", { timeout: 60_000 }, async () => {
    const data = pattern(4 * MiB, 63)
    const { stub, read, stats } = await start(data)
    const len = 128 * KiB
    for (let at = 0; at < 4 * len; at += len) await read(at, len)
    await settled(stub)
    const ahead = stats.readAheadBytes
    expect(ahead).toBeGreaterThan(0)
    await read(3 * MiB, len)
    await read(MiB + 512 * KiB, len)
    await read(3 * MiB + 512 * KiB, len)
    await settled(stub)
    expect(stats.readAheadBytes).toBe(ahead)
    expect(stats.readAheadUnusedBytes).toBeGreaterThan(0)
    expect(stats.readAheadUnusedBytes).toBeLessThanOrEqual(ahead)
  })
})

describe("ReadAhead (the detector alone, over a recording target)", () => {
  const BS = 256 * MiB
  const PS = MiB
  const RA = 64 * MiB
  const FETCH = 4 * MiB
  /** Fills are recorded and left in flight (never settle) unless `settle`; every page is missing. */
  const recorder = (settle: boolean) => {
    const fills: Array<{ key: string; first: number; end: number }> = []
    const target = {
      missingRuns: (_k: string, first: number, end: number) => [[first, end] as const],
      fill: (id: { object: ObjectId; offset: number }, _bl: number, _os: number, first: number, end: number) => {
        fills.push({ key: `${id.object.objectPath}@${id.offset}`, first, end })
        return settle ? Promise.resolve() : new Promise<void>(() => {})
      },
      blockKey: (id: { object: ObjectId; offset: number }) => `${id.object.objectPath}@${id.offset}`
    }
    return { fills, target }
  }
  const make = (settle: boolean) => {
    const { fills, target } = recorder(settle)
    const stats = new WorkerStats()
    const ra = new ReadAhead(target, stats, { blockSize: BS, pageSize: PS, budget: RA, fetchSize: FETCH })
    const st = { size: 1024 * MiB, version: "v1" }
    const observe = (key: string, offset: number, len: number) => ra.observe(obj(key), key, st, offset, len)
    return { fills, stats, ra, observe }
  }

  it("a client's concurrent pieces arriving out of order still read as sequential", () => {
    const { fills, observe } = make(true)
    for (const at of [8, 0, 24, 16]) observe("o", at * MiB, 8 * MiB)
    expect(fills.length).toBeGreaterThan(0)
    // Pieces of the fetch size, starting where the reader is, never past the block or the budget.
    for (const f of fills) {
      expect(f.end - f.first).toBeLessThanOrEqual(FETCH / PS)
      expect(f.first * PS).toBeGreaterThanOrEqual(24 * MiB)
      expect(f.end * PS).toBeLessThanOrEqual(32 * MiB + RA)
    }
  })

  it("never more than the budget (plus one piece) in flight, whatever the reads, across objects", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ key: fc.constantFrom("a", "b", "c"), page: fc.integer({ min: 0, max: 1023 }), pages: fc.integer({ min: 1, max: 16 }), seq: fc.boolean() }), {
          maxLength: 200
        }),
        (reads) => {
          const { fills, ra, observe } = make(false)
          const at = new Map<string, number>()
          for (const r of reads) {
            const offset = r.seq ? (at.get(r.key) ?? 0) : r.page * PS
            const len = Math.min(r.pages * PS, 1024 * MiB - offset)
            if (len <= 0) continue
            observe(r.key, offset, len)
            at.set(r.key, offset + len)
          }
          const asked = fills.reduce((n, f) => n + (f.end - f.first) * PS, 0)
          expect(asked).toBe(ra.inflight)
          expect(asked).toBeLessThan(RA + FETCH)
        }
      )
    )
  })

  it("tracks at most 128 objects", () => {
    const { ra, observe } = make(true)
    for (let i = 0; i < 1000; i++) observe(`obj-${i}`, 0, MiB)
    expect(ra.streams).toBe(128)
  })
})
