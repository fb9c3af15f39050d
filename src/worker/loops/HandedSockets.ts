/**
 * A serving loop's socket server when its owner deals the connections (balanced scheduling, see
 * HandOff.ts): the @effect/platform `SocketServer` the DataServer runs over, fed by the owner's
 * "take" messages instead of a listening socket. Each connection arrives as a raw TCP handle, so
 * it is wrapped here exactly as a listening net.Server would (paused when the plane reads the fd
 * itself: libuv must never read it), and its close is reported back so the owner's count of this
 * loop's connections stays true.
 */
import * as Socket from "@effect/platform/Socket"
import * as SocketServer from "@effect/platform/SocketServer"
import { Effect, Exit, Layer, Scope } from "effect"
import * as net from "node:net"
import { DataPlane } from "../plane/DataPlane.js"
import { connectionMessage, connectionMessageKind } from "./protocol.js"
import { serveConnections } from "../server/serveConnections.js"

/** `net.Socket`'s constructor options for adopting an accepted handle (what net.Server passes; not in @types/node). */
interface AdoptOptions extends net.SocketConstructorOpts {
  readonly handle: unknown
  readonly pauseOnCreate: boolean
}

const tellOwner = (kind: "serving" | "closed") => {
  if (process.send !== undefined && process.connected) process.send(connectionMessage(kind), undefined, undefined, () => {})
}

/** Serves the connections the owner hands this process; `address` is the owner's listening address. */
export const layer = (address: { readonly host: string; readonly port: number }): Layer.Layer<SocketServer.SocketServer, never, DataPlane> =>
  Layer.scoped(
    SocketServer.SocketServer,
    Effect.gen(function* () {
      const plane = yield* DataPlane
      const pause = plane.read !== undefined
      const pending: Array<net.Socket> = []
      let onConnection: (socket: net.Socket) => void = (socket) => void pending.push(socket)
      const onMessage = (m: unknown, handle: unknown) => {
        if (connectionMessageKind(m) !== "take" || handle === undefined || handle === null) return
        const socket = new net.Socket({ handle, pauseOnCreate: pause, allowHalfOpen: true, readable: true, writable: true } as AdoptOptions)
        socket.setNoDelay(true)
        socket.once("close", () => tellOwner("closed"))
        onConnection(socket)
      }
      yield* Effect.acquireRelease(
        Effect.sync(() => process.on("message", onMessage)),
        () =>
          Effect.sync(() => {
            process.off("message", onMessage)
            onConnection = (s) => void s.destroy()
            for (const s of pending.splice(0)) s.destroy()
          })
      )

      const run = <R, E, _>(handler: (socket: Socket.Socket) => Effect.Effect<_, E, R>) =>
        Effect.gen(function* () {
          const { serve, scope } = yield* serveConnections(handler)
          return yield* Effect.async<never>(() => {
            onConnection = serve
            for (const s of pending.splice(0)) serve(s)
            // Only now is a handed connection served at once: the owner may start dealing to this loop.
            tellOwner("serving")
            return Effect.suspend(() => {
              onConnection = (s) => void pending.push(s)
              return Scope.close(scope, Exit.void)
            })
          })
        })

      return SocketServer.SocketServer.of({ address: { _tag: "TcpAddress", hostname: address.host, port: address.port }, run })
    })
  )
