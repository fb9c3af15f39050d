/**
 * One TCP connection speaking the framed protocol as a pipelined client: many
 * requests in flight, each reply matched to its request by the echoed request id.
 *
 * Plain callback TypeScript on purpose: the Effect wrappers above it own retries,
 * timeouts and typed errors. The lifecycle (connect, pending requests, failure) is
 * `PipelinedConnection`'s; this class decodes whole frames with a `FrameDecoder`.
 */
import * as net from "node:net"
import * as tls from "node:tls"
import { parseHostPort } from "./address.js"
import { clientTlsOptions, type ControlTlsFiles } from "./controlTls.js"
import { FrameDecoder, type Frame, type FrameCaps } from "../protocol/index.js"
import { type Failure, PipelinedConnection } from "./PipelinedConnection.js"

export type { FailureKind } from "./PipelinedConnection.js"

export type Reply = { readonly ok: true; readonly frame: Frame } | Failure

export interface FramedConnectionOptions {
  readonly caps: FrameCaps
  readonly connectTimeoutMs: number
  /** Dial TLS with these files (read anew for this connection, so rotated ones apply). */
  readonly tls?: ControlTlsFiles | undefined
}

export class FramedConnection extends PipelinedConnection<{ readonly ok: true; readonly frame: Frame }> {
  private readonly decoder: FrameDecoder

  constructor(address: string, options: FramedConnectionOptions) {
    super(address)
    this.decoder = new FrameDecoder(options.caps)
    if (options.tls !== undefined) {
      const target = parseHostPort(address)
      let socket: tls.TLSSocket
      try {
        if (target === undefined) throw new Error("not a host:port address")
        socket = tls.connect({ ...clientTlsOptions(options.tls, target.host), host: target.host, port: target.port })
      } catch (e) {
        const dead = new net.Socket()
        this.start(dead, options.connectTimeoutMs, { dialed: "secureConnect" })
        this.fail("connect", (e as Error).message)
        return
      }
      socket.on("data", (chunk: Buffer) => this.onData(chunk))
      this.start(socket, options.connectTimeoutMs, { dialed: "secureConnect" })
      return
    }
    const socket = new net.Socket()
    socket.on("data", (chunk: Buffer) => this.onData(chunk))
    this.start(socket, options.connectTimeoutMs)
  }

  private onData(chunk: Buffer): void {
    this.decoder.push(chunk)
    for (;;) {
      const next = this.decoder.next()
      if (next === undefined) return
      if (!("header" in next)) {
        this.fail("protocol", `undecodable reply: ${next.message}`)
        return
      }
      // A reply for a request nobody waits for (timed out, cancelled) is dropped.
      this.complete(next.header.requestId, { ok: true, frame: next })
    }
  }

  protected partialBytes(): number {
    return this.decoder.buffered
  }
}
