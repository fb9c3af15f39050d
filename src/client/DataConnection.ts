/**
 * One pipelined data-plane connection to a worker: GetRange requests written as they
 * come, replies matched by request id, reply payloads handed over as views into
 * pooled read buffers (`SlabPool`) — the bytes are never copied between the worker's
 * socket and whoever consumes them (the gateway writes them straight to its client).
 *
 * Plain callbacks, no fibers: this is the per-byte hot path. `WorkerPool` owns retries
 * and typed errors above it. A connection that fails in any way (connect error, peer
 * close, a reply the parser rejects, a body cut short) is destroyed and fails every
 * pending request; callers open a fresh one.
 */
import * as net from "node:net"
import { capFor, type FrameCaps, type FrameHeader, HEADER_LEN, readHeader } from "../protocol/index.js"
import { parseHostPort } from "./address.js"
import type { FailureKind } from "./FramedConnection.js"
import { Payload, type Slab, type SlabPool } from "./SlabPool.js"

export type DataReply =
  | { readonly ok: true; readonly header: FrameHeader; readonly payload: Payload }
  | { readonly ok: false; readonly kind: FailureKind; readonly detail: string }

export interface DataConnectionOptions {
  readonly caps: FrameCaps
  readonly connectTimeoutMs: number
  readonly pool: SlabPool
}

/** A read gets at least this much room; a slab with less left is retired for a fresh one. */
const MIN_READ = 16 * 1024

export class DataConnection {
  private readonly socket: net.Socket
  private readonly pending = new Map<number, (reply: DataReply) => void>()
  private readonly pool: SlabPool
  private readonly caps: FrameCaps
  private connected = false
  private failure: { kind: FailureKind; detail: string } | undefined
  private connectTimer: ReturnType<typeof setTimeout> | undefined

  // The slab the socket reads into and where in it the pending read lands.
  private readSlab: Slab | undefined
  private readAt = 0

  // Parser state: a header being assembled, or the body of `header` being collected.
  private readonly hdr = Buffer.alloc(HEADER_LEN)
  private hdrFill = 0
  private header: FrameHeader | undefined
  private views: Array<Buffer> = []
  private slabs: Array<Slab> = []
  private bodyFill = 0
  // The body bytes received last, not yet cut into a view: successive reads land next to each
  // other in the same slab, so one view covers them all (a 1 MiB reply is a few views, one
  // per slab, rather than one per socket read).
  private runSlab: Slab | undefined
  private runStart = 0
  private runEnd = 0

