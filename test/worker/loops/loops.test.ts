/**
 * `--loops 2` over real processes: this test process is the primary (the
 * index owner, with a counting origin), and node:cluster forks two serving
 * loops. Asserts what the one-owner design promises: one port, one node id,
 * one origin fetch for concurrent cold reads arriving on both loops, and no
 * unlink of a file a loop is still sending from, even when the owner must
 * evict to make room.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import * as net from "node:net"
import * as path from "node:path"
import { Duration, Effect, Layer, ManagedRuntime, Stream } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { BackendStore } from "../../../src/backend/BackendStore.js"
import { Coordinator } from "../../../src/coordinator/Coordinator.js"
import { Backend, type ObjectId } from "../../../src/core/ids.js"
import { encodeFrame, encodeGetRangeFrame, Flags, MsgType } from "../../../src/protocol/index.js"
import { WorkerLoops } from "../../../src/worker/loops/WorkerLoops.js"
import { blockKey } from "../../../src/worker/store/layout.js"
import { makeDirBackend, pattern } from "../support/dirBackend.js"
import { makeCleanup, startWorker, tempDir } from "../support/harness.js"
import { connect, type RawConnection } from "../support/rawClient.js"
import { eventuallyAsync } from "../../support/eventually.js"
import { eventually, startLoops } from "./loopsWorker.js"
import { exchange, requestStream, SIZE } from "./stream.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())
/** What lives for the whole file (one worker shared by the first tests: each start forks processes). */
const shared = makeCleanup()
afterAll(() => shared.run())

const KiB = 1024
const MiB = 1024 * KiB
const obj = (key: string): ObjectId => ({ backend: Backend.S3, bucket: "bkt", objectPath: key })

/** A counting origin over a temp dir; `delay.ms` pauses every range GET (so concurrent cold reads overlap for sure). */
const originWith = async (scope: typeof cleanup, objects: Record<string, Uint8Array>) => {
  const root = await tempDir(scope, "talon-origin-")
  await fsp.mkdir(path.join(root, "bkt"), { recursive: true })
  for (const [key, bytes] of Object.entries(objects)) await fsp.writeFile(path.join(root, "bkt", key), bytes)
  const dir = makeDirBackend(root, 256 * KiB)
  const delay = { ms: 0 }
  const layer = Layer.effect(
    BackendStore,
    Effect.map(BackendStore, (b) => ({
      ...b,
      getRange: (o: ObjectId, offset: number, length: number) =>
        Stream.unwrap(Effect.as(Effect.suspend(() => Effect.sleep(Duration.millis(delay.ms))), b.getRange(o, offset, length)))
    }))
  ).pipe(Layer.provide(dir.layer))
  return { counters: dir.counters, layer, delay, root }
}

/** The dir origin's version of `b` (its ETag: the MD5 of the content). */
const etagOf = (b: Uint8Array) => createHash("md5").update(b).digest("hex")

const readAll = async (c: RawConnection, id: number, o: ObjectId, offset: number, len: number) => {
  c.send(encodeGetRangeFrame(id, { object: o, offset, len }))
  const f = await c.next()
  expect(f.header.requestId).toBe(id)
  expect((f.header.flags & Flags.Error) !== 0 ? f.payload.toString("utf8") : "ok").toBe("ok")
  return f.payload
}

