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
 *
 * Plain TCP is accepted by the platform's socket server, TLS by a node tls.Server (the
 * platform's cannot take one; the adapter hands each verified socket to the same
 * connection Effect). Per connection, the bytes are a Stream pulled from the socket, frames
 * are handled by a bounded `mapEffect` and replies written with drain: when handlers or
 * unread replies pile up, the Stream stops pulling and the socket stops being read.
 */
import type * as net from "node:net"
import type * as Socket from "@effect/platform/Socket"
import { NodeSocket, NodeSocketServer, NodeStream } from "@effect/platform-node"
import { Data, Effect, Exit, FiberSet, Option, type Scope, Stream } from "effect"
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

const closed = (socket: net.Socket) =>
  Effect.async<void>((resume) => {
    if (socket.closed) return resume(Effect.void)
    const done = () => resume(Effect.void)
    socket.once("close", done)
    return Effect.sync(() => socket.off("close", done))
  })

/** Resumes once `socket` has taken what is queued for the peer (or is gone). */
const drained = (socket: net.Socket) =>
  Effect.async<void>((resume) => {
    if (socket.destroyed || socket.writableLength <= WRITE_HIGH_WATER) return resume(Effect.void)
    const done = () => resume(Effect.void)
    socket.once("drain", done)
    socket.once("close", done)
    return Effect.sync(() => {
      socket.off("drain", done)
      socket.off("close", done)
    })
  })

const serveConnection = (options: ControlServerOptions, stats: ControlServerStats, socket: net.Socket): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    stats.connections++
    stats.connectionsTotal++
    socket.setNoDelay(true)
    const decoder = new FrameDecoder(options.caps)
    // Requests being handled, each a fiber of this connection; the reader waits on `room`
    // before pulling the next chunk while MAX_IN_FLIGHT are pending.
    const handlers = yield* FiberSet.make<void>()
    const fork = yield* FiberSet.runtime(handlers)<never>()
    const room = yield* Effect.makeLatch(true)
    let inFlight = 0
    let closing = false
    const writable = () => !socket.destroyed && !socket.writableEnded
    const send = (bytes: Uint8Array) => {
      if (writable()) socket.write(bytes)
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

    const handle = (requestId: number, message: ControlMessage) =>
      options.handle(message).pipe(
        Effect.exit,
        // Only an interruption skips this, and that is the connection closing.
        Effect.map((exit) => {
          if (--inFlight < MAX_IN_FLIGHT) room.unsafeOpen()
          if (Exit.isSuccess(exit)) send(encodeControlFrame(requestId, exit.value))
          else errorReply(MsgType.Control, requestId, `internal error handling ${message._tag}`)
        })
      )

    /** Everything one chunk holds: pings and refusals answered inline, control requests forked. */
    const onChunk = (chunk: Uint8Array): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (closing) return Effect.void
        decoder.push(chunk)
        for (;;) {
          const next = decoder.next()
          if (next === undefined) break
          if (!("header" in next)) {
            const reply = fatalReply(next, options.caps)
            closeWith(reply.type, reply.requestId, reply.message)
            break
          }
          const { header, payload } = next
          if (header.type === MsgType.Ping) {
            count("Ping")
            send(encodeFrame(MsgType.Ping, header.requestId, payload))
          } else if (header.type !== MsgType.Control) {
            count(MSG_NAMES[header.type] ?? `type${header.type}`)
            errorReply(
              header.type,
              header.requestId,
              `the coordinator serves only Control and Ping frames, not ${MSG_NAMES[header.type] ?? `message type ${header.type}`}; send data requests to a worker`
            )
          } else if ((header.flags & Flags.Error) !== 0) {
            count("ErrorFrame")
          } else {
            const decoded = decodeControl(payload)
            if (decoded._tag === "Left") {
              count("Malformed")
              errorReply(MsgType.Control, header.requestId, `malformed control message: ${decoded.left.message}`)
            } else {
              count(decoded.right.message._tag)
              inFlight++
              fork(handle(header.requestId, decoded.right.message))
            }
          }
        }
        // Replies the peer has not read, or too many requests pending: the next chunk waits.
        const unread = socket.writableLength > WRITE_HIGH_WATER
        const busy = inFlight >= MAX_IN_FLIGHT
        if (!unread && !busy) return Effect.void
        stats.backpressurePauses++
        if (busy) room.unsafeClose()
        return Effect.zipRight(room.await, Effect.suspend(() => drained(socket)))
      })

    const served = NodeStream.fromReadable<Error, Uint8Array>(() => socket, (e) => e as Error, { closeOnDone: false }).pipe(
      Stream.takeWhile(() => !closing),
      Stream.runForEach(onChunk),
      // The peer half-closed: our side ends once every pending reply is written; a partial
      // frame left is a protocol error.
      Effect.andThen(FiberSet.awaitEmpty(handlers)),
      Effect.andThen(
        Effect.sync(() => {
          if (closing) return
          const truncated = decoder.end()
          if (truncated !== undefined) closeWith(MsgType.Control, 0, `${truncated.message}; closing the connection`)
          else if (writable()) socket.end()
        })
      ),
      // A read error ends the connection like a reset.
      Effect.catchAll(() => Effect.sync(() => socket.destroy()))
    )
    yield* Effect.raceFirst(Effect.zipRight(served, closed(socket)), closed(socket)).pipe(
      // The fiber outlives its socket only when the server closes (interrupted) or a read failed.
      Effect.ensuring(
        Effect.sync(() => {
          stats.connections--
          socket.destroy()
        })
      )
    )
  })

