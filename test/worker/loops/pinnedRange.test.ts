/**
 * GetPinnedRange through `--loops 2` (real forked serving loops): a loop serves the named
 * version, and for a version its owner's cache does not hold it asks the owner for a fresh
 * stat (a HEAD now, not the cached answer), so a newer version is served at once and a gone
 * one is a typed VersionMismatch — on every loop.
 */
import { createHash } from "node:crypto"
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { Backend, type ObjectId } from "../../../src/core/ids.js"
import { DataErrorCode, decodeErrorPayload, encodeGetPinnedRangeFrame, Flags } from "../../../src/protocol/index.js"
import { makeDirBackend, pattern } from "../support/dirBackend.js"
import { makeCleanup, tempDir } from "../support/harness.js"
import { connect, type RawConnection } from "../support/rawClient.js"
import { eventually, startLoops } from "./loopsWorker.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const KiB = 1024
const obj = (key: string): ObjectId => ({ backend: Backend.S3, bucket: "bkt", objectPath: key })
const md5 = (b: Uint8Array) => createHash("md5").update(b).digest("hex")

describe("--loops 2 and GetPinnedRange", () => {
  it("every loop serves the named version; a newer one at once, a gone one as VersionMismatch", async () => {
    const root = await tempDir(cleanup, "talon-origin-")
    await fsp.mkdir(path.join(root, "bkt"), { recursive: true })
    const v1 = pattern(300 * KiB, 3)
    const v2 = pattern(200 * KiB, 4)
    await fsp.writeFile(path.join(root, "bkt", "obj"), v1)
    const origin = makeDirBackend(root)
    const w = await startLoops(cleanup, origin.layer, {
      cacheDirs: [await tempDir(cleanup, "talon-cache-")],
      blockSize: 64 * KiB,
      pageSize: 16 * KiB,
      versionTtlMs: 600_000,
      // Dealt by open count, six connections reach both loops every run (SO_REUSEPORT's hash puts
      // all six on one loop in ~3 % of runs); loops.test covers how reuseport spreads them.
      loopsAccept: "dealt"
    })
    const conns: Array<RawConnection> = []
    for (let i = 0; i < 6; i++) conns.push(await connect(w.dataPort))
    cleanup.add(async () => conns.forEach((c) => c.close()))
    await eventually(() => w.loops.report().loops.every((l) => l.counters.connectionsTotal >= 1), "both loops accepted connections", 30_000)

    const ask = async (c: RawConnection, id: number, version: string, offset: number, len: number) => {
      c.send(encodeGetPinnedRangeFrame(id, { object: obj("obj"), version, offset, len }))
      const f = await c.next()
      expect(f.header.requestId).toBe(id)
      return f
    }
    for (const [i, c] of conns.entries()) {
      const f = await ask(c, 10 + i, md5(v1), 1000, 200 * KiB)
      expect(Buffer.compare(f.payload, v1.subarray(1000, 1000 + 200 * KiB))).toBe(0)
    }
    await fsp.writeFile(path.join(root, "bkt", "obj"), v2)
    for (const [i, c] of conns.entries()) {
      // The owner still caches v1 for 10 minutes; v2 named is checked with the origin and served.
      const f = await ask(c, 20 + i, md5(v2), 0, 200 * KiB)
      expect((f.header.flags & Flags.Error) === 0 ? "ok" : decodeErrorPayload(f.payload).message).toBe("ok")
      expect(Buffer.compare(f.payload, v2)).toBe(0)
      // v1 beyond what is resident cannot be filled any more.
      const gone = await ask(c, 30 + i, md5(v1), 250 * KiB, 50 * KiB)
      expect(gone.header.flags & Flags.Error).toBe(Flags.Error)
      expect(decodeErrorPayload(gone.payload).code).toBe(DataErrorCode.VersionMismatch)
    }
  }, 180_000)
})
