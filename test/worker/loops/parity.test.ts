/**
 * Parity beyond test/worker/planes.test.ts: the *raw reply bytes* (headers
 * included) of one long pipelined request stream, through every plane × serve
 * mode, while the reader stalls so the native plane's EAGAIN/writability path
 * and the portable plane's backpressure both run mid-stream. The stream mixes
 * 1 MiB ranges across block and page boundaries, small hits, pings and every
 * kind of error a worker answers on an open connection (unknown object, range
 * out of bounds, malformed body, zero-length range, StatObject, Control other
 * than StatObject, StatObject of a missing object), cold and then warm.
 *
 * - pipelined: the whole reply stream is byte-identical across planes;
 * - multiplexed: the same frames (byte-identical each, keyed by request id);
 * - the native runs really hit EAGAIN (the addon's counters moved).
 */
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { FrameDecoder, HEADER_LEN, MsgType, RESPONSE_CAPS } from "../../../src/protocol/index.js"
import { nativeCounters } from "../../../src/worker/plane/Native.js"
import { loadNativeAddon } from "../../../src/worker/plane/NativeAddon.js"
import { Sendfile } from "../../../src/worker/plane/Sendfile.js"
import { ServeMode } from "../../../src/worker/server/ServeMode.js"
import { makeDirBackend, pattern } from "../support/dirBackend.js"
import { makeCleanup, startWorker, tempDir } from "../support/harness.js"
import { exchange, KiB, MiB, requestStream, SIZE } from "./stream.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

describe("raw reply parity under backpressure", () => {
  it("pipelined streams are byte-identical across planes; multiplexed gives the same frames; native hits EAGAIN", async () => {
    const data = pattern(SIZE, 77)
    const root = await tempDir(cleanup, "talon-origin-")
    await fsp.mkdir(path.join(root, "bkt"), { recursive: true })
    await fsp.writeFile(path.join(root, "bkt", "big"), data)
    const frames = requestStream()
    const nativeLoads = loadNativeAddon()._tag === "Loaded"
    const combos = [
      ["portable", Sendfile.Portable, "pipelined", ServeMode.Pipelined],
      ["native", Sendfile.Native, "pipelined", ServeMode.Pipelined],
      ["portable", Sendfile.Portable, "multiplexed", ServeMode.Multiplexed],
      ["native", Sendfile.Native, "multiplexed", ServeMode.Multiplexed]
    ] as const
    const out = new Map<string, { raw: Buffer; byId: Map<number, Buffer> }>()
    for (const [plane, planeLayer, mode, modeLayer] of combos) {
      if (plane === "native" && !nativeLoads) continue
      const origin = makeDirBackend(root)
      const w = await startWorker(
        cleanup,
        origin.layer,
        { cacheDirs: [await tempDir(cleanup, "talon-cache-")], blockSize: MiB, pageSize: 256 * KiB },
        modeLayer,
        planeLayer
      )
      expect(w.worker.dataPlane).toBe(plane)
      const before = nativeCounters()?.eagain ?? 0
      out.set(`${plane}/${mode}/cold`, await exchange(w.worker.dataPort, frames, 300))
      out.set(`${plane}/${mode}/warm`, await exchange(w.worker.dataPort, frames, 300))
      if (plane === "native") expect((nativeCounters()?.eagain ?? 0) - before).toBeGreaterThan(0)
      await w.stop()
    }

    const reference = out.get("portable/pipelined/cold")!
    // Sanity: the reference holds what the stream asks for (so identical replies are not identically empty).
    const decoded = new FrameDecoder(RESPONSE_CAPS)
    decoded.push(reference.raw)
    const kinds = { ok: 0, error: 0, bytes: 0 }
    for (let f = decoded.next(); f !== undefined; f = decoded.next()) {
      if ("_tag" in f) throw new Error(f.message)
      if ((f.header.flags & 2) !== 0 || f.header.type === MsgType.Control) kinds.error++
      else kinds.ok++
      kinds.bytes += f.payload.length
    }
    expect(kinds.ok + kinds.error).toBe(frames.length)
    // Two rounds of the seven cases, six of which are errors (the zero-length range is an empty success).
    expect(kinds.error).toBe(12)
    expect(kinds.bytes).toBeGreaterThan(14 * MiB)
    const firstRange = reference.byId.get(1)!
    const off1 = (0 * 397 * KiB + 4099) % (SIZE - MiB)
    expect(Buffer.compare(firstRange.subarray(HEADER_LEN), data.subarray(off1, off1 + MiB))).toBe(0)

    for (const [name, r] of out) {
      if (name.includes("/pipelined/")) {
        expect(r.raw.length, name).toBe(reference.raw.length)
        expect(Buffer.compare(r.raw, reference.raw), `${name}: raw stream differs from portable/pipelined/cold`).toBe(0)
      } else {
        expect(r.byId.size, name).toBe(frames.length)
        for (const [id, bytes] of reference.byId) expect(Buffer.compare(r.byId.get(id)!, bytes), `${name} #${id}`).toBe(0)
      }
    }
  }, 180_000)
})
