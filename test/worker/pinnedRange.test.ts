/**
 * GetPinnedRange (type 10) and GetPinnedRangeTenant (type 11) over real sockets, on the portable
 * plane and the default one (native where it builds, whose hit table answers resident pinned
 * hits and hands the rest to JS), pipelined and multiplexed:
 * the reply is a GetRange frame of exactly the named version's bytes; a version the origin no
 * longer has is a typed VersionMismatch; bad bodies get typed errors and the connection keeps
 * serving.
 */
import { afterEach, describe, expect, it } from "vitest"
import { DataErrorCode, encodeFrame, encodeGetPinnedRangeFrame, encodeGetRangeFrame, MsgType } from "../../src/protocol/index.js"
import { pattern, startDirWorker } from "./support/dirBackend.js"
import { makeCleanup } from "./support/harness.js"
import { bytesOf, KiB, md5, obj, PLANES, typed } from "./support/typedReplies.js"
import { connect } from "./support/rawClient.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

describe.each(PLANES)("GetPinnedRange on the %s plane, %s mode", (_plane, _mode, plane, mode) => {
  it("serves exactly the named version, refuses a gone one, and keeps the connection", async () => {
    const settings = { blockSize: 64 * KiB, pageSize: 16 * KiB, versionTtlMs: 600_000 }
    const { w, put, origin } = await startDirWorker(cleanup, settings, mode, plane)
    const v1 = pattern(200 * KiB, 5)
    const v2 = pattern(150 * KiB, 6)
    await put("a.bin", v1)
    const c = await connect(w.worker.dataPort)

    // v1, cold then warm, across blocks; repeated requests take the cached-id path.
    for (let i = 0; i < 3; i++) {
      c.send(encodeGetPinnedRangeFrame(10 + i, { object: obj("a.bin"), version: md5(v1), offset: 10 * KiB, len: 150 * KiB }))
      const f = await c.next()
      expect(f.header.requestId).toBe(10 + i)
      bytesOf(f, v1.subarray(10 * KiB, 160 * KiB))
    }
    const gets = origin.gets

    // Replaced at the origin (the worker still believes v1, TTL 10 min).
    await put("a.bin", v2)
    // Resident v1 bytes are still served by name, without the origin.
    c.send(encodeGetPinnedRangeFrame(20, { object: obj("a.bin"), version: md5(v1), offset: 64 * KiB, len: 64 * KiB }, { _tag: "Named", name: "acme" }))
    bytesOf(await c.next(), v1.subarray(64 * KiB, 128 * KiB))
    expect(origin.gets).toBe(gets)
    // A part of v1 that is not resident cannot be had any more: VersionMismatch, no bytes.
    c.send(encodeGetPinnedRangeFrame(21, { object: obj("a.bin"), version: md5(v1), offset: 0, len: 200 * KiB }))
    const gone = typed(await c.next())
    expect(gone.code).toBe(DataErrorCode.VersionMismatch)
    expect(gone.message).toContain(`expected ${md5(v1)}`)
    // The new version, named, reads whole; past its end is a typed InvalidRequest.
    c.send(encodeGetPinnedRangeFrame(22, { object: obj("a.bin"), version: md5(v2), offset: 0, len: 150 * KiB }))
    bytesOf(await c.next(), v2)
    c.send(encodeGetPinnedRangeFrame(23, { object: obj("a.bin"), version: md5(v2), offset: 100 * KiB, len: 100 * KiB }))
    const oob = typed(await c.next())
    expect(oob.code).toBe(DataErrorCode.InvalidRequest)
    expect(oob.message).toContain("range out of bounds")
    // A version nobody has: the origin is asked and names another.
    c.send(encodeGetPinnedRangeFrame(24, { object: obj("a.bin"), version: "nope", offset: 0, len: 10 }))
    expect(typed(await c.next())).toMatchObject({ code: DataErrorCode.VersionMismatch })
    // Unknown object: NotFound.
    c.send(encodeGetPinnedRangeFrame(25, { object: obj("missing.bin"), version: "x", offset: 0, len: 10 }))
    expect(typed(await c.next()).code).toBe(DataErrorCode.NotFound)
    // Malformed bodies and bad tenants: typed InvalidRequest; the connection still serves.
    c.send(encodeFrame(MsgType.GetPinnedRange, 26, new Uint8Array([1, 2, 3])))
    expect(typed(await c.next())).toMatchObject({ code: DataErrorCode.InvalidRequest })
    c.send(encodeGetPinnedRangeFrame(27, { object: obj("a.bin"), version: md5(v2), offset: 0, len: 1 }, { _tag: "Named", name: "" }))
    expect(typed(await c.next()).message).toContain("tenant name is empty")
    c.send(encodeGetPinnedRangeFrame(28, { object: obj("../x"), version: md5(v2), offset: 0, len: 1 }))
    expect(typed(await c.next()).code).toBe(DataErrorCode.InvalidRequest)
    c.send(encodeGetRangeFrame(29, { object: obj("a.bin"), offset: 0, len: 10 }))
    const plain = await c.next()
    expect(plain.header.requestId).toBe(29)
    expect(plain.payload.length).toBe(10)
  })
})
