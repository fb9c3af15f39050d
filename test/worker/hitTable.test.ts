/**
 * The native plane's hit table (native/hits.c, fed by src/worker/server/HitPublisher.ts):
 * repeated hits of an idle connection are answered without JS. Over real sockets and files:
 * the table really answers (the addon's counters move), every byte is right, replies keep
 * request order around a miss, an evicted unit or a changed object is never served from the
 * table, a partly sent reply is finished by JS, and the worker's counters include the table.
 */
import fc from "fast-check"
import { afterEach, describe, expect, it } from "vitest"
import { createHash } from "node:crypto"
import { DataErrorCode, decodeErrorPayload, encodeFrame, encodeGetCachedRangeFrame, encodeGetPinnedRangeFrame, encodeGetRangeFrame, HEADER_LEN, MsgType, type Frame } from "../../src/protocol/index.js"
import { nativeCounters } from "../../src/worker/plane/Native.js"
import { loadNativeAddon } from "../../src/worker/plane/NativeAddon.js"
import { Sendfile } from "../../src/worker/plane/Sendfile.js"
import { ServeMode } from "../../src/worker/server/ServeMode.js"
import { KiB, MiB, obj } from "./loops/stream.js"
import { pattern, startDirWorker } from "./support/dirBackend.js"
import { makeCleanup } from "./support/harness.js"
import { connect, type RawConnection } from "./support/rawClient.js"
import { exchange } from "./loops/stream.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const native = loadNativeAddon()._tag === "Loaded"
const SIZE = 3 * MiB + 777

const counters = () => {
  const c = nativeCounters()!
  return { fastHits: c.fastHits, handoffs: c.handoffs }
}

const setup = async (settings: { capacity?: number; versionTtlMs?: number; hitTable?: boolean } = {}, multiplexed = false) => {
  const big = pattern(SIZE, 5)
  const other = pattern(SIZE, 9)
  const { w, put, origin } = await startDirWorker(
    cleanup,
    // A version trusted for a minute unless a test says otherwise: on a loaded machine the warm-up
    // passes can outlast a short TTL, and a renewal takes the object out of the table for a read.
    { blockSize: MiB, pageSize: 256 * KiB, versionTtlMs: 60_000, ...settings },
    multiplexed ? ServeMode.Multiplexed : ServeMode.Pipelined,
    Sendfile.Native
  )
  await put("big", big)
  await put("other", other)
  expect(w.worker.dataPlane).toBe("native")
  return { put, big, other, origin, w }
}

let nextId = 1
const get = (key: string, offset: number, len: number) => encodeGetRangeFrame(nextId++, { object: obj(key), offset, len })

/** Sends the frames in one write and reads as many replies. */
const roundTrip = async (c: RawConnection, frames: ReadonlyArray<Uint8Array>): Promise<Array<Frame>> => {
  c.send(Buffer.concat(frames))
  const out: Array<Frame> = []
  for (let i = 0; i < frames.length; i++) out.push(await c.next())
  return out
}

const expectRange = (f: Frame, data: Buffer, offset: number, len: number) => {
  expect(f.header.flags & 2).toBe(0)
  expect(f.payload.length).toBe(len)
  expect(Buffer.compare(Buffer.from(f.payload), data.subarray(offset, offset + len))).toBe(0)
}

/** Ranges inside one 256 KiB page each, at odd offsets. */
const ranges = (n: number, seed: number): Array<[number, number]> =>
  Array.from({ length: n }, (_, i) => {
    const page = (i * 7 + seed) % 12
    const within = (i * 8191 + seed * 13) % (128 * KiB)
    return [page * 256 * KiB + within, 1 + ((i * 4099 + seed) % (128 * KiB - 1))]
  })

