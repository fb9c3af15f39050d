/**
 * AdmitCachedBlock (type 7) over real sockets: a complete block of a named version, its raw body
 * after the frame (sent in one write and split across writes), is stored without the origin and
 * then served; over capacity it evicts like a fill; a bad header
 * (length, alignment, block size, no version) gets a typed InvalidRequest and the connection
 * closes before the body could be read as frames; a body cut short admits nothing.
 */
import { afterEach, describe, expect, it } from "vitest"
import { Backend, type BlockId, type ObjectId } from "../../src/core/ids.js"
import {
  DataErrorCode,
  decodeErrorPayload,
  encodeAdmitCachedBlockHeader,
  encodeGetCachedRangeFrame,
  Flags,
  MsgType,
  type CachedBlockPutRequest,
  type Frame
} from "../../src/protocol/index.js"
import { pattern, startDirWorker } from "./support/dirBackend.js"
import { makeCleanup } from "./support/harness.js"
import { connect } from "./support/rawClient.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const KiB = 1024
const BLOCK = 64 * KiB
const obj = (key: string): ObjectId => ({ backend: Backend.S3, bucket: "bkt", objectPath: key })
const block = (key: string, offset: number, version = "v1"): BlockId => ({ object: obj(key), offset, blockSize: BLOCK, version })
const typed = (f: Frame) => {
  expect(f.header.flags & Flags.Error).toBe(Flags.Error)
  return decodeErrorPayload(f.payload)
}
const ok = (f: Frame, want: Uint8Array) => {
  expect(f.header.flags & Flags.Error, Buffer.from(f.payload).toString()).toBe(0)
  expect(f.header.type).toBe(MsgType.GetRange)
  expect(Buffer.compare(f.payload, Buffer.from(want))).toBe(0)
}

describe("AdmitCachedBlock", () => {
  it("stores a whole block without the origin, serves it, and evicts like a fill over capacity", async () => {
    const { w, origin } = await startDirWorker(cleanup, { blockSize: BLOCK, pageSize: 16 * KiB, capacity: 2 * BLOCK, versionTtlMs: 600_000 })
    const data = pattern(3 * BLOCK + 100, 3)
    const c = await connect(w.worker.dataPort)
    let id = 1
    const admit = async (offset: number, split = false) => {
      const r: CachedBlockPutRequest = { block: block("a.bin", offset), objectLen: data.length, bodyLen: Math.min(BLOCK, data.length - offset) }
      const head = encodeAdmitCachedBlockHeader(id++, r)
      const body = data.subarray(offset, offset + r.bodyLen)
      if (split) {
        // Header and the first bytes in one write, the rest in two more.
        c.send(Buffer.concat([head, body.subarray(0, 10)]))
        c.send(body.subarray(10, 5000))
        c.send(body.subarray(5000))
      } else c.send(Buffer.concat([head, body]))
      const f = await c.next()
      expect(f.header.flags & Flags.Error, Buffer.from(f.payload).toString()).toBe(0)
      expect(f.header).toMatchObject({ type: MsgType.GetRange, length: 0 })
    }
    const probe = (offset: number, len: number) => {
      c.send(encodeGetCachedRangeFrame(id++, { object: obj("a.bin"), version: "v1", offset, len }))
      return c.next()
    }

    await admit(0)
    // The last block is short (100 bytes): its exact length is the whole block.
    await admit(3 * BLOCK, true)
    ok(await probe(100, BLOCK - 200), data.subarray(100, BLOCK - 100))
    ok(await probe(3 * BLOCK, 100), data.subarray(3 * BLOCK))
    // Pipelined: a read queued behind an admission on the same connection still comes in order.
    c.send(encodeGetCachedRangeFrame(id++, { object: obj("a.bin"), version: "v1", offset: 0, len: 10 }))
    ok(await c.next(), data.subarray(0, 10))
    expect({ stats: origin.stats, gets: origin.gets }).toEqual({ stats: 0, gets: 0 })

    // Two more blocks in a cache of two: the coldest admitted block goes, the newest stays.
    await admit(BLOCK)
    await admit(2 * BLOCK)
    expect(typed(await probe(0, BLOCK)).code).toBe(DataErrorCode.CacheMiss)
    ok(await probe(2 * BLOCK, BLOCK), data.subarray(2 * BLOCK, 3 * BLOCK))
    c.close()
  })

  it("refuses a bad header with a typed InvalidRequest and closes; a cut body admits nothing", async () => {
    const { w } = await startDirWorker(cleanup, { blockSize: BLOCK, pageSize: 16 * KiB, versionTtlMs: 600_000 })
    const cases: Array<[CachedBlockPutRequest, string]> = [
      [{ block: block("x", 0), objectLen: 100 * KiB, bodyLen: BLOCK - 1 }, "does not match complete block length 65536"],
      [{ block: block("x", BLOCK), objectLen: 100 * KiB, bodyLen: BLOCK }, "does not match complete block length 36864"],
      [{ block: block("x", 100), objectLen: 100 * KiB, bodyLen: BLOCK }, "not aligned"],
      [{ block: { ...block("x", 0), blockSize: 2 * BLOCK }, objectLen: 100 * KiB, bodyLen: BLOCK }, "does not match worker block size"],
      [{ block: block("x", 2 * BLOCK), objectLen: 100 * KiB, bodyLen: 0 }, "outside object length"],
      [{ block: block("x", 0, ""), objectLen: 10, bodyLen: 10 }, "no version"],
      [{ block: block("../x", 0), objectLen: 10, bodyLen: 10 }, ".."]
    ]
    for (const [r, why] of cases) {
      const c = await connect(w.worker.dataPort)
      // The body follows as a client would send it; none of it may be read as a frame.
      c.send(Buffer.concat([encodeAdmitCachedBlockHeader(5, r), Buffer.alloc(Math.min(r.bodyLen, 64), 0x54)]))
      const e = typed(await c.next())
      expect(e.code).toBe(DataErrorCode.InvalidRequest)
      expect(e.message).toContain(why)
      await c.closed
    }
    // A body cut short: the connection ends, and the block is not resident afterwards.
    const cut = await connect(w.worker.dataPort)
    const r: CachedBlockPutRequest = { block: block("y", 0), objectLen: 10 * KiB, bodyLen: 10 * KiB }
    cut.send(Buffer.concat([encodeAdmitCachedBlockHeader(6, r), Buffer.alloc(4 * KiB, 1)]))
    cut.close()
    const c = await connect(w.worker.dataPort)
    c.send(encodeGetCachedRangeFrame(7, { object: obj("y"), version: "v1", offset: 0, len: 1 }))
    expect(typed(await c.next()).code).toBe(DataErrorCode.CacheMiss)
    c.close()
  })
})
