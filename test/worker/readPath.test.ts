/**
 * The hit/miss path below the socket: ReadPath + MissPath + BlockStore over
 * real files, with an origin that counts its requests and bytes.
 */
import { createHash } from "node:crypto"
import * as fsp from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { Layer, ManagedRuntime } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import { WorkerConfig, type WorkerSettings } from "../../src/worker/config.js"
import { WorkerMetrics } from "../../src/worker/metrics.js"
import { MissPath } from "../../src/worker/miss/MissPath.js"
import { ReadPath, type ReadOutcome } from "../../src/worker/ReadPath.js"
import { BlockStore } from "../../src/worker/store/BlockStore.js"
import { makeDirBackend, pattern } from "./support/dirBackend.js"
import { putObjectAt, replyBytes } from "./support/originFiles.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

const tempDir = async (prefix: string) => {
  const d = await fsp.mkdtemp(path.join(os.tmpdir(), prefix))
  cleanups.push(() => fsp.rm(d, { recursive: true, force: true }))
  return d
}

const obj = (key: string): ObjectId => ({ backend: Backend.S3, bucket: "bkt", objectPath: key })

const putObject = (originRoot: string, key: string, bytes: Uint8Array) => putObjectAt(originRoot, "bkt", key, bytes)

const start = async (originRoot: string, cacheDir: string, settings: Partial<WorkerSettings>) => {
  const origin = makeDirBackend(originRoot)
  const layer = ReadPath.layer.pipe(
    Layer.provideMerge(MissPath.layer),
    Layer.provideMerge(BlockStore.layer),
    Layer.provideMerge(Layer.mergeAll(WorkerMetrics.layer, origin.layer)),
    Layer.provideMerge(WorkerConfig.layerSettings({ cacheDirs: [cacheDir], ...settings }))
  )
  const runtime = ManagedRuntime.make(layer)
  let disposed = false
  const dispose = async () => {
    if (!disposed) await runtime.dispose()
    disposed = true
  }
  cleanups.push(dispose)
  const reader = await runtime.runPromise(ReadPath)
  const store = await runtime.runPromise(BlockStore)
  const stats = await runtime.runPromise(WorkerMetrics)
  /** Reads through the worker (of exactly `version`, when given) and copies the reply's bytes out of its file segments. */
  const read = async (key: string, offset: number, len: number, version?: string): Promise<Buffer | string> => {
    const out: ReadOutcome = await (version === undefined ? reader.read(obj(key), offset, len) : reader.readVersion(obj(key), version, offset, len))
    if (out._tag === "ReadFailed") return out.reason
    const buf = replyBytes(out, (r) => reader.release(r))
    expect(buf.length).toBe(len)
    return buf
  }
  return { origin: origin.counters, read, store, stats, dispose }
}

const KiB = 1024
/** The dir backend's version of some content. */
const versionOf = (b: Uint8Array) => createHash("md5").update(b).digest("hex")

/** Byte equality without vitest's per-element deep diff (slow on large buffers). */
const expectBytes = (got: Buffer | string, want: Uint8Array) => {
  if (typeof got === "string") throw new Error(`expected ${want.length} bytes, got an error: ${got}`)
  expect(got.length).toBe(want.length)
  expect(Buffer.compare(got, want)).toBe(0)
}