describe.runIf(native)("native hit table", () => {
  it("answers repeated hits without JS: right bytes, worker counters include them, --no-hit-table answers none", async () => {
    for (const hitTable of [true, false]) {
      const { big, w } = await setup({ hitTable })
      const c = await connect(w.worker.dataPort)
      const rs = ranges(48, 3)
      // Cold (fills), then warm twice: the first warm pass publishes, the second is the table's.
      for (let pass = 0; pass < 3; pass++) {
        const replies = await roundTrip(
          c,
          rs.map(([o, l]) => get("big", o, l))
        )
        replies.forEach((f, i) => expectRange(f, big, rs[i]![0], rs[i]![1]))
      }
      const before = counters()
      const hitsBefore = w.worker.stats.hits
      for (let pass = 0; pass < 3; pass++) {
        for (const [o, l] of rs) expectRange((await roundTrip(c, [get("big", o, l)]))[0]!, big, o, l)
      }
      const after = counters()
      if (hitTable) expect(after.fastHits - before.fastHits).toBeGreaterThanOrEqual(rs.length * 3 - 2)
      else expect(after.fastHits).toBe(before.fastHits)
      expect(w.worker.stats.hits - hitsBefore).toBe(rs.length * 3)
      const metrics = await (await fetch(`http://127.0.0.1:${w.worker.adminPort}/metrics`)).text()
      const tableHits = Number(/^talon_worker_hit_table_hits_total (\d+)$/m.exec(metrics)?.[1])
      if (hitTable) expect(tableHits).toBeGreaterThanOrEqual(rs.length * 3 - 2)
      else expect(tableHits).toBe(0)
      // The table times every reply it sends (one bucket count each); the histogram counts every request.
      const table = w.worker.stats.offloaded
      if (hitTable) {
        let timed = 0
        for (let i = 3; i < table!.length; i++) timed += table![i]!
        expect(timed).toBe(table![0])
        expect(table![2]).toBeGreaterThan(0)
      }
      const timedAll = Number(/^talon_worker_request_duration_seconds_count (\d+)$/m.exec(metrics)?.[1])
      expect(timedAll).toBeGreaterThanOrEqual(w.worker.stats.hits + w.worker.stats.misses)
      c.close()
      await w.stop()
    }
  })

  it("keeps request order around a miss, an error and a ping in the middle of published hits (both serve modes)", async () => {
    for (const multiplexed of [false, true]) {
      const { big, other, w } = await setup({}, multiplexed)
      const c = await connect(w.worker.dataPort)
      const rs = ranges(8, 1)
      for (let pass = 0; pass < 3; pass++) await roundTrip(c, rs.map(([o, l]) => get("big", o, l)))
      const before = counters()
      const frames = [
        get("big", rs[0]![0], rs[0]![1]),
        get("other", 5 * 256 * KiB + 3, 9000), // a miss: filled from the origin
        get("big", rs[1]![0], rs[1]![1]),
        get("big", SIZE - 10, 11), // out of bounds: JS's error reply
        encodeFrame(MsgType.Ping, nextId++, new Uint8Array(0)),
        get("big", rs[2]![0], rs[2]![1])
      ]
      const ids = frames.map((f) => Buffer.from(f).readUInt32BE(8))
      const replies = await roundTrip(c, frames)
      const byId = new Map(replies.map((f) => [f.header.requestId, f]))
      if (!multiplexed) expect(replies.map((f) => f.header.requestId)).toEqual(ids)
      expectRange(byId.get(ids[0]!)!, big, rs[0]![0], rs[0]![1])
      expectRange(byId.get(ids[1]!)!, other, 5 * 256 * KiB + 3, 9000)
      expectRange(byId.get(ids[2]!)!, big, rs[1]![0], rs[1]![1])
      expect(byId.get(ids[3]!)!.header.flags & 2).toBe(2)
      expect(Buffer.from(byId.get(ids[3]!)!.payload).toString()).toMatch(/range out of bounds/)
      expect(byId.get(ids[4]!)!.header.type).toBe(MsgType.Ping)
      expectRange(byId.get(ids[5]!)!, big, rs[2]![0], rs[2]![1])
      // The first hit went before the table handed the rest to JS.
      expect(counters().fastHits - before.fastHits).toBeGreaterThanOrEqual(1)
      expect(counters().handoffs - before.handoffs).toBeGreaterThanOrEqual(1)
      c.close()
      await w.stop()
    }
  })

  it("answers pinned reads (GetPinnedRange) of the current version without JS; any other version is JS's", async () => {
    const { big, w } = await setup()
    const version = createHash("md5").update(big).digest("hex")
    const c = await connect(w.worker.dataPort)
    const rs = ranges(12, 5)
    const pinned = (v: string) => rs.map(([o, l]) => encodeGetPinnedRangeFrame(nextId++, { object: obj("big"), version: v, offset: o, len: l }))
    // Fill, then a JS hit that publishes each page.
    for (let pass = 0; pass < 2; pass++) {
      const replies = await roundTrip(c, pinned(version))
      replies.forEach((f, i) => {
        expect(f.header.type).toBe(MsgType.GetRange)
        expectRange(f, big, rs[i]![0], rs[i]![1])
      })
    }
    const before = counters()
    for (let pass = 0; pass < 2; pass++) {
      for (const [i, frame] of pinned(version).entries()) {
        const [f] = await roundTrip(c, [frame])
        expect(f!.header.type).toBe(MsgType.GetRange)
        expect(f!.header.requestId).toBe(frame.readUInt32BE(8))
        expectRange(f!, big, rs[i]![0], rs[i]![1])
      }
    }
    expect(counters().fastHits - before.fastHits).toBeGreaterThanOrEqual(2 * rs.length - 2)
    // Another version is never answered from the table: JS says it is not the object's version.
    const fast = counters().fastHits
    const [wrong] = await roundTrip(c, [encodeGetPinnedRangeFrame(nextId++, { object: obj("big"), version: "0".repeat(32), offset: rs[0]![0], len: rs[0]![1] })])
    expect(wrong!.header.flags & 2).toBe(2)
    expect(Buffer.from(wrong!.payload).toString("latin1")).toMatch(/version/i)
    expect(counters().fastHits).toBe(fast)
    // Talon's cache-only GetCachedRange has the same body: its resident hits are the table's too.
    const cacheOnly = (v: string) => rs.map(([o, l]) => encodeGetCachedRangeFrame(nextId++, { object: obj("big"), version: v, offset: o, len: l }))
    for (const [i, frame] of cacheOnly(version).entries()) {
      const [f] = await roundTrip(c, [frame])
      expect(f!.header.type).toBe(MsgType.GetRange)
      expectRange(f!, big, rs[i]![0], rs[i]![1])
    }
    expect(counters().fastHits - fast).toBeGreaterThanOrEqual(rs.length - 1)
    const [miss] = await roundTrip(c, cacheOnly("0".repeat(32)).slice(0, 1))
    expect(decodeErrorPayload(miss!.payload).code).toBe(DataErrorCode.CacheMiss)
    c.close()
  })

  it("never answers from an evicted unit: the next read refills from the origin", async () => {
    // Capacity of four pages: reading other pages evicts the published ones.
    const { big, origin, w } = await setup({ capacity: 4 * 256 * KiB })
    const c = await connect(w.worker.dataPort)
    const hot: [number, number] = [256 * KiB + 100, 5000]
    for (let i = 0; i < 3; i++) expectRange((await roundTrip(c, [get("big", ...hot)]))[0]!, big, ...hot)
    const before = counters()
    expectRange((await roundTrip(c, [get("big", ...hot)]))[0]!, big, ...hot)
    expect(counters().fastHits - before.fastHits).toBe(1)
    for (let p = 4; p < 12; p++) expectRange((await roundTrip(c, [get("big", p * 256 * KiB, 1000)]))[0]!, big, p * 256 * KiB, 1000)
    const gets = origin.gets
    const fast = counters().fastHits
    expectRange((await roundTrip(c, [get("big", ...hot)]))[0]!, big, ...hot)
    expect(origin.gets).toBe(gets + 1)
    expect(counters().fastHits).toBe(fast)
    c.close()
  })

  it("serves a changed object new once its version TTL has passed, never the table's old bytes", async () => {
    const { put, big, w } = await setup({ versionTtlMs: 1000 })
    const c = await connect(w.worker.dataPort)
    const r: [number, number] = [1000, 20_000]
    for (let i = 0; i < 3; i++) expectRange((await roundTrip(c, [get("big", ...r)]))[0]!, big, ...r)
    // The old bytes are in the table: a read answered natively. On a loaded machine the version may
    // lapse between reads (the table then drops it and JS republishes), so ask until one is.
    let fast = false
    for (let i = 0; i < 20 && !fast; i++) {
      const before = counters()
      expectRange((await roundTrip(c, [get("big", ...r)]))[0]!, big, ...r)
      fast = counters().fastHits - before.fastHits === 1
    }
    expect(fast).toBe(true)
    const changed = pattern(SIZE, 42)
    await put("big", changed)
    await new Promise((resolve) => setTimeout(resolve, 1100))
    for (let i = 0; i < 4; i++) expectRange((await roundTrip(c, [get("big", ...r)]))[0]!, changed, ...r)
    c.close()
  })

  it("arbitrary bytes after published hits: the hits are answered, the connection dropped, the worker keeps serving", async () => {
    const { big, w } = await setup()
    const r: [number, number] = [300 * KiB + 7, 4096]
    const warm = await connect(w.worker.dataPort)
    for (let i = 0; i < 3; i++) await roundTrip(warm, [get("big", ...r)])
    warm.close()
    // Random bytes (never a frame by accident: the magic's first byte is never right)...
    const junk = fc
      .sample(fc.uint8Array({ minLength: 16, maxLength: 600 }), { numRuns: 25, seed: 7 })
      .map((b) => Buffer.from(b).fill(b[0] === 0x54 ? 0 : b[0]!, 0, 1))
    // ...a GetRange header announcing a body over the cap, and a frame cut by the end of the write.
    const overCap = Buffer.from(get("big", ...r))
    overCap.writeUInt32BE(1 << 20, 12)
    junk.push(overCap, Buffer.from(get("big", ...r)).subarray(0, 30))
    const cut = junk.length - 1
    for (const [i, tail] of junk.entries()) {
      const c = await connect(w.worker.dataPort)
      c.send(Buffer.concat([get("big", ...r), get("big", ...r), tail]))
      expectRange(await c.next(), big, ...r)
      expectRange(await c.next(), big, ...r)
      const closed = await Promise.race([c.closed.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 2000))])
      // A protocol violation drops the connection; a cut frame waits for the rest.
      expect(closed).toBe(i !== cut)
      c.close()
    }
    const after = await connect(w.worker.dataPort)
    expectRange((await roundTrip(after, [get("big", ...r)]))[0]!, big, ...r)
    after.close()
  })

  it("a reply the socket takes only partly is finished by JS, byte for byte, before the next one", async () => {
    const { big, w } = await setup()
    const rs = ranges(40, 7).map(([o]) => [o, 120 * KiB] as [number, number])
    const frames = () => rs.map(([o, l]) => get("big", o, l))
    // Fill and publish over a connection that reads at once.
    const c = await connect(w.worker.dataPort)
    for (let pass = 0; pass < 3; pass++) await roundTrip(c, frames())
    c.close()
    const before = counters()
    // A reader that stalls: the table's sendfile fills the socket buffer and stops mid-reply.
    const sent = frames()
    const { byId } = await exchange(w.worker.dataPort, sent, 200)
    sent.forEach((f, i) => {
      const reply = byId.get(Buffer.from(f).readUInt32BE(8))!
      expect(reply.length).toBe(HEADER_LEN + rs[i]![1])
      expect(Buffer.compare(reply.subarray(HEADER_LEN), big.subarray(rs[i]![0], rs[i]![0] + rs[i]![1]))).toBe(0)
    })
    const after = counters()
    expect(after.fastHits - before.fastHits).toBeGreaterThanOrEqual(1)
    expect(after.handoffs - before.handoffs).toBeGreaterThanOrEqual(1)
  })
})
