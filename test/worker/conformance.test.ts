/**
 * Every conformance vector (../shared/talon/conformance_vectors.json, generated
 * by the Rust implementation) that a worker receives or sends, through a real
 * socket: the raw vector bytes go in, and replies that have a vector must equal
 * it byte for byte.
 */
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { Effect, Layer, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { BackendNotFound, BackendStore } from "../../src/backend/BackendStore.js"
import { Backend } from "../../src/core/ids.js"
import { objectIdToUri } from "../../src/core/objectId.js"
import { decodeControl, decodeRangeRequest, HEADER_LEN } from "../../src/protocol/index.js"
import { pattern } from "./support/dirBackend.js"
import { makeCleanup, startWorker, tempDir } from "./support/harness.js"
import { connect } from "./support/rawClient.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const vectorsFile = path.resolve(__dirname, "../../../shared/talon/conformance_vectors.json")
const vectors = new Map<string, Buffer>(
  (JSON.parse(fs.readFileSync(vectorsFile, "utf8")) as { vectors: Array<{ name: string; hex: string }> }).vectors.map(
    (v) => [v.name, Buffer.from(v.hex, "hex")]
  )
)
const vector = (name: string): Buffer => {
  const v = vectors.get(name)
  if (v === undefined) throw new Error(`conformance vector ${name} is missing`)
  return v
}

/** The objects the vectors name: az://container/path/to/object, with the stat of `control.object_stat.large_size`. */
const vectorBackend = () => {
  const statVector = decodeControl(vector("control.object_stat.large_size").subarray(HEADER_LEN))
  if (statVector._tag !== "Right" || statVector.right.message._tag !== "ObjectStat") throw new Error("bad ObjectStat vector")
  const { size, version } = statVector.right.message
  const isVectorObject = (o: { backend: number; bucket: string; objectPath: string }) =>
    o.backend === Backend.Azure && o.bucket === "container" && o.objectPath === "path/to/object"
  return Layer.succeed(BackendStore, {
    stat: (o) => (isVectorObject(o) ? Effect.succeed({ size, version }) : Effect.fail(new BackendNotFound({ object: objectIdToUri(o) }))),
    getRange: (o, offset, length) =>
      isVectorObject(o)
        ? Stream.make(new Uint8Array(pattern(offset + length, 99).subarray(offset)))
        : Stream.fail(new BackendNotFound({ object: objectIdToUri(o) })),
    list: () => Effect.die("unused"),
    put: () => Effect.die("unused"),
    delete: () => Effect.die("unused")
  })
}

/** A loopback port nothing listens on (a coordinator that never answers). */
const deadPort = async (): Promise<number> => {
  const s = net.createServer()
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()))
  const port = (s.address() as net.AddressInfo).port
  await new Promise<void>((r) => s.close(() => r()))
  return port
}

describe("worker conformance vectors over a socket", () => {
  it("data.range_request → a reply whose header is data.response_header_ok, then the bytes", async () => {
    const w = await startWorker(cleanup, vectorBackend(), {
      cacheDirs: [await tempDir(cleanup, "talon-cache-")],
      blockSize: 1024 * 1024,
      pageSize: 64 * 1024
    })
    const req = vector("data.range_request")
    const decoded = decodeRangeRequest(req.subarray(HEADER_LEN))
    if (decoded._tag !== "Right") throw new Error("bad range request vector")
    const { offset, len } = decoded.right
    const c = await connect(w.worker.dataPort)
    c.send(req)
    const reply = await c.next()
    expect(Buffer.from(reply.payload).length).toBe(len)
    const header = Buffer.alloc(HEADER_LEN)
    header.writeUInt16BE(0x544c, 0)
    header[2] = 1
    header[3] = reply.header.type
    header.writeUInt16BE(reply.header.flags, 4)
    header.writeUInt32BE(reply.header.requestId, 8)
    header.writeUInt32BE(reply.header.length, 12)
    expect(header.toString("hex")).toBe(vector("data.response_header_ok").toString("hex"))
    expect(Buffer.compare(reply.payload, pattern(offset + len, 99).subarray(offset))).toBe(0)
    c.close()
  })

  it("frame_header.zero_length (a Ping with no payload) → the identical frame back", async () => {
    const w = await startWorker(cleanup, vectorBackend(), { cacheDirs: [await tempDir(cleanup, "talon-cache-")] })
    const c = await connect(w.worker.dataPort)
    const got = new Promise<Buffer>((resolve) => {
      let buf = Buffer.alloc(0)
      c.socket.on("data", (d: Buffer) => {
        buf = Buffer.concat([buf, d])
        if (buf.length >= HEADER_LEN) resolve(buf)
      })
    })
    c.send(vector("frame_header.zero_length"))
    expect((await got).toString("hex")).toBe(vector("frame_header.zero_length").toString("hex"))
    c.close()
  })

  it("control.stat_object on the data plane → exactly control.object_stat.large_size", async () => {
    const w = await startWorker(cleanup, vectorBackend(), { cacheDirs: [await tempDir(cleanup, "talon-cache-")] })
    const c = await connect(w.worker.dataPort)
    const got = new Promise<Buffer>((resolve) => {
      let buf = Buffer.alloc(0)
      c.socket.on("data", (d: Buffer) => {
        buf = Buffer.concat([buf, d])
        if (buf.length >= HEADER_LEN && buf.length >= HEADER_LEN + buf.readUInt32BE(12)) resolve(buf)
      })
    })
    c.send(vector("control.stat_object"))
    expect((await got).toString("hex")).toBe(vector("control.object_stat.large_size").toString("hex"))
    c.close()
  })

  it("data.range_request to a worker that is not registered → exactly data.error_response", async () => {
    const w = await startWorker(cleanup, vectorBackend(), {
      cacheDirs: [await tempDir(cleanup, "talon-cache-")],
      coordinator: `127.0.0.1:${await deadPort()}`,
      heartbeatIntervalMs: 200
    })
    const c = await connect(w.worker.dataPort)
    const got = new Promise<Buffer>((resolve) => {
      let buf = Buffer.alloc(0)
      c.socket.on("data", (d: Buffer) => {
        buf = Buffer.concat([buf, d])
        if (buf.length >= HEADER_LEN && buf.length >= HEADER_LEN + buf.readUInt32BE(12)) resolve(buf)
      })
    })
    c.send(vector("data.range_request"))
    expect((await got).toString("hex")).toBe(vector("data.error_response").toString("hex"))
    c.close()
  })
})
