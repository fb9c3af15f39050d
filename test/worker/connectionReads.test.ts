/**
 * How a worker reads its connections, over real sockets, on both planes: the native plane
 * reads the fd itself (recv from the shared epoll fd into one reused buffer, frames cut in
 * place, a frame split across reads carried over), the portable plane through libuv's
 * 'data' events. Same streams, same expected bytes: a request dribbled in one byte per TCP
 * write, hundreds of requests in one write, a connection closed mid-response, a partial
 * frame left idle, a Put (close after its error frame), a bad header after good frames.
 */
import { afterEach, describe, expect, it } from "vitest"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import { encodeFrame, encodeGetRangeFrame, Flags, HEADER_LEN, MsgType, type Frame } from "../../src/protocol/index.js"
import { nativeCounters } from "../../src/worker/plane/Native.js"
import { Sendfile } from "../../src/worker/plane/Sendfile.js"
import { ServeMode } from "../../src/worker/server/ServeMode.js"
import { pattern, startDirWorker } from "./support/dirBackend.js"
import { makeCleanup } from "./support/harness.js"
import { connect, expectReadTimeout, within } from "./support/rawClient.js"
import { eventuallyAsync } from "../support/eventually.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const KiB = 1024
const obj = (key: string): ObjectId => ({ backend: Backend.S3, bucket: "bkt", objectPath: key })
const nativeLoads = nativeCounters() !== undefined

const planes = [
  ...(nativeLoads ? [{ name: "native", layer: Sendfile.Native }] : []),
  { name: "portable", layer: Sendfile.Portable }
] as const
const modes = [
  { name: "pipelined", layer: ServeMode.Pipelined },
  { name: "multiplexed", layer: ServeMode.Multiplexed }
] as const

const setup = async (plane: (typeof planes)[number], mode: (typeof modes)[number], readTimeoutMs = 30_000) => {
  const data = pattern(2 * 1024 * KiB, 17)
  const settings = { blockSize: 256 * KiB, pageSize: 64 * KiB, versionTtlMs: 600_000, readTimeoutMs }
  const { w, put } = await startDirWorker(cleanup, settings, mode.layer, plane.layer)
  await put("blob", data)
  expect(w.worker.dataPlane).toBe(plane.name)
  return { data, w, port: w.worker.dataPort }
}

const isError = (f: Frame) => (f.header.flags & Flags.Error) !== 0
const sameBytes = (got: Uint8Array, want: Uint8Array) => {
  expect(got.length).toBe(want.length)
  expect(Buffer.compare(Buffer.from(got), Buffer.from(want))).toBe(0)
}

/** Replies by request id (multiplexed replies may come in any order). */
const collect = async (next: () => Promise<Frame>, n: number) => {
  const byId = new Map<number, Frame>()
  const order: Array<number> = []
  for (let i = 0; i < n; i++) {
    const f = await next()
    byId.set(f.header.requestId, f)
    order.push(f.header.requestId)
  }
  return { byId, order }
}

