/**
 * Floods over real connections against a coordinator and a worker, each its own
 * process: 320 MiB Put headers followed by body bytes, and peers that pipeline
 * requests whose replies (Ping echoes, error frames) they never read. The
 * server's VmRSS is sampled throughout and must stay bounded; afterwards it
 * still serves a clean client byte for byte.
 */
import * as net from "node:net"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import { WorkerPool } from "../../src/client/WorkerPool.js"
import { Backend } from "../../src/core/ids.js"
import { MsgType, encodeFrame, encodeHeader } from "../../src/protocol/index.js"
import type { Child } from "../cluster/fixtures/processes.js"
import { coordinatorOn, isRunning, originWith, outputs, pollUntil, report, startWorker, tempDir, vmRssKiB } from "./fixtures/talon.js"

const MiB = 1024 * 1024
const BLOCK = MiB
const SIZE = 2 * MiB + 99
const URI = "s3://faults/flood.bin"
/** Growth allowed while flooded: a fraction of the 64 MiB each flood offers (and of 320 MiB per Put). */
const RSS_SLACK_KIB = 64 * 1024

interface Flood {
  readonly name: string
  /** One batch of frames, repeated up to `total` bytes. */
  readonly batch: Buffer
  readonly header?: Buffer
}

const repeat = (frame: Buffer, n: number) => Buffer.concat(Array.from({ length: n }, () => frame))
const floods: ReadonlyArray<Flood> = [
  { name: "Ping echoes never read", batch: repeat(encodeFrame(MsgType.Ping, 1, new Uint8Array(0)), 4096) },
  // 20 bytes in, ~100 bytes of error frame out: the amplifying case.
  { name: "error replies never read", batch: repeat(encodeFrame(MsgType.Delete, 2, new Uint8Array(4)), 4096) },
  {
    name: "320 MiB Put header then body bytes",
    header: encodeHeader({ type: MsgType.Put, flags: 0, requestId: 3, length: 320 * MiB }),
    batch: Buffer.alloc(64 * 1024, 0x55)
  }
]

/**
 * Writes up to `totalBytes` on one connection that never reads, honouring TCP backpressure:
 * stops when everything is written, the server closes, or it takes nothing for `stallMs`.
 * Samples the server's RSS meanwhile; returns bytes written and the peak RSS.
 */
const flood = (port: number, pid: number, f: Flood, totalBytes: number, stallMs = 1500) =>
  Effect.promise(
    () =>
      new Promise<{ written: number; peakKiB: number; closedByServer: boolean }>((resolve) => {
        const socket = net.connect({ port, host: "127.0.0.1" })
        socket.pause()
        let written = 0
        let peakKiB = vmRssKiB(pid)
        let closedByServer = false
        let stall: NodeJS.Timeout | undefined
        const sampler = setInterval(() => (peakKiB = Math.max(peakKiB, vmRssKiB(pid))), 50)
        let finished = false
        const done = () => {
          if (finished) return
          finished = true
          clearInterval(sampler)
          clearTimeout(stall)
          peakKiB = Math.max(peakKiB, vmRssKiB(pid))
          socket.destroy()
          resolve({ written, peakKiB, closedByServer })
        }
        socket.on("error", () => {})
        socket.on("close", () => {
          closedByServer = true
          done()
        })
        const pump = () => {
          clearTimeout(stall)
          while (written < totalBytes) {
            written += f.batch.length
            if (!socket.write(f.batch)) {
              stall = setTimeout(done, stallMs)
              socket.once("drain", pump)
              return
            }
          }
          // Everything written: give the server a moment to act on it, then stop.
          stall = setTimeout(done, stallMs)
        }
        socket.on("connect", () => {
          if (f.header !== undefined) socket.write(f.header)
          pump()
        })
      })
  )

const runFloods = (label: string, port: number, child: Child, clean: Effect.Effect<boolean, unknown>) =>
  Effect.gen(function* () {
    const lines: Array<string> = []
    for (const f of floods) {
      const before = vmRssKiB(child.pid)
      const r = yield* flood(port, child.pid, f, 64 * MiB)
      expect(isRunning(child)).toBe(true)
      expect(r.peakKiB - before, `${label}: ${f.name}`).toBeLessThan(RSS_SLACK_KIB)
      expect(yield* clean).toBe(true)
      lines.push(
        `${f.name}: took ${(r.written / MiB).toFixed(1)} of 64 MiB${r.closedByServer ? ", then closed it" : ""}, ` +
          `RSS ${(before / 1024).toFixed(0)} -> peak ${(r.peakKiB / 1024).toFixed(0)} MiB`
      )
    }
    yield* report(`${label} flood: ${lines.join("; ")}`)
  })

describe("wire floods", () => {
  it.live(
    "a coordinator process stays bounded under Put and unread-reply floods and keeps serving",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const dir = yield* tempDir
          const origin = yield* originWith(dir, { "flood.bin": SIZE })
          const coordinator = yield* coordinatorOn(origin, 500)
          const child = yield* coordinator.start
          const client = yield* makeTalonClient({ coordinator: coordinator.address, blockSize: BLOCK })
          yield* pollUntil(client.stat(URI), (s) => s.size === SIZE, 120_000, () => `no coordinator:\n${outputs([["coordinator", child]])}`, 200)
          const clean = Effect.map(client.stat(URI), (s) => s.size === SIZE)
          yield* runFloods("coordinator", Number(coordinator.address.split(":")[1]), child, clean)
        })
      ),
    240_000
  )

  it.live(
    "a worker process stays bounded under Put and unread-reply floods and keeps serving",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const dir = yield* tempDir
          const origin = yield* originWith(dir, { "flood.bin": SIZE })
          const bytes = origin.objects.get(URI)!
          const worker = yield* startWorker(dir, origin, { id: "flooded", coordinator: "", blockSize: BLOCK, heartbeatMs: 1000 })
          const clean = Effect.gen(function* () {
            const pool = new WorkerPool({ connectionsPerWorker: 1, requestTimeout: "20 seconds", connectTimeout: "2 seconds", maxRequestBytes: 8 * MiB })
            const object = { backend: Backend.S3, bucket: "faults", objectPath: "flood.bin" }
            const got = yield* pool.getRange(worker.address, object, 0, SIZE).pipe(Effect.ensuring(Effect.sync(() => pool.close())))
            return Buffer.from(got).equals(bytes)
          })
          yield* pollUntil(clean, (ok) => ok, 120_000, () => `worker did not start:\n${outputs([["worker", worker.child]])}`, 200)
          yield* runFloods("worker", Number(worker.address.split(":")[1]), worker.child, clean)
        })
      ),
    240_000
  )
})
