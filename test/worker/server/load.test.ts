/**
 * Talon's control `Load` on a worker's data port, over a real socket: the range becomes
 * resident (later reads cost no origin bytes), the Ack counts fetched vs already-resident
 * bytes, a second Load fetches nothing, and bad Loads get `Ack{ok:false}` with a reason.
 */
import { Either } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Backend, type ObjectId } from "../../../src/core/ids.js"
import { decodeControl, encodeControlFrame, encodeGetRangeFrame, MsgType, parseLoadAck, type Frame } from "../../../src/protocol/index.js"
import { pattern, startDirWorker } from "../support/dirBackend.js"
import { makeCleanup } from "../support/harness.js"
import { connect } from "../support/rawClient.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const KiB = 1024
const obj = (key: string): ObjectId => ({ backend: Backend.S3, bucket: "bkt", objectPath: key })

const ackOf = (f: Frame) => {
  expect(f.header.type).toBe(MsgType.Control)
  const d = decodeControl(f.payload)
  if (Either.isLeft(d)) throw new Error(d.left.message)
  const m = d.right.message
  if (m._tag !== "Ack") throw new Error(`expected an Ack, got ${m._tag}`)
  return m
}

describe("Load on the worker's data port", () => {
  it("fills the range, counts fetched and resident bytes, and a repeat fetches nothing", async () => {
    const { put, port, origin } = await startDirWorker(cleanup, { blockSize: 64 * KiB, pageSize: 16 * KiB, versionTtlMs: 60_000 })
    const data = pattern(200 * KiB + 123, 3)
    await put("a.bin", data)
    const c = await connect(port)

    // Half a page in the middle first: one page is fetched whole, the Ack counts the range.
    c.send(encodeControlFrame(1, { _tag: "Load", object: obj("a.bin"), offset: 20 * KiB, len: 8 * KiB }))
    const first = ackOf(await c.next())
    expect(first.ok).toBe(true)
    expect(parseLoadAck(first.detail)).toEqual({ fetched: 8 * KiB, resident: 0 })

    // The whole object, with a length past its end (clamped): that page is counted resident.
    c.send(encodeControlFrame(2, { _tag: "Load", object: obj("a.bin"), offset: 0, len: 1 << 30 }))
    const whole = ackOf(await c.next())
    expect(whole.ok).toBe(true)
    expect(parseLoadAck(whole.detail)).toEqual({ fetched: data.length - 16 * KiB, resident: 16 * KiB })
    expect(origin.bytes).toBe(data.length)

    c.send(encodeControlFrame(3, { _tag: "Load", object: obj("a.bin"), offset: 0, len: data.length }))
    const again = ackOf(await c.next())
    expect(parseLoadAck(again.detail)).toEqual({ fetched: 0, resident: data.length })
    const gets = origin.gets
    expect(origin.bytes).toBe(data.length)

    // Reads are hits now: right bytes, no origin traffic.
    c.send(encodeGetRangeFrame(4, { object: obj("a.bin"), offset: 0, len: data.length }))
    const read = await c.next()
    expect(Buffer.compare(read.payload, data)).toBe(0)
    expect(origin.gets).toBe(gets)
    c.close()
  })

  it("answers Ack{ok:false} with the reason for a missing object, a range past the end and a bad name", async () => {
    const { put, port } = await startDirWorker(cleanup, { blockSize: 64 * KiB, pageSize: 16 * KiB })
    await put("small.bin", pattern(1000))
    const c = await connect(port)

    c.send(encodeControlFrame(1, { _tag: "Load", object: obj("missing.bin"), offset: 0, len: 10 }))
    const missing = ackOf(await c.next())
    expect(missing.ok).toBe(false)
    expect(missing.detail).toMatch(/does not exist/)

    c.send(encodeControlFrame(2, { _tag: "Load", object: obj("small.bin"), offset: 5000, len: 10 }))
    const past = ackOf(await c.next())
    expect(past.ok).toBe(false)
    expect(past.detail).toMatch(/past the end of the object \(1000 bytes\)/)

    c.send(encodeControlFrame(3, { _tag: "Load", object: obj("../etc/passwd"), offset: 0, len: 10 }))
    const bad = ackOf(await c.next())
    expect(bad.ok).toBe(false)
    expect(bad.detail).not.toBeNull()

    // The connection still serves after refusals.
    c.send(encodeControlFrame(4, { _tag: "Load", object: obj("small.bin"), offset: 0, len: 1000 }))
    expect(parseLoadAck(ackOf(await c.next()).detail)).toEqual({ fetched: 1000, resident: 0 })
    c.close()
  })

  it("works in whole-block mode", async () => {
    const { put, port, origin } = await startDirWorker(cleanup, { blockSize: 64 * KiB, pageSize: 0 })
    const data = pattern(150 * KiB, 9)
    await put("w.bin", data)
    const c = await connect(port)
    c.send(encodeControlFrame(1, { _tag: "Load", object: obj("w.bin"), offset: 64 * KiB, len: 86 * KiB }))
    expect(parseLoadAck(ackOf(await c.next()).detail)).toEqual({ fetched: 86 * KiB, resident: 0 })
    c.send(encodeControlFrame(2, { _tag: "Load", object: obj("w.bin"), offset: 0, len: data.length }))
    expect(parseLoadAck(ackOf(await c.next()).detail)).toEqual({ fetched: 64 * KiB, resident: 86 * KiB })
    expect(origin.bytes).toBe(data.length)
    c.close()
  })
})
