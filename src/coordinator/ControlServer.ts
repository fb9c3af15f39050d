/**
 * The coordinator's control listener: framed protocol over TCP.
 *
 * Per connection: frames are decoded as they arrive; each Control frame is
 * handled concurrently and answered with the same request id (clients match by
 * id, so replies may overtake each other). Ping frames are echoed. A payload
 * that does not decode gets an error frame; a frame type the coordinator does
 * not serve gets an error frame. A framing error the stream cannot recover from
 * (bad magic or version, a length over the type's cap) closes that connection
 * only, without a reply, as is a partial frame left idle past the read timeout.
 */
import * as net from "node:net"
import { Data, Effect, Exit, Runtime, type Scope } from "effect"
import {
  Flags,
  FrameDecoder,
  MsgType,
  decodeControl,
  encodeControlFrame,
  encodeErrorFrame,
  encodeFrame,
  type ControlMessage,
  type FrameCaps
} from "../protocol/index.js"
import { formatHostPort } from "../client/address.js"

export class ControlListenError extends Data.TaggedError("ControlListenError")<{
  readonly host: string
  readonly port: number
  readonly detail: string
}> {
  override get message() {
    return `cannot listen for control connections on ${this.host}:${this.port}: ${this.detail}`
  }
}

export interface ControlServerStats {
  connections: number
  connectionsTotal: number
  requests: Record<string, number>
  errorFrames: number
  droppedConnections: number
}

export interface ControlServerOptions {
  readonly host: string
  readonly port: number
  readonly caps: FrameCaps
  /** A partial frame that sits idle this long closes the connection. */
  readonly readTimeoutMs: number
  readonly handle: (message: ControlMessage) => Effect.Effect<ControlMessage>
}

export interface ControlServer {
  /** `host:port` actually bound (port 0 resolved). */
  readonly address: string
  readonly port: number
  readonly stats: ControlServerStats
}

/** Control requests one connection may have being handled at once before the server stops reading it. */
const MAX_IN_FLIGHT = 256

const MSG_NAMES: Record<number, string> = {
  [MsgType.Control]: "Control",
  [MsgType.Get]: "Get",
  [MsgType.GetRange]: "GetRange",
  [MsgType.Put]: "Put",
  [MsgType.Ping]: "Ping",
  [MsgType.Delete]: "Delete"
}

export const serveControl = (options: ControlServerOptions): Effect.Effect<ControlServer, ControlListenError, Scope.Scope> =>
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<never>()
    const runFork = Runtime.runFork(runtime)
    const stats: ControlServerStats = {
      connections: 0,
      connectionsTotal: 0,
      requests: {},
      errorFrames: 0,
      droppedConnections: 0
    }
    const sockets = new Set<net.Socket>()

    const onConnection = (socket: net.Socket) => {
      sockets.add(socket)
      stats.connections++
      stats.connectionsTotal++
      socket.setNoDelay(true)
      const decoder = new FrameDecoder(options.caps)
      const send = (bytes: Uint8Array) => {
        if (!socket.destroyed) socket.write(bytes)
      }
      const count = (name: string) => {
        stats.requests[name] = (stats.requests[name] ?? 0) + 1
      }
      const errorReply = (type: MsgType, requestId: number, message: string) => {
        stats.errorFrames++
        send(encodeErrorFrame(type, requestId, message))
      }
      // Handlers run concurrently; a peer that pipelines without reading replies is paused, not buffered without bound.
      let inFlight = 0
      const settled = () => {
        inFlight--
        if (inFlight === MAX_IN_FLIGHT / 2 && socket.isPaused()) socket.resume()
      }
      const drop = () => {
        stats.droppedConnections++
        socket.destroy()
      }
      socket.setTimeout(options.readTimeoutMs, () => {
        // Idle connections are fine; a frame started and never finished is not.
        if (decoder.buffered > 0) drop()
      })
      socket.on("data", (chunk: Buffer) => {
        decoder.push(chunk)
        for (;;) {
          const next = decoder.next()
          if (next === undefined) return
          if (!("header" in next)) {
            drop()
            return
          }
          const { header, payload } = next
          if (header.type === MsgType.Ping) {
            count("Ping")
            send(encodeFrame(MsgType.Ping, header.requestId, payload))
            continue
          }
          if (header.type !== MsgType.Control) {
            count(MSG_NAMES[header.type] ?? `type${header.type}`)
            errorReply(
              header.type,
              header.requestId,
              `the coordinator serves only Control and Ping frames, not ${MSG_NAMES[header.type] ?? `message type ${header.type}`}; send data requests to a worker`
            )
            continue
          }
          if ((header.flags & Flags.Error) !== 0) {
            count("ErrorFrame")
            continue
          }
          const decoded = decodeControl(payload)
          if (decoded._tag === "Left") {
            count("Malformed")
            errorReply(MsgType.Control, header.requestId, `malformed control message: ${decoded.left.message}`)
            continue
          }
          const message = decoded.right.message
          count(message._tag)
          const requestId = header.requestId
          inFlight++
          if (inFlight >= MAX_IN_FLIGHT) socket.pause()
          runFork(
            options.handle(message).pipe(
              Effect.exit,
              Effect.map((exit) => {
                settled()
                if (Exit.isSuccess(exit)) send(encodeControlFrame(requestId, exit.value))
                else errorReply(MsgType.Control, requestId, `internal error handling ${message._tag}`)
              })
            )
          )
        }
      })
      socket.on("error", () => socket.destroy())
      socket.on("close", () => {
        sockets.delete(socket)
        stats.connections--
      })
    }

    const server = net.createServer(onConnection)
    const port = yield* Effect.async<number, ControlListenError>((resume) => {
      const onError = (err: Error) =>
        resume(Effect.fail(new ControlListenError({ host: options.host, port: options.port, detail: err.message })))
      server.once("error", onError)
      server.listen(options.port, options.host, () => {
        server.off("error", onError)
        const address = server.address()
        resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : options.port))
      })
    })
    yield* Effect.addFinalizer(() =>
      Effect.async<void>((resume) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resume(Effect.void))
      })
    )
    return { address: formatHostPort(options.host, port), port, stats }
  })