  constructor(
    readonly address: string,
    options: DataConnectionOptions
  ) {
    this.pool = options.pool
    this.caps = options.caps
    // The read buffers come from the pool: `onread` bypasses the Readable machinery and its
    // per-read allocation (the buffer function is asked for room after every read).
    // (Node reads `onread` in the constructor too; its typings list it for connect() only.)
    this.socket = new net.Socket({
      onread: { buffer: () => this.nextBuffer(), callback: (n: number, buf: Uint8Array) => this.onRead(n, buf) }
    } as net.SocketConstructorOpts)
    const parsed = parseHostPort(address)
    if (parsed === undefined) {
      this.failure = { kind: "connect", detail: "not a host:port address" }
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
    this.socket.on("error", (err) => this.fail(this.connected ? "lost" : "connect", err.message))
    this.socket.on("close", () =>
      this.fail(this.connected ? "lost" : "connect", this.connected ? "connection closed by peer" : "connection refused")
    )
    this.socket.setNoDelay(true)
    this.socket.connect(parsed.port, parsed.host)
  }

  get usable(): boolean {
    return this.failure === undefined
  }

  get inFlight(): number {
    return this.pending.size
  }

  /** Writes one complete request frame; `onReply` is called exactly once. */
  send(requestId: number, frame: Uint8Array, onReply: (reply: DataReply) => void): void {
    if (this.failure !== undefined) {
      onReply({ ok: false, ...this.failure })
      return
    }
    this.pending.set(requestId, onReply)
    this.socket.write(frame)
  }

  /** Forgets a request; its reply, when it comes, is dropped (and its buffers recycled). */
  cancel(requestId: number): boolean {
    return this.pending.delete(requestId)
  }

  close(): void {
    this.fail("lost", "connection closed by client")
  }

  /** Room for the next read: the rest of the current slab, or a fresh one. */
  private nextBuffer(): Buffer {
    let slab = this.readSlab
    if (slab !== undefined && slab.buf.length - this.readAt < MIN_READ) {
      this.readSlab = undefined
      this.pool.release(slab)
      slab = undefined
    }
    if (slab === undefined) {
      slab = this.pool.take()
      this.readSlab = slab
      this.readAt = 0
    }
    return slab.buf.subarray(this.readAt)
  }

  private onRead(n: number, buf: Uint8Array): void {
    const slab = this.readSlab!
    const base = this.readAt
    this.readAt += n
    const bytes = buf as Buffer
    let p = 0
    while (p < n) {
      if (this.header === undefined) {
        let h: ReturnType<typeof readHeader>
        if (this.hdrFill === 0 && n - p >= HEADER_LEN) {
          h = readHeader(bytes, p)
          p += HEADER_LEN
        } else {
          const take = Math.min(HEADER_LEN - this.hdrFill, n - p)
          bytes.copy(this.hdr, this.hdrFill, p, p + take)
          this.hdrFill += take
          p += take
          if (this.hdrFill < HEADER_LEN) return
          this.hdrFill = 0
          h = readHeader(this.hdr, 0)
        }
        if ("_tag" in h) return this.fail("protocol", `undecodable reply: ${h.message}`)
        const cap = capFor(this.caps, h.type)
        if (h.length > cap) return this.fail("protocol", `undecodable reply: ${h.length}-byte payload over the ${cap}-byte cap`)
        this.header = h
        this.bodyFill = 0
        if (h.length === 0) {
          this.deliver()
          continue
        }
      }
      const want = this.header.length - this.bodyFill
      const take = Math.min(want, n - p)
      // Views of the slab itself (`bytes` is the slab from `base`): no copy. A run holds its
      // slab from the moment it starts, so the slab cannot be recycled under it.
      const at = base + p
      if (this.runSlab === slab && this.runEnd === at) this.runEnd += take
      else {
        this.endRun()
        this.runSlab = slab
        this.runStart = at
        this.runEnd = at + take
        this.slabs.push(slab)
        this.pool.retain(slab)
      }
      this.bodyFill += take
      p += take
      if (this.bodyFill === this.header.length) this.deliver()
    }
  }

  /** Cuts the current run into a view. */
  private endRun(): void {
    const slab = this.runSlab
    if (slab === undefined) return
    this.runSlab = undefined
    this.views.push(slab.buf.subarray(this.runStart, this.runEnd))
  }

  private deliver(): void {
    this.endRun()
    const header = this.header!
    const payload = header.length === 0 ? Payload.empty : new Payload(this.views, this.slabs, header.length)
    this.header = undefined
    this.bodyFill = 0
    if (header.length > 0) {
      this.views = []
      this.slabs = []
    }
    const onReply = this.pending.get(header.requestId)
    if (onReply === undefined) {
      // Nobody waits for it (cancelled, timed out): the buffers go back at once.
      payload.release()
      return
    }
    this.pending.delete(header.requestId)
    onReply({ ok: true, header, payload })
  }

  private fail(kind: FailureKind, detail: string): void {
    if (this.failure !== undefined) return
    clearTimeout(this.connectTimer)
    const partial = this.header !== undefined ? HEADER_LEN + this.bodyFill : this.hdrFill
    this.failure = { kind, detail: kind === "lost" && partial > 0 ? `${detail} mid-reply (${partial} bytes of a partial frame)` : detail }
    this.socket.destroy()
    // The half-received frame's views are dropped, not recycled: nothing else can be reading them,
    // but dropping is always safe.
    this.views = []
    this.slabs = []
    this.runSlab = undefined
    this.header = undefined
    const waiting = [...this.pending.values()]
    this.pending.clear()
    for (const onReply of waiting) onReply({ ok: false, ...this.failure })
  }
}
