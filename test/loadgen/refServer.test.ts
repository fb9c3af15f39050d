/**
 * talon-ref-server (tools/ref/server.c), built from source and driven over loopback:
 * Talon's wire vectors in, byte-exact replies out, pipelined replies in request order,
 * every error path answered (or the connection dropped) as the wire spec says.
 */
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Backend } from "../../src/core/ids.js"
import {
  Flags,
  FrameDecoder,
  HEADER_LEN,
  MsgType,
  RESPONSE_CAPS,
  encodeErrorFrame,
  encodeFrame,
  encodeGetRangeFrame,
  encodeHeader,
  isFrameError
} from "../../src/protocol/index.js"
import { wireVector } from "../support/wireVectors.js"
import { rawBytes, refServerPerFile, startRefServer } from "./servers.js"

const BLOB = 1024 * 1024
const object = { backend: Backend.S3, bucket: "bucket", objectPath: "any/key" }
const ref = refServerPerFile(BLOB)

const ok = (id: number, offset: number, len: number): Buffer =>
  Buffer.concat([encodeHeader({ type: MsgType.GetRange, flags: 0, requestId: id, length: len }), ref.scratch.bytes.subarray(offset, offset + len)])
const get = (id: number, offset: number, len: number): Buffer => encodeGetRangeFrame(id, { object, offset, len })
const errorReply = (id: number, message: string, type: MsgType = MsgType.GetRange): Buffer => encodeErrorFrame(type, id, message)

/** Sends `request` on a fresh connection and returns the first `expectedLength` bytes of reply. */
const exchange = async (request: Buffer, expectedLength: number, port = ref.server.port) => {
  const c = await rawBytes(port)
  c.socket.write(request)
  const got = await c.take(expectedLength)
  return { c, got }
}

describe("talon-ref-server: Talon's wire vectors", () => {
  it("data.range_request → exactly data.response_header_ok, then the file's bytes at the offset", async () => {
    const { c, got } = await exchange(wireVector("data.range_request"), HEADER_LEN + 4096)
    expect(got.subarray(0, HEADER_LEN).toString("hex")).toBe(wireVector("data.response_header_ok").toString("hex"))
    expect(got.subarray(HEADER_LEN).equals(ref.scratch.bytes.subarray(65536, 65536 + 4096))).toBe(true)
    c.socket.destroy()
  })

  it("frame_header.zero_length (a Ping with no payload) → the identical frame", async () => {
    const { c, got } = await exchange(wireVector("frame_header.zero_length"), HEADER_LEN)
    expect(got.toString("hex")).toBe(wireVector("frame_header.zero_length").toString("hex"))
    c.socket.destroy()
  })

  it("a control frame (control.stat_object) → an ERROR frame of the same type and id naming what it serves", async () => {
    const msg = "unsupported message type 0: this server answers GetRange (2) and Ping (4)"
    const { c, got } = await exchange(wireVector("control.stat_object"), HEADER_LEN + msg.length)
    expect(got.equals(errorReply(3, msg, MsgType.Control))).toBe(true)
    c.socket.destroy()
  })
})

describe("talon-ref-server: pipelining", () => {
  it("answers 40 pipelined requests (ranges, empty ranges, pings) in request order, every byte", async () => {
    const requests: Array<Buffer> = []
    const expected: Array<Buffer> = []
    for (let id = 1; id <= 40; id++) {
      if (id % 7 === 0) {
        requests.push(encodeFrame(MsgType.Ping, id, new Uint8Array(0)))
        expected.push(encodeHeader({ type: MsgType.Ping, flags: 0, requestId: id, length: 0 }))
        continue
      }
      const len = id % 5 === 0 ? 0 : (id * 977) % 65536
      const offset = (id * 104729) % (BLOB - len)
      requests.push(get(id, offset, len))
      expected.push(ok(id, offset, len))
    }
    const want = Buffer.concat(expected)
    const { c, got } = await exchange(Buffer.concat(requests), want.length)
    expect(got.equals(want)).toBe(true)
    c.socket.destroy()
  })

  it("takes a request delivered one byte per write", async () => {
    const c = await rawBytes(ref.server.port)
    c.socket.setNoDelay(true)
    const req = get(5, 1000, 3000)
    for (const b of req) {
      c.socket.write(Buffer.of(b))
      await new Promise((r) => setImmediate(r))
    }
    expect((await c.take(HEADER_LEN + 3000)).equals(ok(5, 1000, 3000))).toBe(true)
    c.socket.destroy()
  })

  it("after a half-close sends every queued reply, then closes", async () => {
    const c = await rawBytes(ref.server.port)
    c.socket.end(Buffer.concat([get(1, 0, 65536), get(2, BLOB - 65536, 65536), get(3, 7, 1)]))
    const all = await c.closed
    expect(all.equals(Buffer.concat([ok(1, 0, 65536), ok(2, BLOB - 65536, 65536), ok(3, 7, 1)]))).toBe(true)
  })
})

