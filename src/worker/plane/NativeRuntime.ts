/**
 * The process-wide half of the native plane: the addon's shared epoll fd, the one read buffer,
 * the connections and listeners registered on it, and the batch acceptor.
 */
import * as net from "node:net"
import type { NativeAddon } from "./NativeAddon.js"

export const EAGAIN = 11
/** Interest and event bits of the addon's shared epoll fd (see native/sendfile.c). */
export const IN = 1
export const OUT = 2
export const ERR = 4
/** One read per readable connection per wakeup; a pipelined client's burst fits many times over. */
const READ_BUFFER = 256 * 1024

/**
 * The process-wide half of the native plane: the addon, one read buffer shared by every
 * connection it reads (reads are handled one at a time, each to completion), and the
 * connections registered on the shared epoll fd keyed by socket fd. Registrations are
 * level-triggered; the addon copies (fd, events) pairs into `ready` before calling back
 * (one epoll_wait per callback), so a registration changed while the list is walked can
 * neither overwrite nor lose an entry: anything still ready fires again next turn.
 */
/**
 * What the shared epoll fd reports to: a connection's writer, or a listening socket's acceptor.
 * A writer also takes over a connection the hit table stopped on (native/hits.c).
 */
export interface Watched {
  onEvents(events: number): void
  takeOver?(handoff: Int32Array): void
}

export class NativeRuntime {
  readonly conns = new Map<number, Watched>()
  readonly readBuffer = Buffer.allocUnsafeSlow(READ_BUFFER)
  private readonly ready = new Int32Array(2048)
  /** connFast[fd]: the hit table that may answer the connection's reads (0 = none); shared with the addon. */
  readonly connFast = new Uint8Array(new ArrayBuffer(CONN_FAST))
  /** What the addon's last fast read left to JS (native/hits.c: fd, recv result, first unread byte, tail). */
  private readonly handoff = new Int32Array(new ArrayBuffer(64))

  constructor(readonly addon: NativeAddon) {
    const r = addon.init(this.ready, (count) => this.onReady(count))
    if (r < 0) throw new Error(`epoll setup failed (${addon.errnoName(r)})`)
    addon.hitsInit(this.connFast, this.handoff, this.readBuffer)
  }

  /** Clears `fd`'s hit-table mark (before JS acts on the connection, and when its fd closes). */
  unmark(fd: number): void {
    if (fd < CONN_FAST) this.connFast[fd] = 0
  }

  private onReady(count: number): void {
    const ho = this.handoff
    if (ho[0]! >= 0) {
      // First: the handed-off bytes are in the shared read buffer, which the list below may overwrite.
      const fd = ho[0]!
      ho[0] = -1
      const writer = this.conns.get(fd)
      if (writer?.takeOver !== undefined) writer.takeOver(ho)
      else if (ho[3] === 1) this.addon.closeFd(ho[4]!)
    }
    // Read in place: the addon writes `ready` only right before this callback, never during it.
    const events = this.ready
    for (let i = 0; i < 2 * count; i += 2) {
      const fd = events[i]!
      const writer = this.conns.get(fd)
      // Not ours (any more): drop the registration, or a level-triggered fd would wake us forever.
      if (writer === undefined) this.addon.watch(fd, 0)
      else writer.onEvents(events[i + 1]!)
    }
  }
}

/** Socket fds the hit table can be told about (larger ones are always served by JS). */
export const CONN_FAST = 65536

/** Connections accepted per call; level-triggered, so a longer backlog fires again next turn. */
const ACCEPT_BATCH = 256

/**
 * Accepts a listening socket's pending connections in batches (see `accept` in
 * native/sendfile.c: libuv accepts one per loop turn, which under load delays a burst of
 * new connections by seconds). Each fd becomes a paused net.Socket, exactly what a server
 * with `pauseOnConnect` hands its connection listener. libuv keeps watching the fd as
 * well; whichever accepts first wins.
 */
export class NativeAcceptor implements Watched {
  private readonly fds = new Int32Array(ACCEPT_BATCH)
  private stopped = false

  constructor(
    private readonly rt: NativeRuntime,
    private readonly fd: number,
    private readonly onSocket: (socket: net.Socket) => void,
    private readonly onFailed?: (negErrno: number) => void
  ) {}

  start(): boolean {
    if (this.rt.addon.watch(this.fd, IN) < 0) return false
    this.rt.conns.set(this.fd, this)
    return true
  }

  stop(): void {
    if (this.stopped) return
    this.stopped = true
    if (this.rt.conns.get(this.fd) === this) {
      this.rt.conns.delete(this.fd)
      this.rt.addon.watch(this.fd, 0)
    }
  }

  onEvents(_events: number): void {
    if (this.stopped) return
    const n = this.rt.addon.accept(this.fd, this.fds)
    // EMFILE and friends: leave the listener to libuv, which has its own recovery for them (or, for a
    // listener libuv does not watch, to whoever adopted it).
    if (n < 0 && n !== -EAGAIN) {
      this.stop()
      return this.onFailed?.(n)
    }
    for (let i = 0; i < n; i++) {
      const fd = this.fds[i]!
      let socket: net.Socket
      try {
        socket = new net.Socket({ fd, readable: true, writable: true, allowHalfOpen: true, pauseOnCreate: true } as net.SocketConstructorOpts)
      } catch {
        continue
      }
      this.onSocket(socket)
    }
  }
}

