/**
 * What a worker process does with a byte stream it cannot resynchronise (bad
 * magic, bad version, an unknown message type, a length over the type's cap),
 * found by the wire fuzz: it stops parsing at the bad header, still answers the
 * requests that came before it (even one waiting on the origin), tells a body
 * over its cap in an error frame, and closes; it keeps serving everyone else.
 * Bad magic, version or type get no frame, as in Talon's reference server: the
 * peer does not speak the protocol, and no decoder could read such a reply.
 */
import * as net from "node:net"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Backend } from "../../src/core/ids.js"
import { Flags, FrameDecoder, MsgType, RESPONSE_CAPS, encodeFrame, encodeGetRangeFrame, encodeHeader, type Frame } from "../../src/protocol/index.js"
import { WORKER_CAPS } from "../../src/worker/server/DataServer.js"
import { WorkerPool } from "../../src/client/WorkerPool.js"
import { originWith, outputs, pollUntil, startWorker, tempDir } from "./fixtures/talon.js"

const BLOCK = 1024 * 1024
const SIZE = 5 * BLOCK + 77
const object = { backend: Backend.S3, bucket: "faults", objectPath: "framing.bin" }

/** Sends `bytes`, collects reply frames until the worker closes the connection. */
const exchange = (port: number, bytes: Buffer, ...later: ReadonlyArray<readonly [number, Buffer]>) =>
  Effect.promise(
    () =>
      new Promise<{ frames: Array<Frame>; closed: boolean }>((resolve) => {
        const frames: Array<Frame> = []
        const decoder = new FrameDecoder(RESPONSE_CAPS)
        const socket = net.connect({ port, host: "127.0.0.1" })
        const timer = setTimeout(() => {
          socket.destroy()
          resolve({ frames, closed: false })
        }, 10_000)
        socket.on("data", (chunk: Buffer) => {
          decoder.push(chunk)
          for (let f = decoder.next(); f !== undefined && "header" in f; f = decoder.next()) frames.push(f)
        })
        socket.on("error", () => {})
        socket.on("close", () => {
          clearTimeout(timer)
          resolve({ frames, closed: true })
        })
        socket.on("connect", () => {
          socket.write(bytes)
          for (const [delayMs, more] of later) setTimeout(() => socket.write(more), delayMs)
        })
      })
  )

const badFrames: ReadonlyArray<readonly [string, Buffer]> = [
  ["bad magic", Buffer.from(encodeFrame(MsgType.Ping, 9, new Uint8Array(0))).fill(0x42, 0, 2)],
  ["bad version", Buffer.from(encodeFrame(MsgType.Ping, 9, new Uint8Array(0))).fill(7, 2, 3)],
  ["unknown type 200", Buffer.from(encodeFrame(MsgType.Ping, 9, new Uint8Array(0))).fill(200, 3, 4)],
  ["GetRange over its cap", encodeHeader({ type: MsgType.GetRange, flags: 0, requestId: 9, length: WORKER_CAPS.getRange + 1 })]
]

/** `originMs`: the origin's delay per request, so a miss is still waiting on it when the bad frame arrives. */
const withWorker = <A, E>(body: (port: number) => Effect.Effect<A, E>, originMs = 0) =>
  Effect.scoped(
    Effect.gen(function* () {
      const dir = yield* tempDir
      const origin = yield* originWith(dir, { "framing.bin": SIZE }, originMs > 0 ? { latency: { kind: "fixed", ms: originMs } } : undefined)
      const worker = yield* startWorker(dir, origin, { id: "framing", coordinator: "", blockSize: BLOCK, heartbeatMs: 1000 })
      const pool = new WorkerPool({ connectionsPerWorker: 1, requestTimeout: "20 seconds", connectTimeout: "2 seconds", maxRequestBytes: BLOCK })
      yield* Effect.addFinalizer(() => Effect.sync(() => pool.close()))
      yield* pollUntil(pool.getRange(worker.address, object, 0, 1), () => true, 120_000, () => outputs([["worker", worker.child]]), 200)
      return yield* body(Number(worker.address.split(":")[1]))
    })
  )

const range = encodeGetRangeFrame(1, { object, offset: 0, len: 16 })

describe("worker data port: framing errors", () => {
  it.live("every framing error closes that connection (the worker keeps serving others)", () =>
    withWorker((port) =>
      Effect.gen(function* () {
        for (const [, bad] of badFrames) expect((yield* exchange(port, bad)).closed).toBe(true)
        const ok = yield* exchange(port, Buffer.concat([range, encodeHeader({ type: MsgType.Put, flags: 0, requestId: 2, length: 1 << 30 })]))
        expect(ok.frames[0]?.header.requestId).toBe(1)
      })
    ), 180_000
  )

  it.live("a body over its type's cap is answered with an error frame naming the cap before the close; other violations just close", () =>
    withWorker((port) =>
      Effect.gen(function* () {
        for (const [name, bad] of badFrames) {
          const r = yield* exchange(port, bad)
          expect(r.closed, name).toBe(true)
          const errors = r.frames.filter((f) => (f.header.flags & Flags.Error) !== 0)
          if (name === "GetRange over its cap") {
            expect(errors.length, name).toBe(1)
            expect(errors[0]!.header.requestId).toBe(9)
            expect(Buffer.from(errors[0]!.payload).toString("utf8")).toMatch(/over the worker's cap of \d+ bytes/)
          } else expect(r.frames.length, name).toBe(0)
        }
      })
    ), 180_000
  )

  it.live("a GetRange waiting on the origin (300 ms), followed 5 ms later by a framing error, still gets its reply", () =>
    withWorker((port) =>
      Effect.gen(function* () {
        let block = 1
        for (const [name, bad] of badFrames) {
          // A block nobody read yet: the reply waits on the origin while the bad frame arrives.
          const miss = encodeGetRangeFrame(1, { object, offset: block++ * BLOCK, len: 16 })
          const r = yield* exchange(port, miss, [5, bad])
          expect(r.closed, name).toBe(true)
          expect(r.frames.find((f) => f.header.requestId === 1)?.payload.length, `${name}: the GetRange sent before it`).toBe(16)
        }
      }), 300
    ), 180_000
  )
})
