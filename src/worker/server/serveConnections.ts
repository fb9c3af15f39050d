/**
 * How a data SocketServer serves each connection it is given, whether it accepted the
 * connection itself (SocketServer.ts) or was handed it by the owner of the listening socket
 * (loops/HandedSockets.ts).
 *
 * - `serveConnections`: the @effect/platform contract: the connection as a platform Socket in a
 *   fiber of its own, a handler failure logged (not the server's), and the socket destroyed when
 *   the handler ends.
 * - `serveConnectionsDirect`: the connection handed to a plain callback and kept in a set until
 *   it closes; closing the scope destroys every one still open. For a server whose connections
 *   live on socket events (the data server's serve loop): a parked fiber per connection, with its
 *   platform Socket, latch, context and stack, was ~9 KiB of heap for each idle connection
 *   (heap snapshot, 1024 connections against none), half of what a connection costs.
 */
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as Socket from "@effect/platform/Socket"
import { Cause, Effect, FiberSet, Runtime, Scope } from "effect"
import type * as net from "node:net"

export interface ConnectionServing {
  /** Serves one connection; returns at once. */
  readonly serve: (conn: net.Socket) => void
  /** Closing it ends every connection it serves. */
  readonly scope: Scope.CloseableScope
}

export const serveConnections = <R, E, _>(handler: (socket: Socket.Socket) => Effect.Effect<_, E, R>): Effect.Effect<ConnectionServing, never, R> =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const fibers = yield* FiberSet.make().pipe(Scope.extend(scope))
    const fork = yield* FiberSet.runtime(fibers)<R>()
    const serve = (conn: net.Socket) => {
      conn.on("error", () => {})
      const open = Effect.suspend(() =>
        conn.destroyed ? Effect.fail(new Socket.SocketCloseError({ reason: "Close", code: 1000 })) : Effect.succeed(conn)
      )
      fork(
        NodeSocket.fromDuplex(open).pipe(
          Effect.flatMap(handler),
          Effect.catchAllCause((cause) =>
            Cause.isInterruptedOnly(cause) ? Effect.void : Effect.logWarning("data connection handler failed", cause)
          ),
          Effect.ensuring(Effect.sync(() => conn.destroy())),
          Effect.provideService(NodeSocket.NetSocket, conn)
        )
      )
    }
    return { serve, scope }
  })

/** Serves each connection through `onSocket` (which must return at once); a throw is logged and ends that connection. */
export const serveConnectionsDirect = (onSocket: (conn: net.Socket) => void): Effect.Effect<ConnectionServing> =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const open = new Set<net.Socket>()
    let closed = false
    yield* Scope.addFinalizer(
      scope,
      Effect.sync(() => {
        closed = true
        for (const s of open) s.destroy()
        open.clear()
      })
    )
    const serve = (conn: net.Socket) => {
      conn.on("error", () => {})
      if (closed || conn.destroyed) return void conn.destroy()
      open.add(conn)
      conn.once("close", () => open.delete(conn))
      try {
        onSocket(conn)
      } catch (defect) {
        conn.destroy()
        runFork(Effect.logWarning("data connection handler failed", Cause.die(defect)))
      }
    }
    return { serve, scope }
  })
