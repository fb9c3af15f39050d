/**
 * The worker against the real origin stack: the origin stub (S3 + Azure REST
 * over a directory, with request/byte counters) behind the backend Router.
 * Every assertion about origin traffic reads the stub's own counters.
 */
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import * as Router from "../../src/backend/Router.js"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import type { OriginStubShape } from "../../src/origin/index.js"
import { encodeGetRangeFrame, Flags, type Frame } from "../../src/protocol/index.js"
import { pattern } from "./support/dirBackend.js"
import { makeCleanup, startWorker, tempDir } from "./support/harness.js"
import { putObjectAt, startOriginStub, stubStats } from "./support/originFiles.js"
import { connect, type RawConnection } from "./support/rawClient.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const KiB = 1024
const BUCKET = "talon-test"

const startOrigin = () => startOriginStub(cleanup, "talon-stub-")
const put = (stub: OriginStubShape, key: string, bytes: Uint8Array) => putObjectAt(stub.root, BUCKET, key, bytes)
const stats = stubStats
/** A worker over the stub (through the backend Router) with its own temp cache dir. */
const workerOver = async (stub: OriginStubShape, settings: Parameters<typeof startWorker>[2]) =>
  startWorker(cleanup, Router.layerLocal(stub.url), { cacheDirs: [await tempDir(cleanup, "talon-cache-")], ...settings })
const obj = (key: string, backend: Backend = Backend.S3): ObjectId => ({ backend, bucket: BUCKET, objectPath: key })

const read = async (c: RawConnection, id: number, object: ObjectId, offset: number, len: number): Promise<Frame> => {
  c.send(encodeGetRangeFrame(id, { object, offset, len }))
  const f = await c.next()
  expect(f.header.requestId).toBe(id)
  if ((f.header.flags & Flags.Error) !== 0) throw new Error(`error frame: ${f.payload.toString("utf8")}`)
  return f
}

const sameBytes = (got: Uint8Array, want: Uint8Array) => {
  expect(got.length).toBe(want.length)
  expect(Buffer.compare(Buffer.from(got), Buffer.from(want))).toBe(0)
}

