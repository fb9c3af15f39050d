/** Binding a node:http server and learning its URL: the origin stub and the gateway both listen this way. */
import type * as http from "node:http"
import type { AddressInfo } from "node:net"

export interface RunningServer {
  readonly server: http.Server
  readonly host: string
  readonly port: number
  readonly url: string
  readonly close: () => Promise<void>
}

export const urlFor = (host: string, port: number): string => {
  const h = host === "0.0.0.0" || host === "" ? "127.0.0.1" : host === "::" ? "[::1]" : host.includes(":") ? `[${host}]` : host
  return `http://${h}:${port}`
}

/** Binds `server` (ephemeral port when 0); `onUrl` learns the URL before anyone can reach it. */
export const listenHttp = (server: http.Server, host: string, port: number, onUrl: (url: string) => void = () => {}): Promise<RunningServer> =>
  new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(port, host, () => {
      server.off("error", reject)
      const actual = (server.address() as AddressInfo).port
      const url = urlFor(host, actual)
      onUrl(url)
      resolve({
        server,
        host,
        port: actual,
        url,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done())
            server.closeAllConnections()
          })
      })
    })
  })
