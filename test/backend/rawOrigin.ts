/**
 * A raw TCP origin for the receive tests: every response is written by hand, so framing and
 * faults are exact. `respond` answers each request head on a connection.
 */
import { Effect } from "effect"
import * as net from "node:net"

/** What the scripted origin does with one request on a connection (its head as text). */
export type Respond = (socket: net.Socket, head: string, connection: number) => void

export const rawOrigin = Effect.acquireRelease(
  Effect.async<{ readonly port: number; respond: Respond; connections: number; readonly sockets: Set<net.Socket>; readonly close: () => Promise<void> }>((resume) => {
    const sockets = new Set<net.Socket>()
    const origin = {
      port: 0,
      connections: 0,
      sockets,
      respond: ((socket) => socket.end()) as Respond,
      close: () =>
        new Promise<void>((resolve) => {
          for (const s of sockets) s.destroy()
          server.close(() => resolve())
        })
    }
    const server = net.createServer((socket) => {
      const id = ++origin.connections
      sockets.add(socket)
      socket.on("close", () => sockets.delete(socket))
      socket.on("error", () => {})
      let pending = ""
      socket.on("data", (data) => {
        pending += data.toString("latin1")
        for (let end = pending.indexOf("\r\n\r\n"); end >= 0; end = pending.indexOf("\r\n\r\n")) {
          const head = pending.slice(0, end)
          pending = pending.slice(end + 4)
          origin.respond(socket, head, id)
        }
      })
    })
    server.listen(0, "127.0.0.1", () => {
      origin.port = (server.address() as net.AddressInfo).port
      resume(Effect.succeed(origin))
    })
  }),
  (origin) => Effect.promise(() => origin.close())
)
