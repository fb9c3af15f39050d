/**
 * The worker over real sockets: framing, pipelining, errors, malformed input,
 * admin HTTP. The origin is a counting BackendStore over a temp directory.
 */
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import { decodeControl, encodeControlFrame, encodeFrame, encodeGetRangeFrame, encodeHeader, Flags, HEADER_LEN, MsgType, BincodeWriter, writeObjectId, type Frame } from "../../src/protocol/index.js"
import { Sendfile } from "../../src/worker/plane/Sendfile.js"
import { ServeMode } from "../../src/worker/server/ServeMode.js"
import { pattern, startDirWorker } from "./support/dirBackend.js"
import { makeCleanup, type startWorker } from "./support/harness.js"
import { connect, expectReadTimeout, within } from "./support/rawClient.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const KiB = 1024
const obj = (key: string, backend: Backend = Backend.S3): ObjectId => ({ backend, bucket: "bkt", objectPath: key })

const setup = (settings: Parameters<typeof startWorker>[2] = {}, mode?: Parameters<typeof startWorker>[3]) =>
  startDirWorker(cleanup, { blockSize: 64 * KiB, pageSize: 16 * KiB, versionTtlMs: 60_000, ...settings }, mode)

const isError = (f: Frame) => (f.header.flags & Flags.Error) !== 0
const text = (f: Frame) => f.payload.toString("utf8")
const sameBytes = (got: Uint8Array, want: Uint8Array) => {
  expect(got.length).toBe(want.length)
  expect(Buffer.compare(Buffer.from(got), Buffer.from(want))).toBe(0)
}