export const serveControl = (options: ControlServerOptions): Effect.Effect<ControlServer, ControlListenError, Scope.Scope> =>
  Effect.gen(function* () {
    const stats: ControlServerStats = {
      connections: 0,
      connectionsTotal: 0,
      requests: {},
      errorFrames: 0,
      droppedConnections: 0,
      backpressurePauses: 0,
      tlsRefused: 0
    }
    const listenError = (detail: string) => new ControlListenError({ host: options.host, port: options.port, detail })
    const connection = (socket: net.Socket) => Effect.scoped(serveConnection(options, stats, socket))

    if (options.tls === undefined) {
      const server = yield* NodeSocketServer.make({ host: options.host, port: options.port, allowHalfOpen: true }).pipe(
        Effect.mapError((e) => listenError(String((e.cause as Error)?.message ?? e.cause)))
      )
      // Each connection is a fiber of the server's; closing the scope interrupts them all.
      yield* Effect.forkScoped(
        server.run((_: Socket.Socket) =>
          Effect.flatMap(Effect.serviceOption(NodeSocket.NetSocket), Option.match({ onNone: () => Effect.void, onSome: connection }))
        )
      )
      const port = server.address._tag === "TcpAddress" ? server.address.port : options.port
      return { address: formatHostPort(options.host, port), port, stats }
    }

    const connections = yield* FiberSet.make<void>()
    const runConnection = yield* FiberSet.runtime(connections)<never>()
    const runLog = yield* FiberSet.runtime(connections)<never>()
    const tlsFiles = options.tls
    const secure = yield* Effect.acquireRelease(
      Effect.try({
        try: () =>
          controlTlsServer(
            tlsFiles,
            (socket) => void runConnection(connection(socket)),
            (peer, why) => {
              stats.tlsRefused++
              runLog(Effect.logWarning(`refused a control connection from ${peer}: ${why}`))
            },
            (outcome) => runLog(Effect.logInfo(`control TLS certificate reloaded: ${outcome}`))
          ),
        catch: (e) => listenError((e as Error).message)
      }),
      (secure) => Effect.sync(() => secure.stop())
    )
    const port = yield* Effect.async<number, ControlListenError>((resume) => {
      const onError = (err: Error) => resume(Effect.fail(listenError(err.message)))
      secure.server.once("error", onError)
      secure.server.listen(options.port, options.host, () => {
        secure.server.off("error", onError)
        const address = secure.server.address()
        resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : options.port))
      })
    })
    // Connections first: the server's close waits for every socket to be gone.
    yield* Effect.addFinalizer(() =>
      FiberSet.clear(connections).pipe(
        Effect.andThen(() => secure.stop()),
        Effect.andThen(Effect.async<void>((resume) => void secure.server.close(() => resume(Effect.void))))
      )
    )
    return { address: formatHostPort(options.host, port), port, stats }
  })
