/**
 * The connection lifecycle both pipelined clients share (the control channel's
 * `FramedConnection` and the data plane's `DataConnection`): connect with a timeout,
 * requests in flight keyed by request id, and one way to fail. A connection that fails in
 * any way (connect error or timeout, peer close, a reply the parser rejects, a body cut
 * short) is destroyed and fails every pending request; callers open a fresh one, which is
 * how "short body → reconnect" happens. Subclasses own the reading: they set the socket up,
 * parse replies and hand each one to `complete`.
 */
import type * as net from "node:net"
import { parseHostPort } from "./address.js"

export type FailureKind = "connect" | "lost" | "protocol"

export interface Failure {
  readonly ok: false
  readonly kind: FailureKind
  readonly detail: string
}

export abstract class PipelinedConnection<Ok> {
  protected socket!: net.Socket
  private readonly pending = new Map<number, (reply: Ok | Failure) => void>()
  private connected = false
  private failure: { kind: FailureKind; detail: string } | undefined
  private connectTimer: ReturnType<typeof setTimeout> | undefined

  constructor(readonly address: string) {}

  /** Connects `socket` (its reading already set up by the subclass) to the address. */
  protected start(socket: net.Socket, connectTimeoutMs: number, dialed?: { readonly dialed: "secureConnect" }): void {
    this.socket = socket
    socket.setNoDelay(true)
    const parsed = parseHostPort(this.address)
    if (parsed === undefined) {
      this.failure = { kind: "connect", detail: "not a host:port address" }
      socket.destroy()
      return
    }
    this.connectTimer = setTimeout(() => this.fail("connect", `connect timed out after ${connectTimeoutMs} ms`), connectTimeoutMs)
    // A TLS socket is already dialing; it is connected once its handshake (and the peer's checks) passed.
    socket.once(dialed?.dialed ?? "connect", () => {
      this.connected = true
      clearTimeout(this.connectTimer)
    })
    socket.on("error", (err) => this.fail(this.connected ? "lost" : "connect", err.message))
    socket.on("close", () =>
      this.fail(this.connected ? "lost" : "connect", this.connected ? "connection closed by peer" : "connection refused")
    )
    if (dialed === undefined) socket.connect(parsed.port, parsed.host)
  }

  /** False once the connection has failed or been closed; open a new one then. */
  get usable(): boolean {
    return this.failure === undefined
  }

  get inFlight(): number {
    return this.pending.size
  }

  /**
   * Writes one complete request frame; `onReply` is called exactly once, with the reply
   * carrying `requestId` or with the failure that ended the connection.
   */
  send(requestId: number, frame: Uint8Array, onReply: (reply: Ok | Failure) => void): void {
    if (this.failure !== undefined) {
      onReply({ ok: false, ...this.failure })
      return
    }
    this.pending.set(requestId, onReply)
    this.socket.write(frame)
  }

  /** Forgets a request (its caller timed out or was interrupted); a late reply is dropped. */
  cancel(requestId: number): boolean {
    return this.pending.delete(requestId)
  }

  close(): void {
    this.fail("lost", "connection closed by client")
  }

  /** Hands `reply` to whoever waits for `requestId`; false when nobody does (cancelled, timed out). */
  protected complete(requestId: number, reply: Ok): boolean {
    const onReply = this.pending.get(requestId)
    if (onReply === undefined) return false
    this.pending.delete(requestId)
    onReply(reply)
    return true
  }

  /** Bytes of a reply received only in part, for the failure's detail. */
  protected abstract partialBytes(): number

  /** Drops the parser's state once the connection has failed. */
  protected onFailed(): void {}

  protected fail(kind: FailureKind, detail: string): void {
    if (this.failure !== undefined) return
    clearTimeout(this.connectTimer)
    // A body cut short by the peer closing shows up here with bytes of it received.
    const partial = this.partialBytes()
    this.failure = { kind, detail: kind === "lost" && partial > 0 ? `${detail} mid-reply (${partial} bytes of a partial frame)` : detail }
    this.socket.destroy()
    this.onFailed()
    const waiting = [...this.pending.values()]
    this.pending.clear()
    for (const onReply of waiting) onReply({ ok: false, ...this.failure })
  }
}