describe("ReadPath (whole blocks)", () => {
  it("cold read = origin bytes; warm read = same bytes with no origin request", async () => {
    const originRoot = await tempDir("talon-origin-")
    const data = pattern(300 * KiB, 7)
    await putObject(originRoot, "data/x.bin", data)
    const w = await start(originRoot, await tempDir("talon-cache-"), { blockSize: 128 * KiB, pageSize: 0, versionTtlMs: 60_000 })
    // Spans blocks 0, 1 and the short last block 2.
    expectBytes(await w.read("data/x.bin", 100 * KiB, 190 * KiB), data.subarray(100 * KiB, 290 * KiB))
    expect(w.origin.gets).toBe(3)
    expect(w.origin.stats).toBe(1)
    const before = { ...w.origin }
    expectBytes(await w.read("data/x.bin", 100 * KiB, 190 * KiB), data.subarray(100 * KiB, 290 * KiB))
    expectBytes(await w.read("data/x.bin", 0, 300 * KiB), data)
    expect(w.origin.gets).toBe(before.gets)
    expect(w.origin.stats).toBe(before.stats)
    expect(w.origin.bytes).toBe(before.bytes)
    expect(w.stats.misses).toBe(1)
    expect(w.stats.hits).toBe(2)
  })

  it("32 concurrent cold reads of one block cause exactly one origin fetch", async () => {
    const originRoot = await tempDir("talon-origin-")
    const data = pattern(256 * KiB, 3)
    await putObject(originRoot, "hot", data)
    const w = await start(originRoot, await tempDir("talon-cache-"), { blockSize: 256 * KiB, pageSize: 0 })
    const results = await Promise.all(
      Array.from({ length: 32 }, (_, i) => w.read("hot", i * 4 * KiB, 8 * KiB))
    )
    results.forEach((r, i) => expectBytes(r, data.subarray(i * 4 * KiB, i * 4 * KiB + 8 * KiB)))
    expect(w.origin.gets).toBe(1)
    expect(w.origin.stats).toBe(1)
    expect(w.origin.bytes).toBe(256 * KiB)
  })

  it("out-of-range, zero-length and unknown-object requests", async () => {
    const originRoot = await tempDir("talon-origin-")
    await putObject(originRoot, "small", pattern(1000))
    const w = await start(originRoot, await tempDir("talon-cache-"), { blockSize: 64 * KiB, pageSize: 0 })
    expect(await w.read("small", 900, 101)).toBe("range out of bounds: offset 900 + len 101 exceeds object size 1000")
    expect(await w.read("small", 1001, 0)).toBe("range out of bounds: offset 1001 + len 0 exceeds object size 1000")
    expectBytes(await w.read("small", 1000, 0), Buffer.alloc(0))
    expectBytes(await w.read("small", 900, 100), pattern(1000).subarray(900))
    expect(await w.read("nope/missing.bin", 0, 10)).toBe("object s3://bkt/nope/missing.bin does not exist at the origin")
  })
})

