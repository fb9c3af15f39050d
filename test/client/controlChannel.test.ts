/**
 * ControlChannel against scripted TCP peers: pipelining on one connection,
 * reconnect after the peer drops, timeouts, error frames, and typed errors that
 * name the address.
 */
import * as net from "node:net"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { ControlChannel } from "../../src/transport/ControlChannel.js"
import {
  DEFAULT_CAPS,
  FrameDecoder,
  MsgType,
  decodeControl,
  encodeControlFrame,
  encodeErrorFrame,
  encodeFrame,
  type ControlMessage,
  type Frame
} from "../../src/protocol/index.js"

type Behaviour = (frame: Frame, socket: net.Socket, connection: number) => void

/** A scripted control peer; `behaviour` decides what each received frame gets. */
const scriptedPeer = (behaviour: Behaviour) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const sockets = new Set<net.Socket>()
      let connections = 0
      const server = net.createServer((socket) => {
        const n = ++connections
        sockets.add(socket)
        socket.on("close", () => sockets.delete(socket))
        socket.on("error", () => {})
        const decoder = new FrameDecoder(DEFAULT_CAPS)
        socket.on("data", (chunk: Buffer) => {
          decoder.push(chunk)
          for (let f = decoder.next(); f !== undefined; f = decoder.next()) {
            if ("header" in f) behaviour(f, socket, n)
          }
        })
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
      const port = (server.address() as net.AddressInfo).port
      return {
        address: `127.0.0.1:${port}`,
        connections: () => connections,
        close: () =>
          new Promise<void>((resolve) => {
            for (const s of sockets) s.destroy()
            server.close(() => resolve())
          })
      }
    }),
    (peer) => Effect.promise(() => peer.close())
  )

const message = (f: Frame): ControlMessage => {
  const d = decodeControl(f.payload)
  if (Either.isLeft(d)) throw new Error(d.left.message)
  return d.right.message
}

/** Answers MembershipQuery with a one-node list whose id says which connection served it. */
const membership = (f: Frame, socket: net.Socket, connection: number) => {
  if (f.header.type === MsgType.Ping) {
    socket.write(encodeFrame(MsgType.Ping, f.header.requestId, new Uint8Array(0)))
    return
  }
  if (message(f)._tag === "MembershipQuery") {
    socket.write(
      encodeControlFrame(f.header.requestId, {
        _tag: "MembershipList",
        nodes: [{ id: `conn-${connection}`, address: "127.0.0.1:1", role: 1 }]
      })
    )
  }
}

describe("ControlChannel", () => {
  it.live("pipelines concurrent requests on one connection, each reply matched to its request", () =>
    Effect.scoped(
      Effect.gen(function* () {
        // Replies are sent in reverse order of arrival once 20 have queued, so matching must be by id.
        const queued: Array<[Frame, net.Socket]> = []
        const peer = yield* scriptedPeer((f, socket) => {
          queued.push([f, socket])
          if (queued.length === 20) {
            for (const [q, s] of queued.reverse()) {
              const m = message(q)
              s.write(
                encodeControlFrame(q.header.requestId, {
                  _tag: "Ack",
                  ok: true,
                  detail: m._tag === "Heartbeat" ? m.node : null
                })
              )
            }
          }
        })
        const ch = yield* ControlChannel.make(peer.address)
        const replies = yield* Effect.forEach(
          Array.from({ length: 20 }, (_, i) => `node-${i}`),
          (node) => ch.request({ _tag: "Heartbeat", node, blockCount: 0 }),
          { concurrency: "unbounded" }
        )
        expect(replies.map((r) => (r._tag === "Ack" ? r.detail : null))).toEqual(
          Array.from({ length: 20 }, (_, i) => `node-${i}`)
        )
        expect(peer.connections()).toBe(1)
      })
    )
  )

  it.live("reconnects after the peer drops the connection, and retries a request lost with it", () =>
    Effect.scoped(
      Effect.gen(function* () {
        let dropNext = false
        const peer = yield* scriptedPeer((f, socket, n) => {
          if (dropNext) {
            dropNext = false
            socket.destroy()
            return
          }
          membership(f, socket, n)
        })
        const ch = yield* ControlChannel.make(peer.address, { retryDelay: "10 millis" })
        const first = yield* ch.request({ _tag: "MembershipQuery" })
        expect(first._tag === "MembershipList" && first.nodes[0]!.id).toBe("conn-1")
        // The peer reads this request and drops the connection without answering:
        // the channel opens a new connection and sends it again.
        dropNext = true
        const second = yield* ch.request({ _tag: "MembershipQuery" })
        expect(second._tag === "MembershipList" && second.nodes[0]!.id).toBe("conn-2")
        yield* ch.ping()
        expect(peer.connections()).toBe(2)
      })
    )
  )

  it.live("a peer that never answers → ControlTimeout naming the request and address", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const peer = yield* scriptedPeer(() => {})
        const ch = yield* ControlChannel.make(peer.address, { requestTimeout: "150 millis" })
        const err = yield* Effect.flip(ch.request({ _tag: "MembershipQuery" }))
        expect(err._tag).toBe("ControlTimeout")
        expect(err.message).toContain("MembershipQuery")
        expect(err.message).toContain(peer.address)
      })
    )
  )

  it.live("an error frame → ControlRemoteError with the peer's message verbatim", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const peer = yield* scriptedPeer((f, socket) =>
          socket.write(encodeErrorFrame(MsgType.Control, f.header.requestId, "schema 9 is not supported (max 5)"))
        )
        const ch = yield* ControlChannel.make(peer.address)
        const err = yield* Effect.flip(ch.request({ _tag: "MembershipQuery" }))
        expect(err._tag).toBe("ControlRemoteError")
        if (err._tag === "ControlRemoteError") expect(err.detail).toBe("schema 9 is not supported (max 5)")
      })
    )
  )

  it.live("a reply that is not a valid frame → ControlProtocolError; nothing listening → ControlConnectError", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const peer = yield* scriptedPeer((_, socket) => socket.write(Buffer.from("HTTP/1.1 400 Bad Request\r\n\r\n")))
        const ch = yield* ControlChannel.make(peer.address, { retries: 0 })
        const bad = yield* Effect.flip(ch.request({ _tag: "MembershipQuery" }))
        expect(bad._tag).toBe("ControlProtocolError")
        expect(bad.message).toContain("magic")

        // Find a port with nothing on it: bind, note, close.
        const free = yield* Effect.promise(
          () =>
            new Promise<number>((resolve) => {
              const s = net.createServer().listen(0, "127.0.0.1", () => {
                const port = (s.address() as net.AddressInfo).port
                s.close(() => resolve(port))
              })
            })
        )
        const dead = yield* ControlChannel.make(`127.0.0.1:${free}`, { retries: 1, retryDelay: "10 millis" })
        const refused = yield* Effect.flip(dead.request({ _tag: "MembershipQuery" }))
        expect(refused._tag).toBe("ControlConnectError")
        expect(refused.message).toContain(`127.0.0.1:${free}`)
        const nonsense = yield* ControlChannel.make("not-an-address", { retries: 0 })
        expect((yield* Effect.flip(nonsense.request({ _tag: "MembershipQuery" })))._tag).toBe("ControlConnectError")
      })
    )
  )
})
