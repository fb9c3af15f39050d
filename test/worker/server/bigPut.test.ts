/**
 * A 300 MiB Put through a worker running as its own process (`talon worker`), to the origin
 * stub on /dev/shm: the body is streamed, so the worker's peak RSS grows by a small bound, not
 * by the body; the origin holds exactly the bytes sent, and reads through the cache (first,
 * middle and last pieces) are those bytes. The peak is the kernel's (VmHWM), nothing is timed.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import * as net from "node:net"
import * as path from "node:path"
import { ManagedRuntime } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { Backend } from "../../../src/core/ids.js"
import { OriginStub } from "../../../src/origin/OriginStub.js"
import { decodeErrorPayload, encodePutFrame, Flags, FrameDecoder, RESPONSE_CAPS } from "../../../src/protocol/index.js"
import { makeCleanup, tempDir } from "../support/harness.js"
import { readRange } from "../support/rawClient.js"
import { spawnWorker, stubCredentials } from "../support/workerProcess.js"

const cleanup = makeCleanup()
afterAll(() => cleanup.run())

const MiB = 1024 * 1024
const SIZE = 300 * MiB

/** Piece `i` of the body: 1 MiB, different per piece (its index in the first bytes). */
const piece = (base: Buffer, i: number): Buffer => {
  const b = Buffer.from(base)
  b.writeUInt32LE(i, 0)
  b.writeUInt32LE(i * 2654435761 >>> 0, MiB - 4)
  return b
}

const peakRss = (pid: number): number => {
  const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))
  return Number(m![1]) * 1024
}

describe("a 300 MiB Put through a worker process", () => {
  it("streams to the origin with bounded worker memory and reads back byte-exact", async () => {
    const shm = fs.existsSync("/dev/shm") ? "/dev/shm" : undefined
    const root = shm === undefined ? await tempDir(cleanup, "talon-bigput-origin-") : await fsp.mkdtemp(path.join(shm, "talon-bigput-"))
    if (shm !== undefined) cleanup.add(() => fsp.rm(root, { recursive: true, force: true }))
    await fsp.mkdir(path.join(root, "big"), { recursive: true })
    const runtime = ManagedRuntime.make(OriginStub.layer({ root }))
    cleanup.add(() => runtime.dispose())
    const stub = await runtime.runPromise(OriginStub)
    const cache = await tempDir(cleanup, "talon-bigput-cache-")
    const worker = spawnWorker(
      cleanup,
      ["--coordinator", "", "--data-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--cache-dir", cache, "--capacity", "64M"],
      { TALON_S3_ENDPOINT: stub.url, ...stubCredentials }
    )
    const port = Number((await worker.waitFor(/worker data listener on 127\.0\.0\.1:(\d+)/))[1])
    const pid = worker.child.pid!
    const before = peakRss(pid)

    const object = { backend: Backend.S3, bucket: "big", objectPath: "model.bin" }
    const base = Buffer.alloc(MiB)
    for (let i = 0; i < MiB; i += 4) base.writeUInt32LE((i * 2246822519) >>> 0, i)
    const hash = createHash("sha256")
    const reply = await new Promise<{ flags: number; payload: Buffer }>((resolve, reject) => {
      const socket = net.connect({ port, host: "127.0.0.1" })
      const decoder = new FrameDecoder(RESPONSE_CAPS)
      socket.on("error", reject)
      socket.on("data", (chunk) => {
        decoder.push(chunk)
        const f = decoder.next()
        if (f === undefined) return
        socket.destroy()
        if ("_tag" in f) reject(new Error(f.message))
        else resolve({ flags: f.header.flags, payload: f.payload })
      })
      socket.once("connect", async () => {
        socket.write(encodePutFrame(1, { object, bodyLen: SIZE }))
        for (let i = 0; i < SIZE / MiB; i++) {
          const p = piece(base, i)
          hash.update(p)
          if (!socket.write(p)) await new Promise((r) => socket.once("drain", r))
        }
      })
    })
    expect(reply.flags & Flags.Error, reply.flags ? decodeErrorPayload(reply.payload).message : "").toBe(0)
    const growth = peakRss(pid) - before
    console.log(`worker peak RSS ${(before / MiB).toFixed(0)} MiB before, +${(growth / MiB).toFixed(1)} MiB after a ${SIZE / MiB} MiB Put`)
    expect(growth).toBeLessThan(64 * MiB)

    // Straight from the origin: exactly the bytes sent.
    const stored = path.join(root, "big", "model.bin")
    expect(fs.statSync(stored).size).toBe(SIZE)
    const atOrigin = createHash("sha256")
    for await (const chunk of fs.createReadStream(stored, { highWaterMark: 4 * MiB })) atOrigin.update(chunk as Buffer)
    expect(atOrigin.digest("hex")).toBe(hash.digest("hex"))

    // Through the cache: the first, a middle and the last pieces.
    for (const i of [0, 150, 299]) {
      const r = await readRange(port, object, i * MiB, MiB)
      expect(r.ok && Buffer.compare(r.bytes, piece(base, i))).toBe(0)
    }
  }, 240_000)
})
