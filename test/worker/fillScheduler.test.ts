/**
 * The fill scheduler (one actor per block in flight) against the real origin stub over HTTP:
 * concurrent misses for one block or page join one origin fetch, the origin never sees more
 * than `originConcurrency` GETs at once, and a failed fetch fails every joiner with the typed
 * error while the next read fetches again. Origin traffic is read off the stub's own counters;
 * every read's bytes are compared with the object's.
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import * as Router from "../../src/backend/Router.js"
import { defaultPolicy } from "../../src/backend/policy.js"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import type { OriginStubShape } from "../../src/origin/index.js"
import { WorkerConfig, type WorkerSettings } from "../../src/worker/config.js"
import { WorkerMetrics } from "../../src/worker/metrics.js"
import { MissPath } from "../../src/worker/miss/MissPath.js"
import { ReadPath } from "../../src/worker/ReadPath.js"
import { BlockStore } from "../../src/worker/store/BlockStore.js"
import { pattern } from "./support/dirBackend.js"
import { makeCleanup, tempDir } from "./support/harness.js"
import { putObjectAt, replyBytes, startOriginStub, stubStats } from "./support/originFiles.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const KiB = 1024
const BUCKET = "fills"
const obj = (key: string): ObjectId => ({ backend: Backend.S3, bucket: BUCKET, objectPath: key })

const startOrigin = () => startOriginStub(cleanup, "talon-fill-origin-")
const put = (stub: OriginStubShape, key: string, bytes: Uint8Array) => putObjectAt(stub.root, BUCKET, key, bytes)
const stats = stubStats

/** ReadPath ← MissPath (the fill scheduler) ← BlockStore, with the Router backend talking HTTP to the stub. */
const startReader = async (stub: OriginStubShape, settings: Partial<WorkerSettings>) => {
  const layer = ReadPath.layer.pipe(
    Layer.provideMerge(MissPath.layer),
    Layer.provideMerge(BlockStore.layer),
    Layer.provideMerge(Layer.mergeAll(WorkerMetrics.layer, Router.layerLocal(stub.url))),
    Layer.provideMerge(WorkerConfig.layerSettings({ cacheDirs: [await tempDir(cleanup, "talon-fill-cache-")], versionTtlMs: 60_000, ...settings }))
  )
  const runtime = ManagedRuntime.make(layer)
  cleanup.add(() => runtime.dispose())
  const reader = await runtime.runPromise(ReadPath)
  /** The bytes read through the worker, or the typed failure's tag and reason. */
  const read = async (key: string, offset: number, len: number): Promise<Buffer | { readonly _tag: string; readonly reason: string }> => {
    const out = await reader.read(obj(key), offset, len)
    if (out._tag === "ReadFailed") return { _tag: out._tag, reason: out.reason }
    return replyBytes(out, (r) => reader.release(r))
  }
  return { read }
}

const expectBytes = (got: Buffer | { readonly reason: string }, want: Uint8Array) => {
  if (!Buffer.isBuffer(got)) throw new Error(`read failed: ${got.reason}`)
  expect(got.length).toBe(want.length)
  expect(Buffer.compare(got, Buffer.from(want))).toBe(0)
}

/** Ranges spread over `[0, size)`, each at least one byte. */
const ranges = (n: number, size: number, seed: number): Array<readonly [number, number]> =>
  Array.from({ length: n }, (_, i) => {
    const offset = ((i * 7919 + seed * 104729) % size) >>> 0
    const len = 1 + ((i * 6007 + seed) % (size - offset))
    return [offset, len] as const
  })

