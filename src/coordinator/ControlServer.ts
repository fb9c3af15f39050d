/**
 * The coordinator's control listener: framed protocol over TCP.
 *
 * Per connection: frames are decoded as they arrive; each Control frame is
 * handled concurrently and answered with the same request id (clients match by
 * id, so replies may overtake each other). Ping frames are echoed. A payload
 * that does not decode gets an error frame; a frame type the coordinator does
 * not serve gets an error frame. A framing error the stream cannot recover from
 * (bad magic or version, a length over the type's cap) gets one error frame
 * saying what was wrong, then the connection is closed; a partial frame left
 * idle past the read timeout closes the connection the same way.
 *
 * Memory per connection is bounded: a body is allocated only after its header
 * passed the per-type cap (Put, Get, GetRange and Delete bodies are never served
 * here, so their caps are tiny), and the connection stops being read while
 * replies pile up unread (write backpressure) or too many requests are being
 * handled. A peer that half-closes after its requests still gets every reply
 * before the coordinator closes its side.
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
  capFor,
  isMsgType,
  type ControlMessage,
  type FrameCaps,
  type FrameError
} from "../protocol/index.js"
import { formatHostPort } from "../transport/address.js"
import { type ControlTlsFiles, controlTlsServer } from "../transport/controlTls.js"

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
  /** Connections closed for a protocol error, a stalled partial frame or unread replies. */
  droppedConnections: number
  /** Times a connection stopped being read because its replies were not read or too many requests were pending. */
  backpressurePauses: number
  /** TLS handshakes or peer identities refused (no certificate, wrong CA, expired, outside the trust domain). */
  tlsRefused: number
}

export interface ControlServerOptions {
  readonly host: string
  readonly port: number
  readonly caps: FrameCaps
  /** A partial frame that sits idle this long closes the connection. */
  readonly readTimeoutMs: number
  readonly handle: (message: ControlMessage) => Effect.Effect<ControlMessage>
  /** Serve TLS (mTLS with a CA, identities checked with a trust domain); plain TCP when absent. */
  readonly tls?: ControlTlsFiles | undefined
}

export interface ControlServer {
  /** `host:port` actually bound (port 0 resolved). */
  readonly address: string
  readonly port: number
  readonly stats: ControlServerStats
}

/** Control requests one connection may have being handled at once before the server stops reading it. */
const MAX_IN_FLIGHT = 256
/** Reply bytes queued for a peer that is not reading, past which the server stops reading its requests. */
const WRITE_HIGH_WATER = 256 * 1024
/** How long a connection closed for a protocol error may take to read its error frame before it is reset. */
const CLOSE_GRACE_MS = 2000

/**
 * What the coordinator reads: Control up to Talon's 1 MiB; it serves no data
 * frame, so a Get/GetRange/Put/Delete header advertising more than a request's
 * worth of body is refused before any of it is buffered (a 320 MiB Put would
 * otherwise be allocated and read to be answered with an error).
 */
export const COORDINATOR_CAPS: FrameCaps = {
  control: 1024 * 1024,
  get: 4 * 1024,
  getRange: 4 * 1024,
  put: 4 * 1024,
  ping: 4 * 1024,
  delete: 4 * 1024
}

const MSG_NAMES: Record<number, string> = {
  [MsgType.Control]: "Control",
  [MsgType.Get]: "Get",
  [MsgType.GetRange]: "GetRange",
  [MsgType.Put]: "Put",
  [MsgType.Ping]: "Ping",
  [MsgType.Delete]: "Delete"
}

