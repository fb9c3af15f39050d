/** A loopback `host:port` nothing listens on: a port that was free a moment ago. */
import * as net from "node:net"
import { Effect } from "effect"

export const deadAddress = Effect.promise(
  () =>
    new Promise<string>((resolve) => {
      const server = net.createServer()
      server.listen(0, "127.0.0.1", () => {
        const port = (server.address() as net.AddressInfo).port
        server.close(() => resolve(`127.0.0.1:${port}`))
      })
    })
)
