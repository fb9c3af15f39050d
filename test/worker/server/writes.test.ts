/**
 * Put (type 3) and Delete (type 5) on a worker's data port, over real sockets, against the
 * origin stub (S3 and Azure): the body goes through to the origin and the reply carries its
 * version; reads after it, through the worker and at the origin, are the new bytes even while
 * the worker's version TTL would still trust the old ones; a body cut short or over the limit
 * leaves nothing at the origin; replies of pipelined requests around a Put stay in order.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Exit, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Router from "../../../src/backend/Router.js"
import { Backend, type ObjectId } from "../../../src/core/ids.js"
import { OriginStub, type OriginStubShape } from "../../../src/origin/OriginStub.js"
import {
  DataErrorCode,
  decodeErrorPayload,
  encodeDeleteFrame,
  encodeFrame,
  encodeGetRangeFrame,
  encodePutFrame,
  Flags,
  MsgType,
  type Frame
} from "../../../src/protocol/index.js"
import { Sendfile } from "../../../src/worker/plane/Sendfile.js"
import { ServeMode } from "../../../src/worker/server/ServeMode.js"
import { pattern } from "../support/dirBackend.js"
import { makeCleanup, type RunningWorker, startWorker, tempDir } from "../support/harness.js"
import { connect } from "../support/rawClient.js"

const KiB = 1024
const cleanup = makeCleanup()
let stub: OriginStubShape
let w: RunningWorker
const LIMIT = 4 * 1024 * KiB

beforeAll(async () => {
  const dir = await tempDir(cleanup, "talon-writes-")
  const scope = await Effect.runPromise(Scope.make())
  cleanup.add(() => Effect.runPromise(Scope.close(scope, Exit.void)))
  stub = await Effect.runPromise(Scope.extend(OriginStub.make({ root: path.join(dir, "origin") }), scope))
  fs.mkdirSync(path.join(stub.root, "bkt"), { recursive: true })
  const cache = await tempDir(cleanup, "talon-cache-")
  // A long version TTL: only the write path can make the worker see a new version in time.
  w = await startWorker(
    cleanup,
    Router.layerLocal(stub.url),
    { cacheDirs: [cache], blockSize: 256 * KiB, pageSize: 64 * KiB, versionTtlMs: 600_000, maxPutBytes: LIMIT },
    ServeMode.Pipelined,
    Sendfile.Auto
  )
}, 60_000)
afterAll(() => cleanup.run())

const s3 = (key: string): ObjectId => ({ backend: Backend.S3, bucket: "bkt", objectPath: key })
const atOrigin = (key: string): Buffer | undefined => {
  const f = path.join(stub.root, "bkt", key)
  return fs.existsSync(f) ? fs.readFileSync(f) : undefined
}
const ok = (f: Frame): Buffer => {
  expect(f.header.type).toBe(MsgType.GetRange)
  expect(f.header.flags & Flags.Error, f.header.flags ? decodeErrorPayload(f.payload).message : "").toBe(0)
  return f.payload
}
const failed = (f: Frame) => {
  expect(f.header.type).toBe(MsgType.GetRange)
  expect(f.header.flags & Flags.Error).toBe(Flags.Error)
  return decodeErrorPayload(f.payload)
}
const putFrames = (id: number, object: ObjectId, body: Uint8Array) => Buffer.concat([encodePutFrame(id, { object, bodyLen: body.length }), body])

describe("Put and Delete on the data port", () => {
  it("writes 0 B, 1 B and multi-block bodies through, answers the version, and reads them back", async () => {
    const c = await connect(w.worker.dataPort)
    for (const [i, size] of [0, 1, 700 * KiB].entries()) {
      const body = pattern(size, 40 + i)
      const key = `put-${size}.bin`
      // Sent in pieces so the body spans reads.
      const bytes = putFrames(i + 1, s3(key), body)
      for (let at = 0; at < bytes.length; at += 100 * KiB) c.send(bytes.subarray(at, at + 100 * KiB))
      const reply = await c.next()
      expect(reply.header.requestId).toBe(i + 1)
      const version = ok(reply).toString("utf8")
      expect(version.length).toBeGreaterThan(0)
      expect(Buffer.compare(atOrigin(key)!, body)).toBe(0)
      if (size > 0) {
        c.send(encodeGetRangeFrame(100 + i, { object: s3(key), offset: 0, len: size }))
        expect(Buffer.compare(ok(await c.next()), body)).toBe(0)
      }
    }
    c.close()
  })

  it("an overwrite is never served stale, and pipelined replies around a Put stay in order", async () => {
    const key = "over.bin"
    const v1 = pattern(300 * KiB, 1)
    const v2 = pattern(200 * KiB, 2)
    const c = await connect(w.worker.dataPort)
    c.send(putFrames(1, s3(key), v1))
    ok(await c.next())
    // Warm: every block of v1 resident, the version trusted for 10 minutes.
    c.send(encodeGetRangeFrame(2, { object: s3(key), offset: 0, len: v1.length }))
    expect(Buffer.compare(ok(await c.next()), v1)).toBe(0)
    // Read, Put, read, ping in one write: replies in request order, the second read is v2.
    c.send(
      Buffer.concat([
        encodeGetRangeFrame(3, { object: s3(key), offset: 0, len: 1000 }),
        putFrames(4, s3(key), v2),
        encodeGetRangeFrame(5, { object: s3(key), offset: 0, len: v2.length }),
        encodeFrame(MsgType.Ping, 6, new Uint8Array(0))
      ])
    )
    const r3 = await c.next()
    expect(r3.header.requestId).toBe(3)
    const r4 = await c.next()
    expect(r4.header.requestId).toBe(4)
    ok(r4)
    const r5 = await c.next()
    expect(r5.header.requestId).toBe(5)
    expect(Buffer.compare(ok(r5), v2)).toBe(0)
    expect((await c.next()).header).toMatchObject({ requestId: 6, type: MsgType.Ping })
    expect(Buffer.compare(atOrigin(key)!, v2)).toBe(0)
    c.close()
  })

  it("Delete removes at the origin and the next read is NotFound", async () => {
    const key = "del.bin"
    const body = pattern(100 * KiB, 3)
    const c = await connect(w.worker.dataPort)
    c.send(putFrames(1, s3(key), body))
    ok(await c.next())
    c.send(encodeGetRangeFrame(2, { object: s3(key), offset: 0, len: body.length }))
    ok(await c.next())
    c.send(encodeDeleteFrame(3, { object: s3(key) }))
    const del = await c.next()
    expect(del.header.requestId).toBe(3)
    expect(ok(del).length).toBe(0)
    expect(atOrigin(key)).toBeUndefined()
    c.send(encodeGetRangeFrame(4, { object: s3(key), offset: 0, len: 10 }))
    const gone = await c.next()
    expect(gone.header.flags & Flags.Error).toBe(Flags.Error)
    expect(gone.payload.toString("utf8")).toMatch(/does not exist|not found/i)
    // Deleting what is gone is success, as S3 answers.
    c.send(encodeDeleteFrame(5, { object: s3(key) }))
    expect(ok(await c.next()).length).toBe(0)
    c.close()
  })

  it("a Put cut mid-body leaves nothing at the origin, and the old version stays", async () => {
    const key = "cut.bin"
    const old = pattern(64 * KiB, 4)
    const c = await connect(w.worker.dataPort)
    c.send(putFrames(1, s3(key), old))
    ok(await c.next())
    const body = pattern(1024 * KiB, 5)
    const cut = await connect(w.worker.dataPort)
    cut.send(Buffer.concat([encodePutFrame(1, { object: s3(key), bodyLen: body.length }), body.subarray(0, 300 * KiB)]))
    // Half-close: the worker sees the end of the stream 300 KiB into a 1 MiB body.
    cut.socket.end()
    const reply = failed(await cut.next())
    expect(reply.code).toBe(DataErrorCode.InvalidRequest)
    expect(reply.message).toMatch(/ended after \d+ of 1048576 body bytes/)
    await cut.closed
    expect(Buffer.compare(atOrigin(key)!, old)).toBe(0)
    c.send(encodeGetRangeFrame(2, { object: s3(key), offset: 0, len: old.length }))
    expect(Buffer.compare(ok(await c.next()), old)).toBe(0)
    // A connection dropped mid-body (no half-close) leaves nothing either.
    const dropped = await connect(w.worker.dataPort)
    dropped.send(Buffer.concat([encodePutFrame(1, { object: s3("dropped.bin"), bodyLen: body.length }), body.subarray(0, 200 * KiB)]))
    dropped.socket.destroy()
    c.send(encodeFrame(MsgType.Ping, 3, new Uint8Array(0)))
    await c.next()
    expect(atOrigin("dropped.bin")).toBeUndefined()
    c.close()
  })

  it("a body over --max-put-size is refused before any byte reaches the origin", async () => {
    const c = await connect(w.worker.dataPort)
    c.send(Buffer.concat([encodePutFrame(9, { object: s3("big.bin"), bodyLen: LIMIT + 1 }), pattern(64 * KiB, 6)]))
    const e = failed(await c.next())
    expect(e.code).toBe(DataErrorCode.InvalidRequest)
    expect(e.message).toContain("over this worker's limit")
    await c.closed
    expect(atOrigin("big.bin")).toBeUndefined()
  })

  it("writes and deletes Azure blobs the same way", async () => {
    fs.mkdirSync(path.join(stub.root, "cont"), { recursive: true })
    const blob: ObjectId = { backend: Backend.Azure, bucket: "cont", objectPath: "dir/blob.bin" }
    const body = pattern(150 * KiB, 7)
    const c = await connect(w.worker.dataPort)
    c.send(putFrames(1, blob, body))
    ok(await c.next())
    c.send(encodeGetRangeFrame(2, { object: blob, offset: 0, len: body.length }))
    expect(Buffer.compare(ok(await c.next()), body)).toBe(0)
    c.send(encodeDeleteFrame(3, { object: blob }))
    ok(await c.next())
    expect(fs.existsSync(path.join(stub.root, "cont", "dir/blob.bin"))).toBe(false)
    c.close()
  })
})