describe("talon-ref-server: bad requests", () => {
  it("answers a range past the end with an ERROR frame and keeps serving the connection", async () => {
    const msg = `range out of bounds: offset ${BLOB - 10} + len 11 exceeds object size ${BLOB}`
    const want = Buffer.concat([errorReply(8, msg), ok(9, 10, 20)])
    const { c, got } = await exchange(Buffer.concat([get(8, BLOB - 10, 11), get(9, 10, 20)]), want.length)
    expect(got.equals(want)).toBe(true)
    c.socket.destroy()
  })

  it("answers malformed GetRange bodies with ERROR frames that say what was wrong, and keeps the connection", async () => {
    const good = get(1, 0, 16).subarray(HEADER_LEN)
    const badTag = Buffer.from(good)
    badTag.writeUInt32LE(9, 0)
    const frames = [
      encodeFrame(MsgType.GetRange, 1, badTag),
      encodeFrame(MsgType.GetRange, 2, Buffer.concat([good, Buffer.of(0)])),
      encodeFrame(MsgType.GetRange, 3, good.subarray(0, good.length - 3)),
      encodeFrame(MsgType.GetRange, 4, good.subarray(0, 2)),
      get(5, 32, 16)
    ]
    const want = Buffer.concat([
      errorReply(1, "malformed GetRange body: backend tag 9 is not 0 (s3), 1 (gcs) or 2 (azure)"),
      errorReply(2, "malformed GetRange body: 1 trailing bytes"),
      errorReply(3, `malformed GetRange body: truncated (${good.length - 3} bytes)`),
      errorReply(4, "malformed GetRange body: 2 bytes, too short for the backend tag"),
      ok(5, 32, 16)
    ])
    const { c, got } = await exchange(Buffer.concat(frames), want.length)
    expect(got.equals(want)).toBe(true)
    c.socket.destroy()
  })

  it.each([
    ["bad magic", (() => { const b = get(1, 0, 1); b[0] = 0x55; return b })()],
    ["bad version", (() => { const b = get(1, 0, 1); b[2] = 2; return b })()],
    ["an unknown message type (6)", (() => { const b = encodeFrame(MsgType.Ping, 1, new Uint8Array(0)); b[3] = 6; return b })()],
    ["a GetRange body over the 64 KiB cap", encodeHeader({ type: MsgType.GetRange, flags: 0, requestId: 1, length: 65537 })],
    ["a Ping body over the 4 KiB cap", encodeHeader({ type: MsgType.Ping, flags: 0, requestId: 1, length: 4097 })]
  ])("drops the connection unanswered on %s, and serves others meanwhile", async (_name, bytes) => {
    const c = await rawBytes(ref.server.port)
    c.socket.write(bytes)
    expect((await c.closed).length).toBe(0)
    const { c: other, got } = await exchange(get(2, 0, 100), HEADER_LEN + 100)
    expect(got.equals(ok(2, 0, 100))).toBe(true)
    other.socket.destroy()
  })

  it("--error MSG answers every GetRange with an ERROR frame carrying MSG (pings still answered)", async () => {
    const failing = await startRefServer(ref.scratch.server, ref.scratch.blob, ["--error", "worker is not ready"])
    try {
      const want = Buffer.concat([wireVector("data.error_response"), encodeHeader({ type: MsgType.Ping, flags: 0, requestId: 4, length: 0 })])
      const { c, got } = await exchange(Buffer.concat([wireVector("data.range_request"), encodeFrame(MsgType.Ping, 4, new Uint8Array(0))]), want.length, failing.port)
      expect(got.equals(want)).toBe(true)
      expect(got.readUInt16BE(4)).toBe(Flags.Error)
      c.socket.destroy()
    } finally {
      await failing.stop()
    }
  })
})

describe("talon-ref-server: a slow reader", () => {
  it("with a 4 KiB send buffer, 64 pipelined 64 KiB replies all arrive intact once the client reads", async () => {
    const small = await startRefServer(ref.scratch.server, ref.scratch.blob, ["--sndbuf", "4096"])
    try {
      const c = await rawBytes(small.port)
      c.socket.pause()
      const ids = Array.from({ length: 64 }, (_, i) => i + 1)
      c.socket.write(Buffer.concat(ids.map((id) => get(id, (id * 65536 + id) % (BLOB - 65536), 65536))))
      // Give the server time to fill the socket and hit EAGAIN before anything is read.
      await new Promise((r) => setTimeout(r, 300))
      c.socket.resume()
      const want = Buffer.concat(ids.map((id) => ok(id, (id * 65536 + id) % (BLOB - 65536), 65536)))
      expect((await c.take(want.length)).equals(want)).toBe(true)
      c.socket.destroy()
    } finally {
      await small.stop()
    }
  })
})

describe("talon-ref-server: arbitrary input", () => {
  /** A frame with any type, flags and id and a body of any bytes (within the caps), or raw junk. */
  const anyInput = fc.oneof(
    fc.record({ type: fc.integer({ min: 0, max: 7 }), flags: fc.integer({ min: 0, max: 3 }), id: fc.nat(), body: fc.uint8Array({ maxLength: 200 }) }).map(
      ({ type, flags, id, body }) => {
        const h = encodeHeader({ type: 2, flags: 0, requestId: id, length: body.length })
        h[3] = type
        h.writeUInt16BE(flags, 4)
        return Buffer.concat([h, body])
      }
    ),
    fc.uint8Array({ minLength: 1, maxLength: 300 }).map((b) => Buffer.from(b))
  )

  it("answers any bytes with well-formed frames or a dropped connection, and keeps serving everyone else", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(anyInput, { minLength: 1, maxLength: 4 }), async (inputs) => {
        const c = await rawBytes(ref.server.port)
        c.socket.end(Buffer.concat(inputs))
        const replies = new FrameDecoder(RESPONSE_CAPS)
        replies.push(await c.closed)
        for (let f = replies.next(); f !== undefined; f = replies.next()) expect(isFrameError(f)).toBe(false)
        expect(replies.end()).toBeUndefined()
        const { c: other, got } = await exchange(get(1, 4096, 512), HEADER_LEN + 512)
        expect(got.equals(ok(1, 4096, 512))).toBe(true)
        other.socket.destroy()
      }),
      { numRuns: 60 }
    )
  }, 120_000)
})