describe("fill scheduler ← origin stub", () => {
  it("32 concurrent misses for one whole block join one origin GET", { timeout: 60_000 }, async () => {
    const stub = await startOrigin()
    const data = pattern(256 * KiB, 41)
    await put(stub, "one-block", data)
    // Slow GETs, so the misses certainly arrive while the first fetch is in flight.
    await Effect.runPromise(stub.setFaults({ latency: { kind: "fixed", ms: 300 }, kinds: ["get"] }))
    const { read } = await startReader(stub, { blockSize: 256 * KiB, pageSize: 0 })
    const rs = ranges(32, data.length, 1)
    const got = await Promise.all(rs.map(([o, l]) => read("one-block", o, l)))
    got.forEach((g, i) => expectBytes(g, data.subarray(rs[i]![0], rs[i]![0] + rs[i]![1])))
    const s = await stats(stub)
    expect(s.requests.get).toBe(1)
    expect(s.bytesServed).toBe(data.length)
  })

  it("concurrent misses over a paged block fetch every page exactly once", { timeout: 60_000 }, async () => {
    const stub = await startOrigin()
    const data = pattern(512 * KiB, 42)
    await put(stub, "paged", data)
    await Effect.runPromise(stub.setFaults({ latency: { kind: "fixed", ms: 200 }, kinds: ["get"] }))
    const { read } = await startReader(stub, { blockSize: 512 * KiB, pageSize: 32 * KiB })
    const rs = ranges(48, data.length, 2)
    const got = await Promise.all(rs.map(([o, l]) => read("paged", o, l)))
    got.forEach((g, i) => expectBytes(g, data.subarray(rs[i]![0], rs[i]![0] + rs[i]![1])))
    expectBytes(await read("paged", 0, data.length), data)
    const s = await stats(stub)
    // Each of the 16 pages came from the origin once, whichever runs the misses were grouped in.
    expect(s.bytesServed).toBe(data.length)
    expect(s.requests.get).toBeLessThanOrEqual(16)
  })

  it("the origin never sees more than originConcurrency GETs at once (and sees more when allowed)", { timeout: 120_000 }, async () => {
    const stub = await startOrigin()
    const objects = Array.from({ length: 12 }, (_, i) => [`obj-${i}`, pattern(64 * KiB, 100 + i)] as const)
    for (const [key, bytes] of objects) await put(stub, key, bytes)
    await Effect.runPromise(stub.setFaults({ latency: { kind: "fixed", ms: 150 }, kinds: ["get"] }))
    const peakWith = async (originConcurrency: number) => {
      await Effect.runPromise(stub.resetStats())
      const { read } = await startReader(stub, { blockSize: 64 * KiB, pageSize: 0, originConcurrency })
      const got = await Promise.all(objects.map(([key]) => read(key, 0, 64 * KiB)))
      got.forEach((g, i) => expectBytes(g, objects[i]![1]))
      const s = await stats(stub)
      expect(s.requests.get).toBe(objects.length)
      return s.peakInflight.get
    }
    const bounded = await peakWith(2)
    expect(bounded).toBeGreaterThanOrEqual(1)
    expect(bounded).toBeLessThanOrEqual(2)
    expect(await peakWith(12)).toBeGreaterThan(2)
  })

  it("a failing fetch fails every joiner with ReadFailed; the next read fetches again", { timeout: 120_000 }, async () => {
    const stub = await startOrigin()
    const data = pattern(128 * KiB, 43)
    await put(stub, "flaky", data)
    const { read } = await startReader(stub, { blockSize: 128 * KiB, pageSize: 0 })
    await Effect.runPromise(stub.setFaults({ failureRate: 1, failureMode: "503", latency: { kind: "fixed", ms: 100 }, kinds: ["get"] }))
    const rs = ranges(16, data.length, 3)
    const failed = await Promise.all(rs.map(([o, l]) => read("flaky", o, l)))
    for (const f of failed) {
      expect(Buffer.isBuffer(f)).toBe(false)
      expect(f).toMatchObject({ _tag: "ReadFailed", reason: expect.stringMatching(/503|SlowDown/) })
    }
    // One fill (with the backend's own retries), not one per joiner.
    const afterFailure = await stats(stub)
    expect(afterFailure.requests.get).toBeGreaterThanOrEqual(1)
    expect(afterFailure.requests.get).toBeLessThanOrEqual(1 + defaultPolicy.retries)

    await Effect.runPromise(stub.setFaults({ failureRate: 0, latency: { kind: "none" } }))
    const again = await Promise.all(rs.map(([o, l]) => read("flaky", o, l)))
    again.forEach((g, i) => expectBytes(g, data.subarray(rs[i]![0], rs[i]![0] + rs[i]![1])))
    const s = await stats(stub)
    expect(s.requests.get).toBe(afterFailure.requests.get + 1)
  })
})