describe("ReadPath (paged blocks)", () => {
  it("a point read fetches only the pages it touches", async () => {
    const originRoot = await tempDir("talon-origin-")
    const data = pattern(1024 * KiB, 11)
    await putObject(originRoot, "big", data)
    const w = await start(originRoot, await tempDir("talon-cache-"), { blockSize: 512 * KiB, pageSize: 16 * KiB })
    // Inside one page.
    expectBytes(await w.read("big", 40 * KiB, 100), data.subarray(40 * KiB, 40 * KiB + 100))
    expect(w.origin.bytes).toBe(16 * KiB)
    expect(w.origin.ranges).toEqual([[32 * KiB, 16 * KiB]])
    // Across a page boundary: two more pages in one GET, the first page is not fetched again.
    expectBytes(await w.read("big", 47 * KiB, 20 * KiB), data.subarray(47 * KiB, 67 * KiB))
    expect(w.origin.bytes).toBe(48 * KiB)
    expect(w.origin.ranges[1]).toEqual([48 * KiB, 32 * KiB])
    // Across a block boundary (block 0 ends at 512 KiB): last page of block 0 + first of block 1.
    expectBytes(await w.read("big", 510 * KiB, 4 * KiB), data.subarray(510 * KiB, 514 * KiB))
    expect(w.origin.bytes).toBe(80 * KiB)
    expect(w.store.stats().units).toBe(5)
    // Everything touched so far is now warm.
    const gets = w.origin.gets
    expectBytes(await w.read("big", 32 * KiB, 48 * KiB), data.subarray(32 * KiB, 80 * KiB))
    expect(w.origin.gets).toBe(gets)
  })

  it("concurrent reads of overlapping pages share fills", async () => {
    const originRoot = await tempDir("talon-origin-")
    const data = pattern(256 * KiB, 5)
    await putObject(originRoot, "o", data)
    // Overlapping reads look sequential: read-ahead off, so the bytes fetched are exactly the pages read.
    const w = await start(originRoot, await tempDir("talon-cache-"), { blockSize: 256 * KiB, pageSize: 8 * KiB, readAhead: 0 })
    const reads = Array.from({ length: 32 }, (_, i) => [(i % 8) * 6 * KiB, 10 * KiB] as const)
    const out = await Promise.all(reads.map(([o, l]) => w.read("o", o, l)))
    out.forEach((r, i) => expectBytes(r, data.subarray(reads[i]![0], reads[i]![0] + reads[i]![1])))
    // Pages 0..6 cover [0, 56 KiB): each fetched exactly once.
    expect(w.origin.bytes).toBe(7 * 8 * KiB)
  })

  it("eviction keeps resident bytes within capacity and still serves correct bytes", async () => {
    const originRoot = await tempDir("talon-origin-")
    const data = pattern(512 * KiB, 9)
    await putObject(originRoot, "e", data)
    const capacity = 64 * KiB
    const w = await start(originRoot, await tempDir("talon-cache-"), { blockSize: 128 * KiB, pageSize: 8 * KiB, capacity })
    for (let round = 0; round < 2; round++) {
      for (let off = 0; off + 24 * KiB <= 512 * KiB; off += 20 * KiB) {
        expectBytes(await w.read("e", off, 24 * KiB), data.subarray(off, off + 24 * KiB))
        expect(w.store.residentBytes).toBeLessThanOrEqual(capacity)
      }
    }
    expect(w.stats.evictions).toBeGreaterThan(0)
    await w.store.flush()
    // What is on disk matches the accounting.
    let onDisk = 0
    const walk = async (d: string): Promise<void> => {
      for (const e of await fsp.readdir(d, { withFileTypes: true })) {
        const p = path.join(d, e.name)
        if (e.isDirectory()) await walk(p)
        else if (/^p\d+$/.test(e.name)) onDisk += (await fsp.stat(p)).size
      }
    }
    await walk(w.store.stats().perDir[0]!.root)
    expect(onDisk).toBe(w.store.residentBytes)
  })
})

