/**
 * Talon's cache-only GetCachedRange (type 6) and GetCachedRangeTenant (type 9) over real sockets,
 * on the portable plane and the default one (native where it builds), pipelined and multiplexed:
 * resident bytes of the named version as a GetRange reply, else a typed CacheMiss, and never a
 * request to the origin (the backend's own counters, stats included, stay where they were).
 */
import { afterEach, describe, expect, it } from "vitest"
import {
  DataErrorCode,
  encodeFrame,
  encodeGetCachedRangeFrame,
  encodeGetPinnedRangeFrame,
  encodeGetRangeFrame,
  MsgType
} from "../../src/protocol/index.js"
import { pattern, startDirWorker } from "./support/dirBackend.js"
import { makeCleanup } from "./support/harness.js"
import { bytesOf, KiB, md5, obj, PLANES, typed } from "./support/typedReplies.js"
import { connect } from "./support/rawClient.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

describe.each(PLANES)("GetCachedRange (cache-only) on the %s plane, %s mode", (_plane, _mode, plane, mode) => {
  it("answers CacheMiss cold with no origin request, the bytes warm, CacheMiss for another version", async () => {
    const { w, put, origin } = await startDirWorker(cleanup, { blockSize: 64 * KiB, pageSize: 16 * KiB, versionTtlMs: 600_000 }, mode, plane)
    const v1 = pattern(200 * KiB, 7)
    const v2 = pattern(120 * KiB, 8)
    await put("a.bin", v1)
    const c = await connect(w.worker.dataPort)
    let id = 1
    const probe = (version: string, offset: number, len: number, tenant?: string) => {
      c.send(encodeGetCachedRangeFrame(id++, { object: obj("a.bin"), version, offset, len }, tenant === undefined ? undefined : { _tag: "Named", name: tenant }))
      return c.next()
    }

    // Cold: a miss, for both types, and the origin hears nothing (not even a HEAD).
    const cold = typed(await probe(md5(v1), 0, 10 * KiB))
    expect(cold.code).toBe(DataErrorCode.CacheMiss)
    expect(cold.message).toContain("not fully resident")
    expect(typed(await probe(md5(v1), 0, 10 * KiB, "acme")).code).toBe(DataErrorCode.CacheMiss)
    expect(typed(await probe("whatever", 5, 1)).code).toBe(DataErrorCode.CacheMiss)
    expect({ stats: origin.stats, gets: origin.gets }).toEqual({ stats: 0, gets: 0 })

    // Warm the first block's pages [0, 32 KiB) with a plain read; only those become resident.
    c.send(encodeGetRangeFrame(id++, { object: obj("a.bin"), offset: 0, len: 32 * KiB }))
    bytesOf(await c.next(), v1.subarray(0, 32 * KiB))
    const after = { stats: origin.stats, gets: origin.gets }

    // Resident: the bytes, repeated (the cached-id path and, natively, the hit table), either type.
    for (let i = 0; i < 3; i++) bytesOf(await probe(md5(v1), 1000, 20 * KiB), v1.subarray(1000, 1000 + 20 * KiB))
    bytesOf(await probe(md5(v1), 16 * KiB, 16 * KiB, "acme"), v1.subarray(16 * KiB, 32 * KiB))
    // Zero bytes is an empty success, as Talon's worker answers, resident or not.
    bytesOf(await probe(md5(v1), 150 * KiB, 0), new Uint8Array(0))
    // Partly resident (pages 0-1 of 4): a miss as a whole, no prefix.
    expect(typed(await probe(md5(v1), 0, 40 * KiB)).code).toBe(DataErrorCode.CacheMiss)
    // Another block of the same version: a miss.
    expect(typed(await probe(md5(v1), 64 * KiB, 1)).code).toBe(DataErrorCode.CacheMiss)
    // Past the end of the version: a miss (the worker cannot know more without the origin).
    expect(typed(await probe(md5(v1), 0, 300 * KiB)).code).toBe(DataErrorCode.CacheMiss)
    // A wrong version of a resident object: CacheMiss (blocks are keyed by version), as Talon answers.
    expect(typed(await probe(md5(v2), 0, 1 * KiB)).code).toBe(DataErrorCode.CacheMiss)
    expect({ stats: origin.stats, gets: origin.gets }).toEqual(after)

    // Replaced at the origin: resident v1 bytes are still served by name; v2 is a miss until read.
    await put("a.bin", v2)
    bytesOf(await probe(md5(v1), 0, 32 * KiB), v1.subarray(0, 32 * KiB))
    expect(typed(await probe(md5(v2), 0, 1 * KiB)).code).toBe(DataErrorCode.CacheMiss)
    expect({ stats: origin.stats, gets: origin.gets }).toEqual(after)
    // The pinned type (10) does go to the origin for v2; after it, the cache-only probe hits.
    c.send(encodeGetPinnedRangeFrame(id++, { object: obj("a.bin"), version: md5(v2), offset: 0, len: 120 * KiB }))
    bytesOf(await c.next(), v2)
    expect(origin.gets).toBeGreaterThan(after.gets)
    bytesOf(await probe(md5(v2), 70 * KiB, 50 * KiB), v2.subarray(70 * KiB))

    // Bad bodies and tenants: typed InvalidRequest; the connection still serves.
    c.send(encodeFrame(MsgType.GetCachedRange, id++, new Uint8Array([1, 2, 3])))
    expect(typed(await c.next()).code).toBe(DataErrorCode.InvalidRequest)
    c.send(encodeFrame(MsgType.GetCachedRangeTenant, id++, new Uint8Array([9, 0, 0, 0])))
    expect(typed(await c.next()).code).toBe(DataErrorCode.InvalidRequest)
    expect(typed(await probe(md5(v2), 0, 1, "")).message).toContain("tenant name is empty")
    c.send(encodeGetCachedRangeFrame(id++, { object: obj("../x"), version: "v", offset: 0, len: 1 }))
    expect(typed(await c.next()).code).toBe(DataErrorCode.InvalidRequest)
    bytesOf(await probe(md5(v2), 0, 10), v2.subarray(0, 10))
    c.close()
  })
})
