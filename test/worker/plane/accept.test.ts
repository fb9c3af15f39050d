/**
 * The native plane accepts a burst of new connections in batches (libuv alone accepts one
 * per loop turn, which under load kept a burst's first requests waiting for seconds), and
 * every connection it accepted is served like one Node accepted.
 */
import * as fsp from "node:fs/promises"
import * as net from "node:net"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { Backend, type ObjectId } from "../../../src/core/ids.js"
import { encodeGetRangeFrame } from "../../../src/protocol/index.js"
import { nativeCounters } from "../../../src/worker/plane/Native.js"
import { loadNativeAddon } from "../../../src/worker/plane/NativeAddon.js"
import { Sendfile } from "../../../src/worker/plane/Sendfile.js"
import { ServeMode } from "../../../src/worker/server/ServeMode.js"
import { makeDirBackend, pattern } from "../support/dirBackend.js"
import { makeCleanup, startWorker, tempDir } from "../support/harness.js"
import { connect } from "../support/rawClient.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const KiB = 1024
const BURST = 200
const obj: ObjectId = { backend: Backend.S3, bucket: "bkt", objectPath: "a" }
const native = loadNativeAddon()._tag === "Loaded"

describe("native plane: batch accept", () => {
  it.skipIf(!native)(`accepts a burst of ${BURST} connections in batches and serves every one`, async () => {
    const data = pattern(256 * KiB, 7)
    const root = await tempDir(cleanup, "talon-origin-")
    await fsp.mkdir(path.join(root, "bkt"), { recursive: true })
    await fsp.writeFile(path.join(root, "bkt", "a"), data)
    const w = await startWorker(
      cleanup,
      makeDirBackend(root).layer,
      { cacheDirs: [await tempDir(cleanup, "talon-cache-")], blockSize: 64 * KiB, pageSize: 0 },
      ServeMode.Pipelined,
      Sendfile.Native
    )
    expect(w.worker.dataPlane).toBe("native")
    // Warm the object, so the burst below is all hits.
    const warm = await connect(w.worker.dataPort)
    warm.send(encodeGetRangeFrame(1, { object: obj, offset: 0, len: data.length }))
    expect(Buffer.compare((await warm.next()).payload, data)).toBe(0)
    warm.close()

    const before = nativeCounters()!
    // Every connect is issued in this one tick: the handshakes complete in the kernel, so the
    // worker finds the whole burst pending on its listening socket at its next loop turn.
    const conns = await Promise.all(Array.from({ length: BURST }, () => connect(w.worker.dataPort)))
    try {
      conns.forEach((c, i) => c.send(encodeGetRangeFrame(i, { object: obj, offset: (i * 4099) % (200 * KiB), len: 8 * KiB + i })))
      const replies = await Promise.all(conns.map((c) => c.next()))
      replies.forEach((f, i) => {
        const off = (i * 4099) % (200 * KiB)
        expect(f.header.requestId).toBe(i)
        expect(Buffer.compare(f.payload, data.subarray(off, off + 8 * KiB + i)), `connection ${i}`).toBe(0)
      })
    } finally {
      for (const c of conns) c.close()
    }
    const after = nativeCounters()!
    const accepted = after.accepts - before.accepts
    const batches = after.acceptBatches - before.acceptBatches
    // libuv may take the odd one (it watches the fd too); the plane takes the rest, several per call.
    expect(accepted).toBeGreaterThan(BURST / 2)
    expect(batches).toBeLessThan(accepted / 2)
  })

  it.skipIf(!native)("stops accepting when the worker stops: the port is released", async () => {
    const root = await tempDir(cleanup, "talon-origin-")
    const w = await startWorker(cleanup, makeDirBackend(root).layer, { cacheDirs: [await tempDir(cleanup, "talon-cache-")] }, ServeMode.Pipelined, Sendfile.Native)
    const port = w.worker.dataPort
    await w.stop()
    const refused = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, "127.0.0.1")
      s.once("connect", () => (s.destroy(), resolve(false)))
      s.once("error", () => resolve(true))
    })
    expect(refused).toBe(true)
  })
})