for (const plane of planes) {
  for (const mode of modes) {
    describe(`connection reads: ${plane.name} plane, ${mode.name}`, () => {
      it("a request stream dribbled in one byte per TCP write gets exact replies", async () => {
        const { data, port } = await setup(plane, mode)
        const c = await connect(port)
        c.socket.setNoDelay(true)
        const reqs = [
          { id: 1, offset: 0, len: 100 },
          { id: 2, offset: 70 * KiB, len: 64 * KiB },
          { id: 3, offset: 255 * KiB, len: 3 * KiB } // spans two blocks
        ]
        const bytes = Buffer.concat([
          ...reqs.map((r) => encodeGetRangeFrame(r.id, { object: obj("blob"), offset: r.offset, len: r.len })),
          encodeFrame(MsgType.Ping, 4, new Uint8Array(0))
        ])
        const reads0 = nativeCounters()?.recvCalls ?? 0
        for (let i = 0; i < bytes.length; i++) {
          c.send(bytes.subarray(i, i + 1))
          // Let each byte reach the server on its own (a separate read, most of the time).
          await new Promise((r) => setImmediate(r))
        }
        const { byId, order } = await collect(() => c.next(), reqs.length + 1)
        if (mode.name === "pipelined") expect(order).toEqual([1, 2, 3, 4])
        for (const r of reqs) sameBytes(byId.get(r.id)!.payload, data.subarray(r.offset, r.offset + r.len))
        expect(byId.get(4)!.header.type).toBe(MsgType.Ping)
        // The native plane read this connection itself, in many small reads.
        if (plane.name === "native") expect((nativeCounters()?.recvCalls ?? 0) - reads0).toBeGreaterThan(20)
        c.close()
      })

      it("hundreds of requests in one write (hits, misses, errors, pings) get every reply", async () => {
        const { data, port } = await setup(plane, mode)
        const c = await connect(port)
        const n = 600
        const frames: Array<Uint8Array> = []
        const want = new Map<number, Uint8Array | "error" | "ping">()
        for (let i = 0; i < n; i++) {
          const id = 10_000 + i
          if (i % 97 === 5) {
            frames.push(encodeGetRangeFrame(id, { object: obj("blob"), offset: data.length - 10, len: 20 }))
            want.set(id, "error")
          } else if (i % 50 === 7) {
            frames.push(encodeFrame(MsgType.Ping, id, new Uint8Array(0)))
            want.set(id, "ping")
          } else {
            const offset = ((i * 7919) % 2000) * KiB
            const len = 1 + ((i * 131) % (16 * KiB))
            frames.push(encodeGetRangeFrame(id, { object: obj("blob"), offset, len }))
            want.set(id, data.subarray(offset, offset + len))
          }
        }
        c.send(Buffer.concat(frames))
        const { byId, order } = await collect(() => c.next(), n)
        if (mode.name === "pipelined") expect(order).toEqual([...want.keys()])
        for (const [id, w] of want) {
          const f = byId.get(id)!
          if (w === "error") expect(isError(f)).toBe(true)
          else if (w === "ping") expect(f.header.type).toBe(MsgType.Ping)
          else sameBytes(f.payload, w)
        }
        c.close()
      })

      it("a connection closed mid-response is dropped alone; the next one is served", async () => {
        const { data, port, w } = await setup(plane, mode)
        const warm = await connect(port)
        warm.send(encodeGetRangeFrame(1, { object: obj("blob"), offset: 0, len: data.length }))
        sameBytes((await warm.next()).payload, data)
        warm.close()

        const quitter = await connect(port)
        // 64 MiB of replies: far more than the socket buffers hold, so the server is mid-response.
        quitter.send(
          Buffer.concat(Array.from({ length: 32 }, (_, i) => encodeGetRangeFrame(i, { object: obj("blob"), offset: 0, len: data.length })))
        )
        await new Promise<void>((r) => quitter.socket.once("data", () => r()))
        quitter.socket.resetAndDestroy()
        await quitter.closed

        const next = await connect(port)
        next.send(encodeGetRangeFrame(99, { object: obj("blob"), offset: 512 * KiB, len: 300 * KiB }))
        const f = await next.next()
        expect(f.header.requestId).toBe(99)
        sameBytes(f.payload, data.subarray(512 * KiB, 812 * KiB))
        next.close()
        await next.closed
        // Every connection is gone from the server, and every pin it held was returned.
        await eventuallyAsync(() => expect(w.worker.stats.connectionsOpen).toBe(0), { what: "every connection gone from the server" })
      })

      it("a partial frame left idle is dropped after the read timeout; an idle connection is not; half-close gets every reply", async () => {
        const { data, port } = await setup(plane, mode, 300)
        const full = encodeGetRangeFrame(1, { object: obj("blob"), offset: 0, len: 10 })
        const quiet = await expectReadTimeout(port, full.subarray(0, HEADER_LEN + 5))
        // Then a partial frame on the same connection: dropped too (the timer still runs).
        quiet.send(full.subarray(0, 7))
        expect(await within(quiet.closed, 10_000)).toBe(true)

        const half = await connect(port)
        half.socket.end(
          Buffer.concat([
            encodeGetRangeFrame(5, { object: obj("blob"), offset: 4 * KiB, len: 200 * KiB }),
            encodeGetRangeFrame(6, { object: obj("blob"), offset: 1, len: 2 })
          ])
        )
        const { byId } = await collect(() => half.next(), 2)
        sameBytes(byId.get(5)!.payload, data.subarray(4 * KiB, 204 * KiB))
        sameBytes(byId.get(6)!.payload, data.subarray(1, 3))
        expect(await within(half.closed, 5000)).toBe(true)
      })

      it("a Put gets its error frame, then the connection closes; a bad header after good frames closes after their replies", async () => {
        const { data, port } = await setup(plane, mode)
        const put = await connect(port)
        put.send(Buffer.concat([encodeFrame(MsgType.Put, 13, new Uint8Array([1, 2, 3])), Buffer.from("raw put body, not frames")]))
        const reply = await put.next()
        expect(reply.header.requestId).toBe(13)
        expect(isError(reply)).toBe(true)
        expect(await within(put.closed, 5000)).toBe(true)

        // A protocol violation drops the connection at once: replies already written (hits and
        // pings are written before the parser reaches the next frame) may arrive, nothing after.
        const warm = await connect(port)
        warm.send(encodeGetRangeFrame(1, { object: obj("blob"), offset: 0, len: 1000 }))
        sameBytes((await warm.next()).payload, data.subarray(0, 1000))
        warm.close()
        const bad = await connect(port)
        const junk = Buffer.alloc(HEADER_LEN, 0xee)
        bad.send(
          Buffer.concat([
            encodeGetRangeFrame(1, { object: obj("blob"), offset: 0, len: 1000 }),
            encodeFrame(MsgType.Ping, 2, new Uint8Array(0)),
            junk,
            encodeFrame(MsgType.Ping, 3, new Uint8Array(0))
          ])
        )
        expect(await within(bad.closed, 5000)).toBe(true)
        const got: Array<Frame> = []
        while (bad.backlog() > 0) got.push(await bad.next())
        expect(got.map((f) => f.header.requestId)).toEqual([1, 2].slice(0, got.length))
        if (got.length > 0) sameBytes(got[0]!.payload, data.subarray(0, 1000))
        expect(await within(bad.closed, 5000)).toBe(true)
      })
    })
  }
}
