/**
 * The same request streams through every plane × serve mode give identical
 * bytes (including an error in the middle of a pipelined stream), and two
 * workers built in one program share nothing.
 */
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import { Layer, ManagedRuntime } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import { encodeFrame, encodeGetRangeFrame, Flags, MsgType, type Frame } from "../../src/protocol/index.js"
import { WorkerConfig } from "../../src/worker/config.js"
import { loadNativeAddon } from "../../src/worker/plane/NativeAddon.js"
import { Sendfile } from "../../src/worker/plane/Sendfile.js"
import { ServeMode } from "../../src/worker/server/ServeMode.js"
import { Worker } from "../../src/worker/Worker.js"
import { makeDirBackend, pattern } from "./support/dirBackend.js"
import { makeCleanup, startWorker, tempDir } from "./support/harness.js"
import { connect } from "./support/rawClient.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const KiB = 1024
const obj = (key: string): ObjectId => ({ backend: Backend.S3, bucket: "bkt", objectPath: key })

const originWith = async (objects: Record<string, Uint8Array>) => {
  const root = await tempDir(cleanup, "talon-origin-")
  for (const [key, bytes] of Object.entries(objects)) {
    await fsp.mkdir(path.join(root, "bkt"), { recursive: true })
    await fsp.writeFile(path.join(root, "bkt", key), bytes)
  }
  return makeDirBackend(root)
}

/** A canonical, order-independent record of the replies: id → error text or bytes (hex digest-free compare). */
const collect = async (port: number, frames: ReadonlyArray<Buffer>): Promise<Map<number, string | Buffer>> => {
  const c = await connect(port)
  c.send(Buffer.concat(frames))
  const out = new Map<number, string | Buffer>()
  for (let i = 0; i < frames.length; i++) {
    const f: Frame = await c.next()
    out.set(f.header.requestId, (f.header.flags & Flags.Error) !== 0 ? `ERR ${f.payload.toString("utf8")}` : Buffer.from(f.payload))
  }
  c.close()
  return out
}

describe("planes × serve modes", () => {
  it("native/auto and portable, pipelined and multiplexed: identical replies for the same stream", async () => {
    const a = pattern(300 * KiB, 41)
    const frames: Array<Buffer> = []
    for (let i = 0; i < 60; i++) {
      if (i === 17) frames.push(encodeGetRangeFrame(i, { object: obj("missing"), offset: 0, len: 5 }))
      else if (i === 33) frames.push(encodeGetRangeFrame(i, { object: obj("a"), offset: 299 * KiB, len: 2 * KiB }))
      else if (i % 10 === 5) frames.push(encodeFrame(MsgType.Ping, i, new Uint8Array(0)))
      else {
        const off = (i * 48_611) % (280 * KiB)
        frames.push(encodeGetRangeFrame(i, { object: obj("a"), offset: off, len: 1 + ((i * 977) % (20 * KiB)) }))
      }
    }
    const results: Array<[string, Map<number, string | Buffer>]> = []
    for (const [planeName, plane] of [["portable", Sendfile.Portable], ["auto", Sendfile.Auto]] as const) {
      for (const [modeName, mode] of [["pipelined", ServeMode.Pipelined], ["multiplexed", ServeMode.Multiplexed]] as const) {
        const origin = await originWith({ a })
        const w = await startWorker(
          cleanup,
          origin.layer,
          { cacheDirs: [await tempDir(cleanup, "talon-cache-")], blockSize: 64 * KiB, pageSize: 8 * KiB },
          mode,
          plane
        )
        // Cold, then the same stream warm.
        results.push([`${w.worker.dataPlane}/${modeName} cold`, await collect(w.worker.dataPort, frames)])
        results.push([`${w.worker.dataPlane}/${modeName} warm`, await collect(w.worker.dataPort, frames)])
        if (planeName === "portable") expect(w.worker.dataPlane).toBe("portable")
        // Auto runs native wherever the addon loads (it is built at npm install on Linux).
        else if (loadNativeAddon()._tag !== "Unavailable") expect(w.worker.dataPlane).toBe("native")
        await w.stop()
      }
    }
    const [, reference] = results[0]!
    expect(reference.get(17)).toBe("ERR object s3://bkt/missing does not exist at the origin")
    expect(reference.get(33)).toBe(`ERR range out of bounds: offset ${299 * KiB} + len ${2 * KiB} exceeds object size ${300 * KiB}`)
    for (const [name, r] of results) {
      expect(r.size, name).toBe(frames.length)
      for (const [id, v] of reference) {
        const got = r.get(id)
        if (typeof v === "string") expect(got, `${name} #${id}`).toBe(v)
        else expect(Buffer.isBuffer(got) && Buffer.compare(got, v) === 0, `${name} #${id}`).toBe(true)
      }
    }
  })
})

describe("several workers in one program", () => {
  it("each Worker.layer build has its own store, listener and counters", async () => {
    const data = pattern(40 * KiB, 42)
    const origin = await originWith({ a: data })
    const worker = async (name: string) => {
      const cache = await tempDir(cleanup, `talon-cache-${name}-`)
      return Worker.layer.pipe(
        Layer.provide(
          WorkerConfig.layerSettings({
            id: name,
            dataAddress: "127.0.0.1:0",
            adminAddress: "127.0.0.1:0",
            coordinator: "",
            cacheDirs: [cache],
            blockSize: 64 * KiB,
            pageSize: 0,
            dataPlane: "portable"
          })
        )
      )
    }
    class W1 extends (await import("effect")).Context.Tag("test/W1")<W1, Worker["Type"]>() {}
    class W2 extends (await import("effect")).Context.Tag("test/W2")<W2, Worker["Type"]>() {}
    const both = Layer.mergeAll(
      Layer.effect(W1, Worker).pipe(Layer.provide(await worker("one"))),
      Layer.effect(W2, Worker).pipe(Layer.provide(await worker("two")))
    ).pipe(Layer.provide(origin.layer))
    const rt = ManagedRuntime.make(both)
    cleanup.add(() => rt.dispose())
    const one = await rt.runPromise(W1)
    const two = await rt.runPromise(W2)
    expect(one.node.id).toBe("one")
    expect(two.node.id).toBe("two")
    expect(one.dataPort).not.toBe(two.dataPort)
    expect(one.store).not.toBe(two.store)
    const c = await connect(one.dataPort)
    c.send(encodeGetRangeFrame(1, { object: obj("a"), offset: 0, len: 40 * KiB }))
    expect(Buffer.compare((await c.next()).payload, data)).toBe(0)
    c.close()
    expect(one.store.blockCount).toBe(1)
    expect(two.store.blockCount).toBe(0)
    expect(one.stats.misses).toBe(1)
    expect(two.stats.misses).toBe(0)
  })
})
