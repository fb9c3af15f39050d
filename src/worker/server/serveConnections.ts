/**
 * How a data SocketServer serves each connection it is given, whether it accepted the
 * connection itself (SocketServer.ts) or was handed it by the owner of the listening socket
 * (loops/HandedSockets.ts): the connection as a platform Socket in a fiber of its own, a
 * handler failure logged (not the server's), and the socket destroyed when the handler ends.
 */
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as Socket from "@effect/platform/Socket"
import { Cause, Effect, FiberSet, Scope } from "effect"
import type * as net from "node:net"

export interface ConnectionServing {
  /** Serves one connection; returns at once. */
  readonly serve: (conn: net.Socket) => void
  /** Closing it interrupts every connection's handler. */
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
