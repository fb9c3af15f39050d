/**
 * One TCP connection speaking the framed protocol as a pipelined client: many
 * requests in flight, each reply matched to its request by the echoed request id.
 *
 * Plain callback TypeScript on purpose: it sits under both the control channel and
 * the data-plane pool, and the Effect wrappers above it own retries, timeouts and
 * typed errors. A connection that fails in any way (connect error, peer close, a
 * reply the decoder rejects, a body cut short) is destroyed and fails every pending
 * request; callers open a fresh one, which is how "short body → reconnect" happens.
 */
import * as net from "node:net"
import { FrameDecoder, type Frame, type FrameCaps } from "../protocol/index.js"
import { parseHostPort } from "./address.js"

export type FailureKind = "connect" | "lost" | "protocol"

export type Reply =
  | { readonly ok: true; readonly frame: Frame }
  | { readonly ok: false; readonly kind: FailureKind; readonly detail: string }

export interface FramedConnectionOptions {
  readonly caps: FrameCaps
  readonly connectTimeoutMs: number
}

export class FramedConnection {
  private readonly socket: net.Socket
  private readonly decoder: FrameDecoder
  private readonly pending = new Map<number, (reply: Reply) => void>()
  private connected = false
  private failure: { kind: FailureKind; detail: string } | undefined
  private connectTimer: ReturnType<typeof setTimeout> | undefined

  constructor(
    readonly address: string,
    options: FramedConnectionOptions
  ) {
    this.decoder = new FrameDecoder(options.caps)
    const parsed = parseHostPort(address)
    this.socket = new net.Socket()
    this.socket.setNoDelay(true)
    if (parsed === undefined) {
      this.failure = { kind: "connect", detail: `not a host:port address` }
      this.socket.destroy()
      return
    }
    this.connectTimer = setTimeout(
      () => this.fail("connect", `connect timed out after ${options.connectTimeoutMs} ms`),
      options.connectTimeoutMs
    )
    this.socket.once("connect", () => {
      this.connected = true
      clearTimeout(this.connectTimer)
    })
    this.socket.on("data", (chunk: Buffer) => this.onData(chunk))
    this.socket.on("error", (err) => this.fail(this.connected ? "lost" : "connect", err.message))
    this.socket.on("close", () =>
      this.fail(this.connected ? "lost" : "connect", this.connected ? "connection closed by peer" : "connection refused")
    )
    this.socket.connect(parsed.port, parsed.host)
  }

  /** False once the connection has failed or been closed; open a new one then. */
  get usable(): boolean {
    return this.failure === undefined
  }

  get inFlight(): number {
    return this.pending.size
  }

  /**
   * Writes one complete request frame; `onReply` is called exactly once, with the
   * reply frame carrying `requestId` or with the failure that ended the connection.
   */
  send(requestId: number, frame: Uint8Array, onReply: (reply: Reply) => void): void {
    if (this.failure !== undefined) {
      onReply({ ok: false, ...this.failure })
      return
    }
    this.pending.set(requestId, onReply)
    this.socket.write(frame)
  }

  /** Forgets a request (its caller timed out or was interrupted); a late reply is dropped. */
  cancel(requestId: number): void {
    this.pending.delete(requestId)
  }

  close(): void {
    this.fail("lost", "connection closed by client")
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
      const onReply = this.pending.get(next.header.requestId)
      // A reply for a request nobody waits for (timed out, cancelled) is dropped.
      if (onReply === undefined) continue
      this.pending.delete(next.header.requestId)
      onReply({ ok: true, frame: next })
    }
  }

  private fail(kind: FailureKind, detail: string): void {
    if (this.failure !== undefined) return
    clearTimeout(this.connectTimer)
    // A body cut short by the peer closing shows up here with bytes still buffered.
    const buffered = this.decoder.buffered
    this.failure = {
      kind,
      detail: kind === "lost" && buffered > 0 ? `${detail} mid-reply (${buffered} bytes of a partial frame)` : detail
    }
    this.socket.destroy()
    const waiting = [...this.pending.values()]
    this.pending.clear()
    for (const onReply of waiting) onReply({ ok: false, ...this.failure })
  }
}