describe("worker ← backend Router ← origin stub", () => {
  it("cold read = origin bytes, warm read leaves the origin's counters still (S3 and Azure)", async () => {
    const stub = await startOrigin()
    const data = pattern(300 * KiB, 31)
    await put(stub, "ds/part-0.parquet", data)
    const w = await workerOver(stub, { blockSize: 128 * KiB, pageSize: 0, versionTtlMs: 60_000 })
    const c = await connect(w.worker.dataPort)
    for (const backend of [Backend.S3, Backend.Azure]) {
      const cold = await read(c, 1, obj("ds/part-0.parquet", backend), 100 * KiB, 190 * KiB)
      sameBytes(cold.payload, data.subarray(100 * KiB, 290 * KiB))
      const before = await stats(stub)
      const warm = await read(c, 2, obj("ds/part-0.parquet", backend), 100 * KiB, 190 * KiB)
      sameBytes(warm.payload, data.subarray(100 * KiB, 290 * KiB))
      const after = await stats(stub)
      expect(after.total).toBe(before.total)
      expect(after.bytesServed).toBe(before.bytesServed)
    }
    const s = await stats(stub)
    expect(s.byProtocol.s3).toBeGreaterThan(0)
    expect(s.byProtocol.azure).toBeGreaterThan(0)
    c.close()
  })

  it("32 concurrent cold reads of one block: one origin GET", async () => {
    const stub = await startOrigin()
    const data = pattern(128 * KiB, 32)
    await put(stub, "hot", data)
    const w = await workerOver(stub, { blockSize: 128 * KiB, pageSize: 0 })
    const conns = await Promise.all(Array.from({ length: 32 }, () => connect(w.worker.dataPort)))
    const replies = await Promise.all(conns.map((c, i) => read(c, i, obj("hot"), i * 2 * KiB, 4 * KiB)))
    replies.forEach((r, i) => sameBytes(r.payload, data.subarray(i * 2 * KiB, i * 2 * KiB + 4 * KiB)))
    const s = await stats(stub)
    expect(s.requests.get).toBe(1)
    expect(s.requests.head).toBe(1)
    expect(s.bytesServed).toBe(128 * KiB)
    conns.forEach((c) => c.close())
  })

  it("paged mode: a point read fetches only the page it touches", async () => {
    const stub = await startOrigin()
    const data = pattern(1024 * KiB, 33)
    await put(stub, "big.bin", data)
    const w = await workerOver(stub, { blockSize: 512 * KiB, pageSize: 32 * KiB })
    const c = await connect(w.worker.dataPort)
    sameBytes((await read(c, 1, obj("big.bin"), 700 * KiB + 5, 100)).payload, data.subarray(700 * KiB + 5, 700 * KiB + 105))
    expect((await stats(stub)).bytesServed).toBe(32 * KiB)
    c.close()
  })

  it("eviction keeps resident bytes under capacity and still serves correct bytes", async () => {
    const stub = await startOrigin()
    const data = pattern(256 * KiB, 34)
    await put(stub, "ev.bin", data)
    const capacity = 48 * KiB
    const w = await workerOver(stub, { blockSize: 64 * KiB, pageSize: 8 * KiB, capacity })
    const c = await connect(w.worker.dataPort)
    let id = 0
    for (let pass = 0; pass < 2; pass++) {
      for (let off = 0; off + 20 * KiB <= data.length; off += 12 * KiB) {
        sameBytes((await read(c, id++, obj("ev.bin"), off, 20 * KiB)).payload, data.subarray(off, off + 20 * KiB))
        expect(w.worker.store.residentBytes).toBeLessThanOrEqual(capacity)
      }
    }
    expect(w.worker.stats.evictions).toBeGreaterThan(0)
    c.close()
  })

  it("restart on the same cache dir: one HEAD revalidates the version, then warm reads hit with no GET", async () => {
    const stub = await startOrigin()
    const data = pattern(200 * KiB, 35)
    await put(stub, "r.bin", data)
    const cache = await tempDir(cleanup, "talon-cache-")
    const settings = { cacheDirs: [cache], blockSize: 64 * KiB, pageSize: 16 * KiB, versionTtlMs: 60_000 }
    const w1 = await startWorker(cleanup, Router.layerLocal(stub.url), settings)
    const c1 = await connect(w1.worker.dataPort)
    sameBytes((await read(c1, 1, obj("r.bin"), 5 * KiB, 180 * KiB)).payload, data.subarray(5 * KiB, 185 * KiB))
    c1.close()
    await w1.stop()
    await Effect.runPromise(stub.resetStats())
    const w2 = await startWorker(cleanup, Router.layerLocal(stub.url), settings)
    const c2 = await connect(w2.worker.dataPort)
    sameBytes((await read(c2, 2, obj("r.bin"), 5 * KiB, 180 * KiB)).payload, data.subarray(5 * KiB, 185 * KiB))
    // The object may have changed while the worker was down: its version is asked once, the blocks are reused.
    const after = await stats(stub)
    expect(after.requests.head).toBe(1)
    expect(after.total).toBe(1)
    expect(w2.worker.stats.hits).toBe(1)
    c2.close()
  })

  it("a changed object at the origin is served new once the version TTL has passed", async () => {
    const stub = await startOrigin()
    await put(stub, "mut.bin", pattern(30 * KiB, 1))
    const w = await workerOver(stub, { blockSize: 64 * KiB, pageSize: 0, versionTtlMs: 200 })
    const c = await connect(w.worker.dataPort)
    sameBytes((await read(c, 1, obj("mut.bin"), 0, 30 * KiB)).payload, pattern(30 * KiB, 1))
    const v2 = pattern(34 * KiB, 2)
    await put(stub, "mut.bin", v2)
    await new Promise((r) => setTimeout(r, 300))
    sameBytes((await read(c, 2, obj("mut.bin"), 0, 34 * KiB)).payload, v2)
    c.close()
  })
})