describe("worker data server", () => {
  it("GetRange: cold = origin bytes, warm = same bytes with no origin traffic, multi-block = one exact reply", async () => {
    const { put, origin, port } = await setup()
    const data = pattern(200 * KiB, 21)
    await put("data/a.bin", data)
    const c = await connect(port)
    c.send(encodeGetRangeFrame(7, { object: obj("data/a.bin"), offset: 10 * KiB, len: 150 * KiB }))
    const cold = await c.next()
    expect(cold.header).toMatchObject({ type: MsgType.GetRange, requestId: 7, flags: 0, length: 150 * KiB })
    sameBytes(cold.payload, data.subarray(10 * KiB, 160 * KiB))
    const seen = { ...origin, ranges: origin.ranges.length }
    c.send(encodeGetRangeFrame(8, { object: obj("data/a.bin"), offset: 10 * KiB, len: 150 * KiB }))
    const warm = await c.next()
    expect(warm.header.requestId).toBe(8)
    sameBytes(warm.payload, data.subarray(10 * KiB, 160 * KiB))
    expect(origin.gets).toBe(seen.gets)
    expect(origin.stats).toBe(seen.stats)
    expect(origin.bytes).toBe(seen.bytes)
    c.close()
  })

  it("32 concurrent cold reads of one block over 32 connections cause one origin fetch", async () => {
    const { put, origin, port } = await setup({ pageSize: 0 })
    const data = pattern(64 * KiB, 4)
    await put("hot.bin", data)
    const conns = await Promise.all(Array.from({ length: 32 }, () => connect(port)))
    conns.forEach((c, i) => c.send(encodeGetRangeFrame(i, { object: obj("hot.bin"), offset: i * 1024, len: 2048 })))
    const replies = await Promise.all(conns.map((c) => c.next()))
    replies.forEach((r, i) => {
      expect(r.header.requestId).toBe(i)
      sameBytes(r.payload, data.subarray(i * 1024, i * 1024 + 2048))
    })
    expect(origin.gets).toBe(1)
    expect(origin.bytes).toBe(64 * KiB)
    conns.forEach((c) => c.close())
  })

  it("pipelined requests on one connection come back in order, misses and hits mixed", async () => {
    const { put, port } = await setup()
    const a = pattern(100 * KiB, 1)
    const b = pattern(30 * KiB, 2)
    await put("a", a)
    await put("b", b)
    const c = await connect(port)
    const reqs: Array<[string, Uint8Array, number, number]> = []
    for (let i = 0; i < 40; i++) {
      const [key, bytes] = i % 3 === 0 ? ["b", b] : ["a", a]
      const off = (i * 7919) % (bytes.length - 4096)
      reqs.push([key, bytes, off, 1 + ((i * 131) % 4096)])
    }
    const batch = Buffer.concat(
      reqs.map(([key, , off, len], i) => encodeGetRangeFrame(1000 + i, { object: obj(key), offset: off, len }))
    )
    c.send(batch.subarray(0, 37)) // split mid-frame on purpose
    c.send(batch.subarray(37))
    for (let i = 0; i < reqs.length; i++) {
      const f = await c.next()
      const [, bytes, off, len] = reqs[i]!
      expect(f.header.requestId).toBe(1000 + i)
      sameBytes(f.payload, bytes.subarray(off, off + len))
    }
    c.close()
  })

  it("the multiplexed mode serves the same bytes (replies matched by id)", async () => {
    const { put, port } = await setup({}, ServeMode.Multiplexed)
    const a = pattern(90 * KiB, 3)
    await put("m", a)
    const c = await connect(port)
    const n = 20
    for (let i = 0; i < n; i++) c.send(encodeGetRangeFrame(i, { object: obj("m"), offset: i * 4 * KiB, len: 5 * KiB }))
    const got = new Map<number, Frame>()
    for (let i = 0; i < n; i++) {
      const f = await c.next()
      got.set(f.header.requestId, f)
    }
    for (let i = 0; i < n; i++) sameBytes(got.get(i)!.payload, a.subarray(i * 4 * KiB, i * 4 * KiB + 5 * KiB))
    c.close()
  })

  it("Ping, errors for unknown objects and out-of-range reads, zero-length reads", async () => {
    const { put, port } = await setup()
    await put("small", pattern(1000))
    const c = await connect(port)
    c.send(encodeFrame(MsgType.Ping, 42, new Uint8Array(0)))
    const pong = await c.next()
    expect(pong.header).toMatchObject({ type: MsgType.Ping, requestId: 42, flags: 0, length: 0 })

    c.send(encodeGetRangeFrame(1, { object: obj("no/such/key"), offset: 0, len: 10 }))
    const missing = await c.next()
    expect(isError(missing)).toBe(true)
    expect(missing.header).toMatchObject({ type: MsgType.GetRange, requestId: 1 })
    expect(text(missing)).toBe("object s3://bkt/no/such/key does not exist at the origin")

    c.send(encodeGetRangeFrame(2, { object: obj("small"), offset: 990, len: 20 }))
    const oob = await c.next()
    expect(isError(oob)).toBe(true)
    expect(text(oob)).toBe("range out of bounds: offset 990 + len 20 exceeds object size 1000")

    c.send(encodeGetRangeFrame(3, { object: obj("small"), offset: 1000, len: 0 }))
    const empty = await c.next()
    expect(empty.header).toMatchObject({ requestId: 3, flags: 0, length: 0 })

    c.send(encodeGetRangeFrame(4, { object: { backend: Backend.S3, bucket: "bkt", objectPath: "a/../b" }, offset: 0, len: 1 }))
    const bad = await c.next()
    expect(isError(bad)).toBe(true)
    expect(text(bad)).toContain("'..'")

    // The connection is still usable after every error.
    c.send(encodeGetRangeFrame(5, { object: obj("small"), offset: 0, len: 1000 }))
    sameBytes((await c.next()).payload, pattern(1000))
    c.close()
  })

  it("Get returns the whole object; StatObject on the data plane; malformed Put and Delete are refused", async () => {
    const { put, port } = await setup()
    const data = pattern(70 * KiB, 8)
    await put("whole.bin", data)
    const c = await connect(port)
    const w = new BincodeWriter(64)
    writeObjectId(w, obj("whole.bin"))
    c.send(encodeFrame(MsgType.Get, 9, w.finish()))
    const whole = await c.next()
    expect(whole.header).toMatchObject({ type: MsgType.Get, requestId: 9, flags: 0 })
    sameBytes(whole.payload, data)

    c.send(encodeControlFrame(10, { _tag: "StatObject", object: obj("whole.bin") }))
    const stat = await c.next()
    const decoded = decodeControl(stat.payload)
    expect(decoded._tag === "Right" && decoded.right.message).toMatchObject({ _tag: "ObjectStat", size: 70 * KiB })

    c.send(encodeControlFrame(11, { _tag: "MembershipQuery" }))
    const refused = decodeControl((await c.next()).payload)
    expect(refused._tag === "Right" && refused.right.message).toMatchObject({ _tag: "Ack", ok: false })

    // Put and Delete are served (test/worker/server/writes.test.ts); malformed bodies are refused.
    c.send(encodeFrame(MsgType.Delete, 12, new Uint8Array([1, 2, 3])))
    const del = await c.next()
    expect(isError(del)).toBe(true)
    expect(text(del)).toContain("malformed Delete body")

    // A Put header that cannot be read leaves no way to find the end of its body: the connection closes.
    c.send(encodeFrame(MsgType.Put, 13, new Uint8Array([1, 2, 3])))
    const putReply = await c.next()
    expect(isError(putReply)).toBe(true)
    expect(text(putReply)).toContain("malformed Put header")
    expect(await within(c.closed, 5000)).toBe(true)
  })

  it("malformed GetRange bodies get an error frame and the connection stays open", async () => {
    const { put, port } = await setup()
    await put("ok", pattern(100))
    const c = await connect(port)
    const body = Buffer.from([9, 0, 0, 0, 1, 2, 3])
    c.send(Buffer.concat([encodeHeader({ type: MsgType.GetRange, flags: 0, requestId: 5, length: body.length }), body]))
    const f = await c.next()
    expect(isError(f)).toBe(true)
    expect(text(f)).toMatch(/^malformed GetRange body/)
    c.send(encodeGetRangeFrame(6, { object: obj("ok"), offset: 0, len: 100 }))
    sameBytes((await c.next()).payload, pattern(100))
    c.close()
  })

  const violations: Array<[string, Buffer]> = [
    ["bad magic", Buffer.concat([Buffer.from([0x48, 0x54, 1, 2]), Buffer.alloc(12)])],
    ["bad version", (() => { const h = encodeHeader({ type: MsgType.Ping, flags: 0, requestId: 1, length: 0 }); h[2] = 9; return h })()],
    ["unknown type", (() => { const h = encodeHeader({ type: MsgType.Ping, flags: 0, requestId: 1, length: 0 }); h[3] = 77; return h })()],
    ["over-cap GetRange length", encodeHeader({ type: MsgType.GetRange, flags: 0, requestId: 1, length: 64 * KiB + 1 })],
    ["over-cap Ping length", encodeHeader({ type: MsgType.Ping, flags: 0, requestId: 1, length: 5000 })],
    ["garbage", Buffer.from("GET / HTTP/1.1\r\nHost: x\r\n\r\n")]
  ]
  for (const [name, bytes] of violations) {
    const overCap = name.startsWith("over-cap")
    const what = overCap ? "an error frame naming the cap, then closed" : "closed without a reply"
    it(`${name}: that connection gets ${what}; another keeps working`, async () => {
      const { put, port, w } = await setup()
      await put("x", pattern(5000, 5))
      const good = await connect(port)
      const bad = await connect(port)
      // A valid request first, answered, then the violation.
      bad.send(encodeFrame(MsgType.Ping, 1, new Uint8Array(0)))
      expect((await bad.next()).header.type).toBe(MsgType.Ping)
      bad.send(bytes)
      expect(await within(bad.closed, 5000)).toBe(true)
      if (overCap) {
        const notice = await bad.next()
        expect(notice.header.flags & 2).toBe(2)
        expect(notice.header.requestId).toBe(1)
        expect(Buffer.from(notice.payload).toString("utf8")).toMatch(/over the worker's cap of \d+ bytes; closing the connection/)
      }
      expect(bad.backlog()).toBe(0)
      good.send(encodeGetRangeFrame(2, { object: obj("x"), offset: 100, len: 4000 }))
      sameBytes((await good.next()).payload, pattern(5000, 5).subarray(100, 4100))
      expect(w.worker.stats.connectionsDropped).toBe(1)
      good.close()
    })
  }

  it("a truncated frame: half-closed → closed without a reply; left idle → dropped after the read timeout", async () => {
    const { port } = await setup({ readTimeoutMs: 300 })
    const full = encodeGetRangeFrame(1, { object: obj("x"), offset: 0, len: 10 })
    const halfClosed = await connect(port)
    halfClosed.socket.end(full.subarray(0, HEADER_LEN + 5))
    expect(await within(halfClosed.closed, 5000)).toBe(true)
    expect(halfClosed.backlog()).toBe(0)

    // Left idle inside the frame: dropped; an idle connection with no partial frame is not.
    const quiet = await expectReadTimeout(port, full.subarray(0, HEADER_LEN + 5))
    quiet.close()
  })

  it("half-close after pipelined requests: every reply is sent, then the connection closes", async () => {
    const { put, port } = await setup()
    const data = pattern(50 * KiB, 6)
    await put("hc", data)
    const c = await connect(port)
    const frames = Array.from({ length: 10 }, (_, i) => encodeGetRangeFrame(i, { object: obj("hc"), offset: i * 4 * KiB, len: 4 * KiB }))
    c.socket.end(Buffer.concat(frames))
    for (let i = 0; i < 10; i++) {
      const f = await c.next()
      expect(f.header.requestId).toBe(i)
      sameBytes(f.payload, data.subarray(i * 4 * KiB, (i + 1) * 4 * KiB))
    }
    expect(await within(c.closed, 5000)).toBe(true)
  })

  for (const [planeName, plane] of [["portable", Sendfile.Portable], ["auto (native where it loads)", Sendfile.Auto]] as const) {
    it(`a failure after the header is on the wire closes that connection (${planeName} plane); others keep working`, async () => {
      const data = pattern(60 * KiB, 12)
      const { w, put, cache } = await startDirWorker(cleanup, { blockSize: 64 * KiB, pageSize: 0, versionTtlMs: 60_000 }, ServeMode.Pipelined, plane)
      await put("t", data)
      await put("u", data)
      const c = await connect(w.worker.dataPort)
      c.send(encodeGetRangeFrame(1, { object: obj("t"), offset: 0, len: 60 * KiB }))
      sameBytes((await c.next()).payload, data)
      // Corrupt the resident block behind the worker's back: it now holds fewer bytes than it promised.
      const blockFiles: Array<string> = []
      const walk = async (d: string): Promise<void> => {
        for (const e of await fsp.readdir(d, { withFileTypes: true })) {
          if (e.isDirectory()) await walk(path.join(d, e.name))
          else if (e.name === "block") blockFiles.push(path.join(d, e.name))
        }
      }
      await walk(path.join(cache, "v1"))
      expect(blockFiles).toHaveLength(1)
      await fsp.truncate(blockFiles[0]!, 1000)
      let received = 0
      c.socket.on("data", (d: Buffer) => (received += d.length))
      c.send(encodeGetRangeFrame(2, { object: obj("t"), offset: 0, len: 60 * KiB }))
      expect(await within(c.closed, 10_000)).toBe(true)
      expect(received).toBeLessThan(HEADER_LEN + 60 * KiB)
      const other = await connect(w.worker.dataPort)
      other.send(encodeGetRangeFrame(3, { object: obj("u"), offset: 0, len: 60 * KiB }))
      sameBytes((await other.next()).payload, data)
      other.close()
    })
  }

  it("admin HTTP: /healthz, /readyz (standalone = ready), /metrics with the counters", async () => {
    const { put, port, w } = await setup()
    await put("m", pattern(20 * KiB))
    const c = await connect(port)
    c.send(encodeGetRangeFrame(1, { object: obj("m"), offset: 0, len: 20 * KiB }))
    await c.next()
    c.send(encodeGetRangeFrame(2, { object: obj("m"), offset: 0, len: 20 * KiB }))
    await c.next()
    const base = `http://127.0.0.1:${w.worker.adminPort}`
    const health = await fetch(`${base}/healthz`)
    expect(health.status).toBe(200)
    const ready = await fetch(`${base}/readyz`)
    expect(ready.status).toBe(200)
    expect(await ready.text()).toContain("standalone")
    const metrics = await (await fetch(`${base}/metrics`)).text()
    const value = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(metrics)?.[1])
    expect(value("talon_worker_hits_total")).toBe(1)
    expect(value("talon_worker_misses_total")).toBe(1)
    expect(value("talon_worker_bytes_served_total")).toBe(40 * KiB)
    expect(value("talon_worker_origin_fetches_total")).toBe(1) // pages 0 and 1 of block 0, one run
    expect(value("talon_worker_resident_bytes")).toBe(20 * KiB)
    expect(value("talon_worker_connections")).toBe(1)
    expect(value("talon_worker_origin_fetch_seconds_count")).toBe(value("talon_worker_origin_fetches_total"))
    expect(metrics).toMatch(/talon_worker_data_plane_info\{plane="portable",mode="pipelined"\} 1/)
    expect((await fetch(`${base}/nope`)).status).toBe(404)
    c.close()
  })
})
