/**
 * Every reply byte right and in the right order, over real sockets and files, in every plane
 * and serve arrangement a worker runs: native with and without the hit table, portable,
 * `--loops 2`; pipelined and multiplexed.
 *
 * - Large ranges (1 MiB, page- and block-crossing), deep pipelines, many connections, and
 *   clients that stall their reads so the server's socket buffers fill and replies leave in
 *   parts: no reply may cut into another, every payload byte is the object's.
 * - Pipelined: replies in request order even when misses (held slow at the origin) sit between
 *   hits on one connection.
 * - Multiplexed: a hit overtakes a pending miss on the same connection; replies match by id.
 */
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import { Duration, Effect, Layer, ManagedRuntime, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { BackendStore } from "../../src/backend/BackendStore.js"
import type { ObjectId } from "../../src/core/ids.js"
import { nativeCounters } from "../../src/worker/plane/Native.js"
import { loadNativeAddon } from "../../src/worker/plane/NativeAddon.js"
import { Sendfile } from "../../src/worker/plane/Sendfile.js"
import type { WorkerSettings } from "../../src/worker/config.js"
import { WorkerLoops } from "../../src/worker/loops/WorkerLoops.js"
import { ServeMode } from "../../src/worker/server/ServeMode.js"
import { KiB, MiB, obj } from "./loops/stream.js"
import { makeDirBackend, pattern } from "./support/dirBackend.js"
import { makeCleanup, startWorker, tempDir } from "./support/harness.js"
import { type Range, verifyRanges } from "./support/verifyingClient.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const native = loadNativeAddon()._tag === "Loaded"

/** An origin over a temp dir whose range GETs can be held for `delay(offset)` ms. */
const slowOrigin = async (objects: Record<string, Buffer>, delay: (offset: number) => number) => {
  const root = await tempDir(cleanup, "talon-origin-")
  await fsp.mkdir(path.join(root, "bkt"), { recursive: true })
  for (const [key, bytes] of Object.entries(objects)) await fsp.writeFile(path.join(root, "bkt", key), bytes)
  const dir = makeDirBackend(root, 256 * KiB)
  const layer = Layer.effect(
    BackendStore,
    Effect.map(BackendStore, (b) => ({
      ...b,
      getRange: (o: ObjectId, offset: number, length: number) =>
        Stream.unwrap(Effect.as(Effect.suspend(() => Effect.sleep(Duration.millis(delay(offset)))), b.getRange(o, offset, length)))
    }))
  ).pipe(Layer.provide(dir.layer))
  return { layer, counters: dir.counters }
}

interface Arm {
  readonly name: string
  readonly plane: "native" | "portable"
  readonly mode: "pipelined" | "multiplexed"
  readonly hitTable: boolean
  readonly loops?: number
}

const ALL_ARMS: ReadonlyArray<Arm> = [
  { name: "native, pipelined, hit table", plane: "native", mode: "pipelined", hitTable: true },
  { name: "native, pipelined, no hit table", plane: "native", mode: "pipelined", hitTable: false },
  { name: "native, multiplexed, hit table", plane: "native", mode: "multiplexed", hitTable: true },
  { name: "native, multiplexed, no hit table", plane: "native", mode: "multiplexed", hitTable: false },
  { name: "portable, pipelined", plane: "portable", mode: "pipelined", hitTable: false },
  { name: "portable, multiplexed", plane: "portable", mode: "multiplexed", hitTable: false },
  { name: "native, pipelined, 2 loops", plane: "native", mode: "pipelined", hitTable: true, loops: 2 }
]
const ARMS = ALL_ARMS.filter((a) => native || a.plane === "portable")

/** Starts a worker for `arm` (in this process, or a primary plus forked loops); returns its data port. */
const startArm = async (arm: Arm, backend: Layer.Layer<BackendStore>, settings: Partial<WorkerSettings>): Promise<number> => {
  const base: Partial<WorkerSettings> = {
    cacheDirs: [await tempDir(cleanup, "talon-cache-")],
    hitTable: arm.hitTable,
    ...settings
  }
  if (arm.loops !== undefined) {
    const runtime = ManagedRuntime.make(
      WorkerLoops.layerSettings({
        dataAddress: "127.0.0.1:0",
        adminAddress: "127.0.0.1:0",
        coordinator: "",
        loops: arm.loops,
        dataPlane: arm.plane,
        serveMode: arm.mode,
        ...base
      }).pipe(Layer.provide(backend))
    )
    cleanup.add(() => runtime.dispose())
    return (await runtime.runPromise(WorkerLoops)).dataPort
  }
  const w = await startWorker(
    cleanup,
    backend,
    base,
    arm.mode === "multiplexed" ? ServeMode.Multiplexed : ServeMode.Pipelined,
    arm.plane === "native" ? Sendfile.Native : Sendfile.Portable
  )
  expect(w.worker.dataPlane).toBe(arm.plane)
  return w.worker.dataPort
}

/** Deterministic pseudo-random source for ranges. */
const rng = (seed: number) => {
  let x = seed >>> 0 || 1
  return (n: number) => {
    x ^= x << 13
    x >>>= 0
    x ^= x >>> 17
    x ^= x << 5
    x >>>= 0
    return x % n
  }
}

describe("reply integrity under deep pipelines of large ranges", () => {
  const SIZE = 24 * MiB + 4321
  const content = pattern(SIZE, 17)
  const object = obj("big")

  /** 1 MiB ranges: page-aligned ones (the hit table's case) and ones crossing pages and blocks. */
  const largeRanges = (n: number, seed: number): Array<Range> => {
    const r = rng(seed)
    return Array.from({ length: n }, (_, i) => {
      const len = i % 4 === 3 ? 1 + r(MiB) : MiB
      const offset = i % 4 !== 2 ? r(24) * MiB : r(SIZE - len + 1)
      return { offset, len }
    })
  }

  for (const arm of ARMS) {
    it(`${arm.name}: every byte right, nothing interleaved, partial sends exercised`, { timeout: 240_000 }, async () => {
      const origin = await slowOrigin({ big: content }, () => 0)
      const port = await startArm(arm, origin.layer, {
        blockSize: 4 * MiB,
        pageSize: MiB,
        capacity: 256 * MiB,
        // Small kernel buffers: a 1 MiB reply leaves in dozens of parts.
        sendBuffer: Number(process.env.RI_SNDBUF ?? 64 * KiB)
      })
      // Warm every page (each later read is a hit, the hit table's case), with every byte checked too.
      await verifyRanges({
        port,
        object,
        content,
        fifo: arm.mode === "pipelined",
        depth: 8,
        ranges: Array.from({ length: Math.ceil(SIZE / MiB) }, (_, i) => ({ offset: i * MiB, len: Math.min(MiB, SIZE - i * MiB) }))
      })
      const eagainBefore = native ? nativeCounters()!.eagain : 0
      const conns = Number(process.env.RI_CONNS ?? 8)
      // 24 per connection: each pipeline runs 16 deep, then refills past a drained reply.
      const perConn = Number(process.env.RI_REQS ?? 24)
      const results = await Promise.all(
        Array.from({ length: conns }, (_, c) =>
          verifyRanges({
            port,
            object,
            content,
            fifo: arm.mode === "pipelined",
            depth: 16,
            ranges: largeRanges(perConn, 1000 + c),
            stallChance: Number(process.env.RI_STALL ?? 0.05),
            seed: 77 + c
          })
        )
      )
      expect(results.reduce((n, r) => n + r.replies, 0)).toBe(conns * perConn)
      // The point of the test: replies really left in parts (socket buffers full). The loops arm
      // serves from child processes, whose counters this process cannot see.
      if (arm.plane === "native" && arm.loops === undefined) expect(nativeCounters()!.eagain).toBeGreaterThan(eagainBefore)
    })
  }
})

describe("reply order around slow misses", () => {
  const SIZE = 32 * MiB
  const content = pattern(SIZE, 23)
  const object = obj("big")
  /** Ranges of 64 KiB at random offsets: the first half of the object is warmed (hits), the rest is not (misses). */
  const mixed = (n: number, seed: number): Array<Range> => {
    const r = rng(seed)
    return Array.from({ length: n }, (_, i) => {
      const len = 64 * KiB
      const half = SIZE / 2
      const offset = i % 2 === 0 ? r(half - len) : half + r(half - len)
      return { offset, len }
    })
  }

  for (const arm of ARMS.filter((a) => a.mode === "pipelined")) {
    it(`${arm.name}: replies keep request order with misses held at the origin between hits`, { timeout: 240_000 }, async () => {
      // Misses wait 20-120 ms at the origin (by offset, so concurrent fills of one block agree).
      const origin = await slowOrigin({ big: content }, (offset) => 20 + ((offset / (256 * KiB)) % 5) * 25)
      const port = await startArm(arm, origin.layer, { blockSize: 4 * MiB, pageSize: MiB, capacity: 256 * MiB })
      // The first half is filled, then read again through JS, which publishes its pages to the hit table.
      for (let pass = 0; pass < 2; pass++) {
        await verifyRanges({
          port,
          object,
          content,
          fifo: true,
          depth: 8,
          ranges: Array.from({ length: SIZE / 2 / MiB }, (_, i) => ({ offset: i * MiB, len: MiB }))
        })
      }
      const results = await Promise.all(
        Array.from({ length: 4 }, (_, c) =>
          verifyRanges({ port, object, content, fifo: true, depth: 8, ranges: mixed(48, 300 + c), seed: 9 + c })
        )
      )
      expect(results.reduce((n, r) => n + r.replies, 0)).toBe(4 * 48)
    })
  }

  for (const arm of ARMS.filter((a) => a.mode === "multiplexed")) {
    it(`${arm.name}: a hit overtakes a pending miss on the same connection, replies matched by id`, { timeout: 120_000 }, async () => {
      // The miss is held long enough that the hit behind it is surely answered first.
      const hold = { ms: 0 }
      const origin = await slowOrigin({ big: content }, () => hold.ms)
      const port = await startArm(arm, origin.layer, { blockSize: MiB, pageSize: 64 * KiB, capacity: 256 * MiB })
      const hit: Range = { offset: 3 * 64 * KiB + 11, len: 30_000 }
      for (let pass = 0; pass < 3; pass++) await verifyRanges({ port, object, content, fifo: false, depth: 1, ranges: [hit] })
      hold.ms = 1500
      const miss: Range = { offset: 20 * MiB + 5, len: 100_000 }
      const r = await verifyRanges({ port, object, content, fifo: false, depth: 4, ranges: [miss, hit, hit, miss] })
      // Both hits first (each byte checked), then the misses: the miss did not hold them back.
      expect(r.order.slice(0, 2).sort()).toEqual([1, 2])
      expect(r.order.slice(2).sort()).toEqual([0, 3])
    })
  }
})