describe("ReadPath (restart and versions)", () => {
  it("a restarted worker on the same dir revalidates the version with one HEAD, then serves warm reads without fetching", async () => {
    const originRoot = await tempDir("talon-origin-")
    const cache = await tempDir("talon-cache-")
    const data = pattern(200 * KiB, 13)
    await putObject(originRoot, "r/obj", data)
    const settings = { blockSize: 64 * KiB, pageSize: 16 * KiB, versionTtlMs: 60_000 }
    const w1 = await start(originRoot, cache, settings)
    expectBytes(await w1.read("r/obj", 10 * KiB, 150 * KiB), data.subarray(10 * KiB, 160 * KiB))
    await w1.dispose()
    const w2 = await start(originRoot, cache, settings)
    expect(w2.store.stats().blocks).toBe(3)
    expectBytes(await w2.read("r/obj", 10 * KiB, 150 * KiB), data.subarray(10 * KiB, 160 * KiB))
    expect(w2.origin).toMatchObject({ stats: 1, gets: 0, bytes: 0 })
    expect(w2.stats.hits).toBe(1)
  })

  it("a restarted worker does not serve the version on its disk as current once the origin has another", async () => {
    const originRoot = await tempDir("talon-origin-")
    const cache = await tempDir("talon-cache-")
    const v1 = pattern(200 * KiB, 13)
    const v2 = pattern(150 * KiB, 14)
    await putObject(originRoot, "r/obj", v1)
    const settings = { blockSize: 64 * KiB, pageSize: 16 * KiB, versionTtlMs: 600_000 }
    const w1 = await start(originRoot, cache, settings)
    expectBytes(await w1.read("r/obj", 0, 200 * KiB), v1)
    await w1.dispose()
    await putObject(originRoot, "r/obj", v2)
    const w2 = await start(originRoot, cache, settings)
    // Within the (long) TTL of the version on disk, a current read is still of the new object.
    expectBytes(await w2.read("r/obj", 0, 150 * KiB), v2)
    expect(await w2.read("r/obj", 100 * KiB, 100 * KiB)).toMatch(/range out of bounds/)
    // The old version stays readable by name from disk (a pinned read), without the origin.
    const before = { ...w2.origin, ranges: w2.origin.ranges.length }
    expectBytes(await w2.read("r/obj", 10 * KiB, 150 * KiB, versionOf(v1)), v1.subarray(10 * KiB, 160 * KiB))
    expect({ ...w2.origin, ranges: w2.origin.ranges.length }).toEqual(before)
  })

  it("a pinned read serves only its version: the current one is filled under If-Match, a gone one is a VersionMismatch", async () => {
    const originRoot = await tempDir("talon-origin-")
    const v1 = pattern(150 * KiB, 1)
    const v2 = pattern(90 * KiB, 2)
    await putObject(originRoot, "pin", v1)
    const w = await start(originRoot, await tempDir("talon-cache-"), { blockSize: 64 * KiB, pageSize: 16 * KiB, versionTtlMs: 600_000 })
    expectBytes(await w.read("pin", 0, 10), v1.subarray(0, 10))
    await putObject(originRoot, "pin", v2)
    // The worker still believes v1 current (long TTL); a read pinned to v1 is served from its
    // resident block, and a non-resident part of v1 cannot be filled any more.
    expect(w.store.stats().blocks).toBe(1)
    const v1Version = versionOf(v1)
    expectBytes(await w.read("pin", 0, 10, v1Version), v1.subarray(0, 10))
    expect(await w.read("pin", 0, 100 * KiB, v1Version)).toMatch(/^version mismatch: expected /)
    // A read pinned to an unknown version asks the origin, which names another: mismatch, no bytes.
    expect(await w.read("pin", 0, 10, "no-such-version")).toMatch(/^version mismatch: expected no-such-version, found /)
    // The origin's current version (learned by that check) reads whole, and never mixes in v1's block.
    const v2Version = versionOf(v2)
    expectBytes(await w.read("pin", 0, 90 * KiB, v2Version), v2)
    expect(await w.read("pin", 0, 100 * KiB, v2Version)).toMatch(/range out of bounds: offset 0 \+ len 102400 exceeds object size 92160/)
  })

  it("a changed object is served new once the version TTL has passed", async () => {
    const originRoot = await tempDir("talon-origin-")
    const v1 = pattern(40 * KiB, 1)
    const v2 = pattern(48 * KiB, 2)
    await putObject(originRoot, "mut", v1)
    const w = await start(originRoot, await tempDir("talon-cache-"), { blockSize: 64 * KiB, pageSize: 0, versionTtlMs: 150 })
    expectBytes(await w.read("mut", 0, 40 * KiB), v1)
    await putObject(originRoot, "mut", v2)
    await new Promise((r) => setTimeout(r, 200))
    expectBytes(await w.read("mut", 0, 48 * KiB), v2)
    expectBytes(await w.read("mut", 1000, 2000), v2.subarray(1000, 3000))
    // Both versions are distinct blocks.
    expect(w.store.stats().blocks).toBe(2)
  })

  it("an object shrunk under a cached version fails loudly, then is re-read", async () => {
    const originRoot = await tempDir("talon-origin-")
    await putObject(originRoot, "shrink", pattern(100 * KiB, 1))
    const w = await start(originRoot, await tempDir("talon-cache-"), { blockSize: 64 * KiB, pageSize: 0, versionTtlMs: 60_000 })
    expectBytes(await w.read("shrink", 0, 10), pattern(100 * KiB, 1).subarray(0, 10))
    const v2 = pattern(70 * KiB, 2)
    await putObject(originRoot, "shrink", v2)
    // Block 1 of the cached (old, 100 KiB) version is not resident: the fill comes back short,
    // the worker re-asks the origin and answers against the new size.
    expect(await w.read("shrink", 64 * KiB, 36 * KiB)).toBe(
      `range out of bounds: offset ${64 * KiB} + len ${36 * KiB} exceeds object size ${70 * KiB}`
    )
    expectBytes(await w.read("shrink", 64 * KiB, 6 * KiB), v2.subarray(64 * KiB))
  })
})
