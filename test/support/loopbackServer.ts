/**
 * Listening for a test's scripted TCP server: an ephemeral port on 127.0.0.1, every connection
 * tracked, and a close that cuts them all before it waits for the listener (a plain
 * `server.close` would wait on clients that never hang up).
 */
import type * as net from "node:net"

export const listenLoopback = (server: net.Server): Promise<{ readonly port: number; readonly close: () => Promise<void> }> =>
  new Promise((resolve, reject) => {
    const sockets = new Set<net.Socket>()
    server.on("connection", (socket) => {
      sockets.add(socket)
      socket.on("close", () => sockets.delete(socket))
    })
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject)
      resolve({
        port: (server.address() as net.AddressInfo).port,
        close: () =>
          new Promise<void>((done) => {
            for (const s of sockets) s.destroy()
            if (server.listening) server.close(() => done())
            else done()
          })
      })
    })
  })