/** The error frame sent before closing a connection whose byte stream cannot be resynchronised. */
const fatalReply = (e: FrameError, caps: FrameCaps): { type: MsgType; requestId: number; message: string } => {
  if (e._tag === "OverCap") {
    const name = MSG_NAMES[e.type] ?? `type ${e.type}`
    const hint =
      e.type === MsgType.Control
        ? ""
        : e.type === MsgType.Ping
          ? ""
          : `; the coordinator serves only Control and Ping frames (data requests go to a worker)`
    return {
      type: isMsgType(e.type) ? e.type : MsgType.Control,
      requestId: e.requestId ?? 0,
      message: `${name} frame advertises ${e.length} payload bytes, over the coordinator's ${capFor(caps, e.type as MsgType)}-byte cap for ${name}${hint}; closing the connection`
    }
  }
  return { type: MsgType.Control, requestId: 0, message: `${e.message}; closing the connection` }
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
      droppedConnections: 0,
      backpressurePauses: 0,
      tlsRefused: 0
    }
    const sockets = new Set<net.Socket>()

    const onConnection = (socket: net.Socket) => {
      sockets.add(socket)
      stats.connections++
      stats.connectionsTotal++
      socket.setNoDelay(true)
      const decoder = new FrameDecoder(options.caps)
      let inFlight = 0
      let peerEnded = false
      let closing = false
      let paused = false

      // Reading stops while replies are not being read or too many requests are pending, so one
      // peer cannot make the coordinator buffer without bound; it resumes once both clear.
      const flow = () => {
        if (closing) return
        const congested = inFlight >= MAX_IN_FLIGHT || socket.writableLength > WRITE_HIGH_WATER
        if (congested && !paused) {
          paused = true
          stats.backpressurePauses++
          socket.pause()
        } else if (!congested && paused) {
          paused = false
          socket.resume()
        }
      }
      const writable = () => !socket.destroyed && !socket.writableEnded
      const send = (bytes: Uint8Array) => {
        if (!writable()) return
        socket.write(bytes)
        if (socket.writableLength > WRITE_HIGH_WATER) flow()
      }
      // The peer half-closed: its side is done, ours ends once every pending reply is written.
      const finishIfDone = () => {
        if (peerEnded && inFlight === 0 && writable()) socket.end()
      }
      const count = (name: string) => {
        stats.requests[name] = (stats.requests[name] ?? 0) + 1
      }
      const errorReply = (type: MsgType, requestId: number, message: string) => {
        stats.errorFrames++
        send(encodeErrorFrame(type, requestId, message))
      }
      /** One error frame saying what was wrong, then close; a peer that does not take it is reset. */
      const closeWith = (type: MsgType, requestId: number, message: string) => {
        if (closing) return
        closing = true
        stats.droppedConnections++
        if (writable()) {
          stats.errorFrames++
          socket.end(encodeErrorFrame(type, requestId, message))
        }
        // Nothing more is read (a peer streaming a refused body costs nothing); the socket is
        // released once the peer had time to read the error frame.
        socket.pause()
        setTimeout(() => socket.destroy(), CLOSE_GRACE_MS).unref()
      }
      socket.on("drain", flow)
      socket.setTimeout(options.readTimeoutMs, () => {
        if (closing) return
        // Idle connections are fine; a frame started and never finished is not, nor a peer
        // that has read none of its replies for a whole timeout.
        if (socket.writableLength > 0) {
          stats.droppedConnections++
          socket.destroy()
        } else if (decoder.buffered > 0) {
          closeWith(
            MsgType.Control,
            0,
            `a partial frame (${decoder.buffered} bytes) sat unfinished for ${options.readTimeoutMs} ms; closing the connection`
          )
        }
      })
      socket.on("data", (chunk: Buffer) => {
        if (closing) return
        decoder.push(chunk)
        for (;;) {
          const next = decoder.next()
          if (next === undefined) return
          if (!("header" in next)) {
            const reply = fatalReply(next, options.caps)
            closeWith(reply.type, reply.requestId, reply.message)
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
          flow()
          runFork(
            options.handle(message).pipe(
              Effect.exit,
              Effect.map((exit) => {
                inFlight--
                if (Exit.isSuccess(exit)) send(encodeControlFrame(requestId, exit.value))
                else errorReply(MsgType.Control, requestId, `internal error handling ${message._tag}`)
                flow()
                finishIfDone()
              })
            )
          )
        }
      })
      socket.on("end", () => {
        peerEnded = true
        if (closing) return
        const truncated = decoder.end()
        if (truncated !== undefined) {
          closeWith(MsgType.Control, 0, `${truncated.message}; closing the connection`)
          return
        }
        finishIfDone()
      })
      socket.on("error", () => socket.destroy())
      socket.on("close", () => {
        sockets.delete(socket)
        stats.connections--
      })
    }

    const secure =
      options.tls === undefined
        ? undefined
        : yield* Effect.try({
            try: () =>
              controlTlsServer(
                options.tls!,
                onConnection,
                (peer, why) => {
                  stats.tlsRefused++
                  runFork(Effect.logWarning(`refused a control connection from ${peer}: ${why}`))
                },
                (outcome) => runFork(Effect.logInfo(`control TLS certificate reloaded: ${outcome}`))
              ),
            catch: (e) => new ControlListenError({ host: options.host, port: options.port, detail: (e as Error).message })
          })
    const server: net.Server = secure?.server ?? net.createServer({ allowHalfOpen: true }, onConnection)
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
        secure?.stop()
        for (const socket of sockets) socket.destroy()
        server.close(() => resume(Effect.void))
      })
    )
    return { address: formatHostPort(options.host, port), port, stats }
  })
