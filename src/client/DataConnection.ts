/**
 * One pipelined data-plane connection to a worker: GetRange requests written as they
 * come, replies matched by request id, reply payloads handed over as views into
 * pooled read buffers (`SlabPool`) — the bytes are never copied between the worker's
 * socket and whoever consumes them (the gateway writes them straight to its client).
 *
 * Plain callbacks, no fibers: this is the per-byte hot path. `WorkerPool` owns retries
 * and typed errors above it; the lifecycle (connect, pending requests, failure) is
 * `PipelinedConnection`'s.
 */
import * as net from "node:net"
import * as tls from "node:tls"
import { parseHostPort } from "../transport/address.js"
import { clientTlsOptions, type ControlTlsFiles } from "../transport/controlTls.js"
import { capFor, type FrameCaps, type FrameHeader, HEADER_LEN, readHeader } from "../protocol/index.js"
import { type Failure, PipelinedConnection } from "../transport/PipelinedConnection.js"
import { Payload, type Slab, type SlabPool } from "./SlabPool.js"

type DataOk = { readonly ok: true; readonly header: FrameHeader; readonly payload: Payload }

export type DataReply = DataOk | Failure

export interface DataConnectionOptions {
  readonly caps: FrameCaps
  readonly connectTimeoutMs: number
  readonly pool: SlabPool
  /** Dial TLS with these files (a worker started with --data-tls); read anew for this connection. */
  readonly tls?: ControlTlsFiles | undefined
}

/** A read gets at least this much room; a slab with less left is retired for a fresh one. */
const MIN_READ = 16 * 1024

export class DataConnection extends PipelinedConnection<DataOk> {
  private readonly pool: SlabPool
  private readonly caps: FrameCaps

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

  constructor(address: string, options: DataConnectionOptions) {
    super(address)
    this.pool = options.pool
    this.caps = options.caps
    // The read buffers come from the pool: `onread` bypasses the Readable machinery and its
    // per-read allocation (the buffer function is asked for room after every read).
    // (Node reads `onread` in the constructor too; its typings list it for connect() only.)
    const onread = { buffer: () => this.nextBuffer(), callback: (n: number, buf: Uint8Array) => this.onRead(n, buf) }
    if (options.tls !== undefined) {
      // TLS decrypts into the same pooled slabs (tls.connect takes `onread` too).
      const target = parseHostPort(address)
      let socket: tls.TLSSocket
      try {
        if (target === undefined) throw new Error("not a host:port address")
        socket = tls.connect({ ...clientTlsOptions(options.tls, target.host), host: target.host, port: target.port, onread } as tls.ConnectionOptions)
      } catch (e) {
        this.start(new net.Socket(), options.connectTimeoutMs, { dialed: "secureConnect" })
        this.fail("connect", (e as Error).message)
        return
      }
      this.start(socket, options.connectTimeoutMs, { dialed: "secureConnect" })
      return
    }
    const socket = new net.Socket({ onread } as net.SocketConstructorOpts)
    this.start(socket, options.connectTimeoutMs)
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
    // Nobody waits for it (cancelled, timed out): the buffers go back at once.
    if (!this.complete(header.requestId, { ok: true, header, payload })) payload.release()
  }

  protected partialBytes(): number {
    return this.header !== undefined ? HEADER_LEN + this.bodyFill : this.hdrFill
  }

  // The half-received frame's views are dropped, not recycled: nothing else can be reading them,
  // but dropping is always safe.
  protected override onFailed(): void {
    this.views = []
    this.slabs = []
    this.runSlab = undefined
    this.header = undefined
  }
}