describe("--loops 2", () => {
  const data = pattern(600 * KiB, 7)
  const small = pattern(200 * KiB, 9)
  const big = pattern(SIZE, 77)
  let origin: Awaited<ReturnType<typeof originWith>>
  let w: WorkerLoops["Type"]
  beforeAll(async () => {
    origin = await originWith(shared, { a: data, b: small, big })
    const cache = await tempDir(shared, "talon-cache-")
    w = await startLoops(shared, origin.layer, { id: "loops-node", cacheDirs: [cache], blockSize: 64 * KiB, pageSize: 16 * KiB })
  }, 180_000)

  it("one port and node id; concurrent cold reads of one block on both loops make exactly one origin fetch", async () => {
    origin.delay.ms = 400
    expect(w.loops.loops).toBe(2)
    expect(w.node.id).toBe("loops-node")
    expect(w.node.address).toBe(w.dataAddress)
    const pids = w.loops.running().map((l) => l.pid)
    expect(pids).toHaveLength(2)
    expect(new Set([...pids, process.pid]).size).toBe(3)

    // Enough connections that the kernel's hash puts some on each loop (all 16 on one: 2 in 65536).
    const conns: Array<RawConnection> = []
    for (let i = 0; i < 16; i++) conns.push(await connect(w.dataPort))
    cleanup.add(async () => conns.forEach((c) => c.close()))
    await eventually(
      () => w.loops.report().loops.every((l) => l.counters.connectionsTotal >= 1) && w.stats.connectionsTotal >= 16,
      "both loops report accepted connections"
    )
    // The same cold block from every connection at once: every read is in flight before the slow origin answers.
    const replies = await Promise.all(conns.map((c, i) => readAll(c, 100 + i, obj("a"), 1000, 300 * KiB)))
    for (const p of replies) expect(Buffer.compare(p, data.subarray(1000, 1000 + 300 * KiB))).toBe(0)
    // [1000, 308200) spans blocks 0..4 (64 KiB): one GET per block (of the pages the range touches,
    // 16 KiB each: all of blocks 0..3, pages 0..2 of block 4), however many loops asked.
    expect(origin.counters.gets).toBe(5)
    expect(origin.counters.stats).toBe(1)
    expect(origin.counters.bytes).toBe(4 * 64 * KiB + 3 * 16 * KiB)
    origin.delay.ms = 0

    // Warm now, on both loops: no more origin traffic; the loops' hits and misses reach the owner's counters.
    const again = await Promise.all(conns.map((c, i) => readAll(c, 200 + i, obj("a"), 10_000 + i * 1000, 64 * KiB)))
    again.forEach((p, i) => expect(Buffer.compare(p, data.subarray(10_000 + i * 1000, 10_000 + i * 1000 + 64 * KiB))).toBe(0))
    expect(origin.counters.gets).toBe(5)
    await eventually(() => w.stats.hits + w.stats.misses >= 32, "the loops report their hits and misses")
    expect(w.store.blockCount).toBe(5)
  }, 120_000)

  it("errors, pings and pipelined replies come back byte-identical through a loop", async () => {
    const c = await connect(w.dataPort)
    cleanup.add(async () => c.close())
    c.send(
      Buffer.concat([
        encodeGetRangeFrame(1, { object: obj("b"), offset: 70 * KiB, len: 100 * KiB }),
        encodeGetRangeFrame(2, { object: obj("missing"), offset: 0, len: 1 }),
        encodeFrame(MsgType.Ping, 3, new Uint8Array(0)),
        encodeGetRangeFrame(4, { object: obj("b"), offset: 199 * KiB, len: 2 * KiB }),
        encodeGetRangeFrame(5, { object: obj("b"), offset: 0, len: 200 * KiB })
      ])
    )
    const f1 = await c.next()
    const f2 = await c.next()
    const f3 = await c.next()
    const f4 = await c.next()
    const f5 = await c.next()
    expect([f1, f2, f3, f4, f5].map((f) => f.header.requestId)).toEqual([1, 2, 3, 4, 5])
    expect(Buffer.compare(f1.payload, small.subarray(70 * KiB, 170 * KiB))).toBe(0)
    expect(f2.header.flags & Flags.Error).toBe(Flags.Error)
    expect(f2.payload.toString("utf8")).toBe("object s3://bkt/missing does not exist at the origin")
    expect(f3.header.type).toBe(MsgType.Ping)
    expect(f4.payload.toString("utf8")).toBe(`range out of bounds: offset ${199 * KiB} + len ${2 * KiB} exceeds object size ${200 * KiB}`)
    expect(Buffer.compare(f5.payload, small)).toBe(0)
  }, 120_000)

  it("a burst of 64 connects: every loop accepts its share on its own socket, and every connection is answered right", async () => {
    expect(w.loops.scheduling).toBe("reuseport")
    await eventually(() => w.loops.report().loops.every((l) => l.counters.connectionsOpen === 0), "the earlier tests' connections closed")
    const conns = await Promise.all(Array.from({ length: 64 }, () => connect(w.dataPort)))
    cleanup.add(async () => conns.forEach((c) => c.close()))
    // The loops' own counters (reported over IPC each second): all 64 open, on both loops (all on one: 2 in 2^64).
    await eventually(() => {
      const open = w.loops.report().loops.map((l) => l.counters.connectionsOpen)
      return open.length === 2 && open.every((n) => n >= 1) && open[0]! + open[1]! === 64
    }, "the loops report the 64 connections open, some on each")
    expect(w.loops.dealt().size).toBe(0)
    const replies = await Promise.all(conns.map((c, i) => readAll(c, 900 + i, obj("b"), i * 1000, 4 * KiB)))
    replies.forEach((p, i) => expect(Buffer.compare(p, small.subarray(i * 1000, i * 1000 + 4 * KiB))).toBe(0))
  }, 60_000)

  it("a long mixed stream under backpressure comes back byte-identical to a single-process worker's", async () => {
    const frames = requestStream()
    const viaLoops = await exchange(w.dataPort, frames, 300)
    const single = await startWorker(cleanup, origin.layer, { cacheDirs: [await tempDir(cleanup, "talon-cache-")], blockSize: 64 * KiB, pageSize: 16 * KiB })
    const reference = await exchange(single.worker.dataPort, frames, 300)
    expect(viaLoops.raw.length).toBe(reference.raw.length)
    expect(Buffer.compare(viaLoops.raw, reference.raw)).toBe(0)
    // And warm, through the leases the loop now holds.
    expect(Buffer.compare((await exchange(w.dataPort, frames, 0)).raw, reference.raw)).toBe(0)
  }, 120_000)

  it("eviction never unlinks a file a loop is still sending; the unlink waits for the reader", async () => {
    // X fills most of the cache; a stalled reader keeps a loop sending from it while Y, Z and X2 need room.
    const x = pattern(16 * MiB, 1)
    const y = pattern(4 * MiB, 2)
    const z = pattern(4 * MiB, 3)
    const x2 = pattern(16 * MiB, 4)
    const origin = await originWith(cleanup, { x, y, z, x2 })
    const cache = await tempDir(cleanup, "talon-cache-")
    const w = await startLoops(cleanup, origin.layer, { cacheDirs: [cache], blockSize: 16 * MiB, pageSize: 0, capacity: 20 * MiB })

    // The stalled reader: asks for all of X and reads nothing, so the loop's sendfile blocks part-way.
    const slow = await connect(w.dataPort)
    cleanup.add(async () => slow.close())
    slow.socket.pause()
    slow.send(encodeGetRangeFrame(1, { object: obj("x"), offset: 0, len: x.length }))
    await eventually(() => w.loops.report().busy >= 1, "the loop reports X's lease as being read", 30_000)
    const stat = await Effect.runPromise(Effect.flatMap(BackendStore, (b) => b.stat(obj("x"))).pipe(Effect.provide(origin.layer)))
    const xEntry = w.store.lookup(blockKey({ object: obj("x"), offset: 0, blockSize: 16 * MiB, version: stat.version }))
    expect(xEntry).toBeDefined()
    const xFile = xEntry!.unitPath(0)

    // Y then Z on another connection: 16 + 4 + 4 MiB > 20 MiB, so the owner must evict; X is not eligible.
    const other = await connect(w.dataPort)
    cleanup.add(async () => other.close())
    expect(Buffer.compare(await readAll(other, 2, obj("y"), 0, y.length), y)).toBe(0)
    expect(Buffer.compare(await readAll(other, 3, obj("z"), 0, z.length), z)).toBe(0)
    await eventually(() => w.stats.evictions >= 1, "the owner evicted to make room")
    expect(fs.existsSync(xFile)).toBe(true)
    expect(w.store.stats().residentBytes).toBeLessThanOrEqual(20 * MiB)

    // The reader drains X completely: every byte intact.
    const payload = new Promise<Buffer>((resolve) => void slow.next().then((f) => resolve(f.payload)))
    slow.socket.resume()
    expect(Buffer.compare(await payload, x)).toBe(0)

    // Now X is only a cached block: a 16 MiB newcomer needs its room, and X's file goes.
    expect(Buffer.compare(await readAll(other, 4, obj("x2"), 0, x2.length), x2)).toBe(0)
    await eventually(() => !fs.existsSync(xFile), "X's file is unlinked once nobody reads it")
    expect(origin.counters.gets).toBe(4)
  }, 180_000)

  it("registers once with the coordinator (one node id for the port), and a killed loop is replaced", async () => {
    const data = pattern(100 * KiB, 5)
    const origin = await originWith(cleanup, { c: data })
    const coordRuntime = ManagedRuntime.make(
      Coordinator.layer({ listen: "127.0.0.1:0", adminListen: "127.0.0.1:0", heartbeatIntervalMs: 100, missedHeartbeats: 50 }).pipe(
        Layer.provide(origin.layer)
      )
    )
    cleanup.add(() => coordRuntime.dispose())
    const coordinator = await coordRuntime.runPromise(Coordinator)
    const w = await startLoops(cleanup, origin.layer, {
      id: "",
      coordinator: coordinator.controlAddress,
      heartbeatIntervalMs: 100,
      cacheDirs: [await tempDir(cleanup, "talon-cache-")]
    })
    const members = () => Effect.runPromise(coordinator.members)
    await eventually(() => w.readiness.ready, "registered")
    // Its first status says not ready; the one right after its acceptance says ready and places it.
    const listed = await eventuallyAsync(
      async () => {
        const now = await members()
        expect(now.length).toBeGreaterThan(0)
        return now
      },
      { what: "the coordinator lists the worker", within: "20 seconds" }
    )
    expect(listed.map((n) => [n.id, n.address])).toEqual([[`worker-${w.dataAddress}`, w.dataAddress]])

    const read = async () => {
      const c = await connect(w.dataPort)
      try {
        expect(Buffer.compare(await readAll(c, 1, obj("c"), 0, data.length), data)).toBe(0)
      } finally {
        c.close()
      }
    }
    // Readiness reached the loops: reads on fresh connections (the kernel's pick of loop) succeed.
    await read()
    await read()
    const victim = w.loops.running()[0]!
    process.kill(victim.pid, "SIGKILL")
    // Once its process has exited (the owner saw it: every thread gone, its listening socket closed),
    // every new connection reaches a loop that serves it: the survivor, or the replacement if it is
    // up already. The port stays the worker's.
    await eventually(() => w.loops.running().every((l) => l.pid !== victim.pid), "the owner saw the killed loop exit")
    for (let i = 0; i < 8; i++) await read()
    await eventually(
      () => w.loops.restarts() === 1 && w.loops.running().length === 2 && w.loops.running().every((l) => l.pid !== victim.pid),
      "the killed loop is replaced"
    )
    // The replacement is ready and serving (it asked the owner for readiness when it started).
    await eventually(() => w.loops.report().loops.filter((l) => l.counters.connectionsTotal >= 0).length >= 3, "the new loop joined")
    for (let i = 0; i < 4; i++) await read()
    expect((await members()).map((n) => n.id)).toEqual([`worker-${w.dataAddress}`])

    // Stopped: no socket of the worker holds the port any more (an exclusive listener binds it).
    await cleanup.run()
    const probe = net.createServer()
    await new Promise<void>((resolve, reject) => {
      probe.once("error", reject)
      probe.listen({ host: "127.0.0.1", port: w.dataPort, exclusive: true }, resolve)
    })
    await new Promise((resolve) => probe.close(resolve))
  }, 180_000)
})

