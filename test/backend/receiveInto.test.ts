import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import { randomBytes } from "node:crypto"
import * as net from "node:net"
import type { OriginRequest } from "../../src/backend/http.js"
import { Receiver, ReceiveError, STOP, type BodySink } from "../../src/backend/receiveInto.js"
import { rawOrigin } from "./rawOrigin.js"

const receiverOf = (timeoutMs = 2_000) =>
  Effect.acquireRelease(
    Effect.sync(() => new Receiver(timeoutMs)),
    (r) => Effect.sync(() => r.close())
  )

const get = (port: number, path = "/b/k"): OriginRequest => ({
  method: "GET",
  protocol: "http:",
  hostname: "127.0.0.1",
  port,
  path,
  headers: { range: "bytes=0-9" }
})

/** Writes `parts` one event-loop turn apart, so the client sees them as separate reads. */
const writeApart = async (socket: net.Socket, parts: ReadonlyArray<Buffer | string>) => {
  for (const part of parts) {
    socket.write(part)
    await new Promise((resolve) => setImmediate(resolve))
  }
}

/** Receives the body, copying each chunk (a chunk is only valid during the call). */
const receive = (receiver: Receiver, request: OriginRequest, hold = false) => {
  const parts: Array<Buffer> = []
  let n = 0
  const sink: BodySink = (chunk) => {
    parts.push(Buffer.from(chunk))
    return hold && ++n % 2 === 1 ? new Promise<void>((resolve) => setTimeout(resolve, 1)) : undefined
  }
  return Effect.promise(() =>
    receiver.exchange(request, (status) => (status === 200 || status === 206 ? sink : undefined)).then(
      (res) => ({ ok: true as const, status: res.status, headers: res.headers, error: res.body, body: Buffer.concat(parts) }),
      (error: unknown) => ({ ok: false as const, failure: error, body: Buffer.concat(parts) })
    )
  )
}

const chunked = (body: Buffer, sizes: ReadonlyArray<number>): Buffer => {
  const out: Array<Buffer> = []
  let at = 0
  for (let i = 0; at < body.length; i++) {
    const n = Math.min(Math.max(1, sizes[i % sizes.length]!), body.length - at)
    out.push(Buffer.from(`${n.toString(16)};ext=1\r\n`), body.subarray(at, at + n), Buffer.from("\r\n"))
    at += n
  }
  out.push(Buffer.from("0\r\nx-trailer: t\r\n\r\n"))
  return Buffer.concat(out)
}

