/**
 * The data listener: framed protocol over TCP, one FrameDecoder per
 * connection, replies through the DataPlane writer in the ServeMode's order.
 *
 * Protocol violations (bad magic or version, an unknown type, a length over
 * its type's cap) drop that connection without a reply, checked as soon as
 * the 16 header bytes are in, before the body is buffered. A connection that
 * sits on a partial frame for the read timeout is dropped too. Other
 * connections are unaffected. Once a reply header is on the wire a failure
 * can only close the connection (the client sees a short body).
 */
import * as net from "node:net"
import { Context, Data, Effect, Layer } from "effect"
import { DEFAULT_CAPS, FrameDecoder, type FrameCaps } from "../../protocol/index.js"
import { DataPlane, type ConnectionWriter } from "../plane/DataPlane.js"
import { parseHostPort, WorkerConfig } from "../config.js"
import { WorkerMetrics, type WorkerStats } from "../metrics.js"
import { MissPath } from "../miss/MissPath.js"
import { WorkerReadiness } from "../membership/Readiness.js"
import { ReadPath } from "../ReadPath.js"
import { ServeMode, type ServeModeShape } from "./ServeMode.js"
import { RequestHandler, type Reply } from "./RequestHandler.js"

export class DataServerListenError extends Data.TaggedError("DataServerListenError")<{
  readonly address: string
  readonly detail: string
}> {
  override get message() {
    return `cannot listen for data connections on ${this.address}: ${this.detail}`
  }
}

export interface DataServerShape {
  /** The bound address (the real port when configured with port 0). */
  readonly host: string
  readonly port: number
  readonly address: string
  /** Open connections right now. */
  readonly connections: () => number
}

/** Request bodies a worker accepts: nothing it serves needs more than 64 KiB (a Put is refused anyway). */
export const WORKER_CAPS: FrameCaps = {
  ...DEFAULT_CAPS,
  control: 64 * 1024,
  get: 64 * 1024,
  getRange: 64 * 1024,
  put: 64 * 1024,
  delete: 64 * 1024
}

export class DataServer extends Context.Tag("talon/worker/DataServer")<DataServer, DataServerShape>() {
  static readonly layer = Layer.scoped(
    DataServer,
    Effect.gen(function* () {
      const cfg = yield* WorkerConfig
      const plane = yield* DataPlane
      const mode = yield* ServeMode
      const stats = yield* WorkerMetrics
      const handler = new RequestHandler(yield* ReadPath, yield* MissPath, yield* WorkerReadiness, stats)
      const hp = parseHostPort(cfg.dataAddress)
      if (hp === undefined) {
        return yield* Effect.fail(new DataServerListenError({ address: cfg.dataAddress, detail: "expected host:port" }))
      }
      const sockets = new Set<net.Socket>()
      // allowHalfOpen: a client that half-closes after its last request still gets every reply.
      const server = net.createServer({ noDelay: true, allowHalfOpen: true }, (socket) => {
        sockets.add(socket)
        socket.once("close", () => sockets.delete(socket))
        serveConnection(socket, {
          writer: plane.attach(socket),
          handler,
          mode,
          stats,
          readTimeoutMs: cfg.readTimeoutMs,
          maxInflight: cfg.maxInflightPerConnection
        })
      })
      const bound = yield* Effect.acquireRelease(
        Effect.async<net.AddressInfo, DataServerListenError>((resume) => {
          const onError = (e: Error) =>
            resume(Effect.fail(new DataServerListenError({ address: cfg.dataAddress, detail: e.message })))
          server.once("error", onError)
          server.listen({ host: hp.host, port: hp.port, backlog: 4096 }, () => {
            server.off("error", onError)
            resume(Effect.succeed(server.address() as net.AddressInfo))
          })
        }),
        () =>
          Effect.async<void>((resume) => {
            server.close(() => resume(Effect.void))
            for (const s of sockets) s.destroy()
          })
      )
      const host = bound.family === "IPv6" ? `[${bound.address}]` : bound.address
      yield* Effect.logInfo(`worker data listener on ${host}:${bound.port} (${plane.name} plane, ${mode.name} mode)`)
      return {
        host: bound.address,
        port: bound.port,
        address: `${host}:${bound.port}`,
        connections: () => sockets.size
      } satisfies DataServerShape
    })
  )
}

interface ConnectionDeps {
  readonly writer: ConnectionWriter
  readonly handler: RequestHandler
  readonly mode: ServeModeShape
  readonly stats: WorkerStats
  readonly readTimeoutMs: number
  readonly maxInflight: number
}

/** Serves one accepted socket until it closes. Plain callbacks: this is the per-request hot loop. */
export const serveConnection = (socket: net.Socket, deps: ConnectionDeps): void => {
  const { writer, handler, stats } = deps
  const decoder = new FrameDecoder(WORKER_CAPS)
  let paused = false
  let ended = false
  let dead = false
  stats.connectionsOpen++
  stats.connectionsTotal++

  const drop = () => {
    if (dead) return
    dead = true
    stats.connectionsDropped++
    socket.destroy()
  }

  const maybeFinish = () => {
    if (ended && !dead && conn.pending() === 0) {
      dead = true
      socket.end()
    }
  }

  const send = (reply: Reply): Promise<void> => {
    if (reply._tag === "File") return writer.writeFile(reply.header, reply.segments)
    const p = writer.writeFrame(reply.bytes)
    if (!reply.closeAfter) return p
    return p.then(() => {
      dead = true
      socket.end()
    })
  }

  const conn = deps.mode.open({
    writer,
    send,
    done: (reply) => handler.done(reply),
    onSettled: () => {
      if (paused && conn.pending() < deps.maxInflight / 2 && !dead) {
        paused = false
        socket.resume()
      }
      maybeFinish()
    },
    onWriteFailure: () => {
      dead = true
      socket.destroy()
    }
  })

  socket.on("data", (chunk: Buffer) => {
    if (dead) return
    decoder.push(chunk)
    for (;;) {
      const next = decoder.next()
      if (next === undefined) break
      if ("_tag" in next) {
        drop()
        return
      }
      const reply = handler.handle(next)
      if (reply instanceof Promise || reply._tag === "File" || !reply.closeAfter) conn.push(reply)
      else {
        conn.push(reply)
        // Nothing after a Put can be trusted to be a frame.
        socket.pause()
        paused = true
        return
      }
    }
    if (!paused && conn.pending() >= deps.maxInflight) {
      paused = true
      socket.pause()
    }
  })
  socket.on("end", () => {
    // Half-close: queued replies still go out, then the connection closes.
    ended = true
    maybeFinish()
  })
  socket.setTimeout(deps.readTimeoutMs)
  socket.on("timeout", () => {
    if (decoder.buffered > 0 && !paused) drop()
  })
  socket.on("error", () => {})
  socket.once("close", () => {
    dead = true
    conn.close()
    stats.connectionsOpen--
  })
}