describe("--loops 2: each loop's native hit table", () => {
  it("answers warm hits on both loops with the right bytes; never serves an overwritten version or an evicted block", async () => {
    const v1 = pattern(64 * KiB, 21)
    const v2 = pattern(64 * KiB, 22)
    const fillers = { f1: pattern(64 * KiB, 23), f2: pattern(64 * KiB, 24), f3: pattern(64 * KiB, 25) }
    const origin = await originWith(cleanup, { o: v1, ...fillers })
    // Whole-block units (one per reply: what the table publishes), a short version TTL, room for 3 blocks.
    // The owner deals connections here (by count: 2 and 2), so both loops' tables serve for sure.
    const w = await startLoops(cleanup, origin.layer, {
      cacheDirs: [await tempDir(cleanup, "talon-cache-")],
      blockSize: 64 * KiB,
      pageSize: 0,
      capacity: 3 * 64 * KiB,
      versionTtlMs: 3000,
      loopsAccept: "dealt"
    })
    expect(w.loops.scheduling).toBe("balanced")
    const conns: Array<RawConnection> = []
    for (let i = 0; i < 4; i++) conns.push(await connect(w.dataPort))
    cleanup.add(async () => conns.forEach((c) => c.close()))
    await eventually(
      () => w.loops.report().loops.filter((l) => l.counters.connectionsOpen === 2).length === 2,
      "each loop reports 2 of the 4 connections open"
    )
    expect([...w.loops.dealt().values()]).toEqual([2, 2])
    let id = 1
    const read = (c: RawConnection, key: string, offset: number, len: number) => readAll(c, id++, obj(key), offset, len)

    // Warm: every connection reads the block over and over, one read at a time (the table answers an idle connection).
    const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex")
    for (const c of conns) {
      for (let i = 0; i < 25; i++) expect(sha(await read(c, "o", 1000, 32 * KiB))).toBe(sha(v1.subarray(1000, 1000 + 32 * KiB)))
    }
    await eventually(
      () => w.loops.report().loops.filter((l) => l.counters.tableHits > 0).length === 2 && (w.stats.offloaded?.[0] ?? 0) >= 50,
      "both loops report hits their tables answered"
    )
    expect(w.stats.hits).toBeGreaterThanOrEqual(w.stats.offloaded![0]!)
    expect(origin.counters.gets).toBe(1)

    // Evicted (well within the version's TTL): three other blocks need the room; the next read of "o" goes to the
    // origin, where a table still holding the block would have answered it.
    const want1 = v1.subarray(1000, 1000 + 32 * KiB)
    for (const c of conns) expect(Buffer.compare(await read(c, "o", 1000, 32 * KiB), want1)).toBe(0)
    for (const key of Object.keys(fillers)) expect(Buffer.compare(await read(conns[0]!, key, 0, 64 * KiB), fillers[key as keyof typeof fillers])).toBe(0)
    await eventually(() => w.store.lookup(blockKey({ object: obj("o"), offset: 0, blockSize: 64 * KiB, version: etagOf(v1) })) === undefined, "o is evicted")
    const gets = origin.counters.gets
    for (const c of conns) expect(Buffer.compare(await read(c, "o", 1000, 32 * KiB), want1)).toBe(0)
    expect(origin.counters.gets).toBeGreaterThan(gets)

    // Overwritten at the origin: once a connection has seen the new version, no read anywhere returns the old one.
    await fsp.writeFile(path.join(origin.root, "bkt", "o"), v2)
    const want2 = v2.subarray(1000, 1000 + 32 * KiB)
    // Until the old version's TTL runs out every read returns it whole; then the new one (round robin over the loops).
    let round = 0
    let neither = 0
    await eventuallyAsync(
      async () => {
        const p = await read(conns[round++ % conns.length]!, "o", 1000, 32 * KiB)
        if (Buffer.compare(p, want2) === 0) return
        if (Buffer.compare(p, want1) !== 0) neither++
        throw new Error("still the old version")
      },
      { what: "the new version is served", within: 20_000, every: "10 millis" }
    )
    expect(neither).toBe(0)
    const tableBefore = w.stats.offloaded![0]!
    for (const c of conns) for (let i = 0; i < 25; i++) expect(Buffer.compare(await read(c, "o", 1000, 32 * KiB), want2)).toBe(0)
    await eventually(() => w.stats.offloaded![0]! >= tableBefore + 50, "the tables answer the new version too")
  }, 120_000)
})

