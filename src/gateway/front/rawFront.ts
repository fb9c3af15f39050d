/**
 * The raw front: the gateway's plain-HTTP server hands each accepted connection to it instead of
 * node:http. It answers the reads that dominate a training job (S3 GET/HEAD; local hits by
 * sendfile) itself and gives node:http every connection from the first request it cannot answer
 * completely (docs/decisions/gateway-body-path.md, step 9).
 */
import * as http from "node:http"
import type * as net from "node:net"
import type { Services } from "../context.js"
import { FrontConnection, type FrontShared } from "./connection.js"
import { DateLine } from "./responseHead.js"

export interface RawFront {
  /** Connections the front still owns (closed when the gateway stops; node:http closes its own). */
  readonly open: () => number
  readonly closeAll: () => void
}

/** Puts the raw front between `server`'s listening socket and node:http's connection handling. */
export const installRawFront = (server: http.Server, g: Services, headersTimeoutMs: number): RawFront => {
  const nodeListeners = server.listeners("connection") as Array<(socket: net.Socket) => void>
  server.removeAllListeners("connection")
  const connections = new Set<FrontConnection>()
  const shared: FrontShared = {
    g,
    date: new DateLine(g.now),
    // The gateway's server keeps node's default limit (--max-http-header-size).
    maxHeadBytes: http.maxHeaderSize,
    headersTimeoutMs,
    handOver: (socket) => {
      for (const l of nodeListeners) l.call(server, socket)
    },
    forget: (c) => void connections.delete(c)
  }
  server.on("connection", (socket: net.Socket) => {
    connections.add(new FrontConnection(socket, shared))
  })
  return {
    open: () => connections.size,
    closeAll: () => {
      for (const c of connections) c.destroy()
    }
  }
}