describe("receiveInto", () => {
  it.live("a content-length body arrives whole, and the connection is reused for the next request", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const origin = yield* rawOrigin
        const receiver = yield* receiverOf()
        const body = randomBytes(300_000)
        let sawHost = ""
        origin.respond = (socket, head) => {
          sawHost = /\r\nhost: ([^\r]+)/i.exec(head)?.[1] ?? ""
          void writeApart(socket, [`HTTP/1.1 206 Partial Content\r\nContent-Length: ${body.length}\r\nETag: "e"\r\n\r\n`, body.subarray(0, 1000), body.subarray(1000)])
        }
        const first = yield* receive(receiver, get(origin.port))
        const second = yield* receive(receiver, get(origin.port), true)
        expect(first.ok && first.status).toBe(206)
        expect(first.ok && first.headers.etag).toBe('"e"')
        expect(first.body.equals(body)).toBe(true)
        expect(second.body.equals(body)).toBe(true)
        expect(origin.connections).toBe(1)
        expect(sawHost).toBe(`127.0.0.1:${origin.port}`)
      })
    )
  )

  it.live("chunked bodies with extensions and trailers, the head split across reads, behind a 100 Continue", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const origin = yield* rawOrigin
        const receiver = yield* receiverOf()
        const body = randomBytes(70_000)
        origin.respond = (socket) =>
          void writeApart(socket, ["HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-", "Encoding: chunked\r\n\r", "\n", chunked(body, [1, 5000, 17, 40_000])])
        const got = yield* receive(receiver, get(origin.port), true)
        expect(got.ok && got.status).toBe(200)
        expect(got.body.equals(body)).toBe(true)
        const again = yield* receive(receiver, get(origin.port))
        expect(again.body.equals(body)).toBe(true)
        expect(origin.connections).toBe(1)
      })
    )
  )

  it.live("any chunking and any split of the bytes on the wire gives the same body", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const origin = yield* rawOrigin
        const receiver = yield* receiverOf()
        yield* Effect.promise(() =>
          fc.assert(
            fc.asyncProperty(
              fc.uint8Array({ minLength: 1, maxLength: 20_000 }),
              fc.array(fc.integer({ min: 1, max: 9000 }), { minLength: 1, maxLength: 6 }),
              fc.array(fc.integer({ min: 1, max: 30 }), { minLength: 1, maxLength: 8 }),
              fc.boolean(),
              async (bytes, sizes, cuts, isChunked) => {
                const body = Buffer.from(bytes)
                const wire = Buffer.concat([
                  Buffer.from(isChunked ? "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" : `HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n`),
                  isChunked ? chunked(body, sizes) : body
                ])
                const parts: Array<Buffer> = []
                let at = 0
                for (const cut of cuts) {
                  const to = Math.min(wire.length, at + cut * 97)
                  parts.push(wire.subarray(at, to))
                  at = to
                }
                parts.push(wire.subarray(at))
                origin.respond = (socket) => void writeApart(socket, parts)
                const got = await Effect.runPromise(receive(receiver, get(origin.port), cuts[0]! % 2 === 0))
                expect(got.ok).toBe(true)
                expect(got.body.equals(body)).toBe(true)
              }
            ),
            { numRuns: 40 }
          )
        )
        expect(origin.connections).toBe(1)
      })
    )
  )

  it.live("a body framed by close ends at the close; the connection is not reused", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const origin = yield* rawOrigin
        const receiver = yield* receiverOf()
        const body = randomBytes(50_000)
        origin.respond = (socket) => socket.end(Buffer.concat([Buffer.from("HTTP/1.1 200 OK\r\n\r\n"), body]))
        const got = yield* receive(receiver, get(origin.port))
        expect(got.body.equals(body)).toBe(true)
        yield* receive(receiver, get(origin.port))
        expect(origin.connections).toBe(2)
      })
    )
  )

  it.live("a reset or close mid-body fails the exchange with a retryable code, after only the bytes that came", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const origin = yield* rawOrigin
        const receiver = yield* receiverOf()
        const body = randomBytes(100_000)
        origin.respond = (socket, _head, connection) => {
          socket.write(`HTTP/1.1 206 Partial Content\r\ncontent-length: ${body.length}\r\n\r\n`)
          socket.write(body.subarray(0, 40_000), () => (connection === 1 ? socket.resetAndDestroy() : socket.end()))
        }
        const reset = yield* receive(receiver, get(origin.port))
        const closed = yield* receive(receiver, get(origin.port))
        for (const got of [reset, closed]) {
          expect(got.ok).toBe(false)
          expect(got.body.equals(body.subarray(0, got.body.length))).toBe(true)
          expect(got.body.length).toBeLessThanOrEqual(40_000)
        }
        // Which one a reset surfaces as depends on when the kernel reports it; both are transient.
        expect(["ECONNRESET", "ERR_STREAM_PREMATURE_CLOSE"]).toContain(!reset.ok && (reset.failure as ReceiveError).code)
        expect(!closed.ok && (closed.failure as ReceiveError).code).toBe("ERR_STREAM_PREMATURE_CLOSE")
      })
    )
  )

  it.live("an idle connection the origin closed is replaced without failing the request", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const origin = yield* rawOrigin
        const receiver = yield* receiverOf()
        origin.respond = (socket) => socket.write("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        yield* receive(receiver, get(origin.port))
        // The origin drops its idle connection; the client learns only when it next uses it.
        for (const s of origin.sockets) s.end()
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
        const got = yield* receive(receiver, get(origin.port))
        expect(got.ok && got.body.toString()).toBe("ok")
        expect(origin.connections).toBe(2)
      })
    )
  )

  it.live("an error status buffers its document; a sink's STOP ends the exchange early; a sink's throw is the failure", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const origin = yield* rawOrigin
        const receiver = yield* receiverOf()
        const doc = "<Error><Code>SlowDown</Code></Error>"
        origin.respond = (socket) => socket.write(`HTTP/1.1 503 Slow Down\r\ncontent-length: ${doc.length}\r\n\r\n${doc}`)
        const refused = yield* receive(receiver, get(origin.port))
        expect(refused.ok && refused.status).toBe(503)
        expect(refused.ok && refused.error?.toString()).toBe(doc)

        // Larger than a connection's read buffer, so it cannot all arrive in the one read STOP answers.
        const body = randomBytes(600_000)
        origin.respond = (socket) => void writeApart(socket, [`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n`, body.subarray(0, 10), body.subarray(10)])
        let calls = 0
        let seen = 0
        const stopped = yield* Effect.promise(() => receiver.exchange(get(origin.port), () => (chunk) => ((calls++, seen += chunk.length), STOP)))
        expect(stopped.status).toBe(200)
        expect(calls).toBe(1)
        expect(seen).toBeLessThan(body.length)
        const boom = new Error("disk full")
        const thrown = yield* Effect.promise(() =>
          receiver.exchange(get(origin.port), () => () => {
            throw boom
          }).then(() => undefined, (e: unknown) => e)
        )
        expect(thrown).toBe(boom)
        const rejected = yield* Effect.promise(() =>
          receiver.exchange(get(origin.port), () => () => Promise.reject(boom)).then(() => undefined, (e: unknown) => e)
        )
        expect(rejected).toBe(boom)
      })
    )
  )

  it.live("garbage instead of HTTP is a protocol error, never bytes", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const origin = yield* rawOrigin
        const receiver = yield* receiverOf()
        for (const reply of ["SSH-2.0-OpenSSH\r\n\r\n", "HTTP/1.1 200 OK\r\ncontent-length: x1\r\n\r\n", "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"]) {
          origin.respond = (socket) => socket.write(reply)
          const got = yield* receive(receiver, get(origin.port))
          expect(got.ok).toBe(false)
          expect(got.body.length).toBe(0)
          expect(!got.ok && (got.failure as ReceiveError).code).toBe("EPROTO")
        }
      })
    )
  )
})
