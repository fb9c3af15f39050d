import * as net from "node:net"
import {
  type ConnectionReader,
  type ConnectionWriter,
  type DataPlaneShape,
  type FileSegment,
  type HitTable,
  type ReadSink,
  WRITTEN
} from "./DataPlane.js"
import { loadNativeAddon, type NativeAddon, type NativeCounters } from "./NativeAddon.js"
import { makePortablePlane } from "./Portable.js"
import { ConnectionWriteError } from "./WriteError.js"

const EAGAIN = 11
/** Interest and event bits of the addon's shared epoll fd (see native/sendfile.c). */
const IN = 1
const OUT = 2
const ERR = 4
/** One read per readable connection per wakeup; a pipelined client's burst fits many times over. */
const READ_BUFFER = 256 * 1024
const DONE = 1
const BLOCKED = 0

const RESOLVED: Promise<void> = WRITTEN

/** One response (or frame) in flight: how far the header and the segments have got. */
interface Job {
  header: Uint8Array | null
  hdrOff: number
  segments: ReadonlyArray<FileSegment> | null
  segIndex: number
  segDone: number
  resolve: () => void
  reject: (error: ConnectionWriteError) => void
}

const noop = () => {}
const newJob = (): Job => ({ header: null, hdrOff: 0, segments: null, segIndex: 0, segDone: 0, resolve: noop, reject: noop })

/**
 * The process-wide half of the native plane: the addon, one read buffer shared by every
 * connection it reads (reads are handled one at a time, each to completion), and the
 * connections registered on the shared epoll fd keyed by socket fd. Registrations are
 * level-triggered; the addon copies (fd, events) pairs into `ready` before calling back
 * (one epoll_wait per callback), so a registration changed while the list is walked can
 * neither overwrite nor lose an entry: anything still ready fires again next turn.
 */
/** What the shared epoll fd reports to: a connection's writer, or a listening socket's acceptor. */
interface Watched {
  onEvents(events: number): void
}

class NativeRuntime {
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
      if (writer instanceof NativeWriter) writer.takeOver(ho)
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
const CONN_FAST = 65536

/** Connections accepted per call; level-triggered, so a longer backlog fires again next turn. */
const ACCEPT_BATCH = 256

/**
 * Accepts a listening socket's pending connections in batches (see `accept` in
 * native/sendfile.c: libuv accepts one per loop turn, which under load delays a burst of
 * new connections by seconds). Each fd becomes a paused net.Socket, exactly what a server
 * with `pauseOnConnect` hands its connection listener. libuv keeps watching the fd as
 * well; whichever accepts first wins.
 */
class NativeAcceptor implements Watched {
  private readonly fds = new Int32Array(ACCEPT_BATCH)
  private stopped = false

  constructor(
    private readonly rt: NativeRuntime,
    private readonly fd: number,
    private readonly onSocket: (socket: net.Socket) => void
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
    // EMFILE and friends: leave the listener to libuv, which has its own recovery for them.
    if (n < 0 && n !== -EAGAIN) return this.stop()
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

/**
 * Reads a connection with recv(2) on its fd when the shared epoll fd reports it readable,
 * into the runtime's one read buffer, and hands the bytes to the serve loop at once. No
 * Buffer per read, no stream machinery, and every ready connection is served from one
 * callback of the loop.
 */
class NativeReader implements ConnectionReader {
  private reading = true
  private finished = false
  private count = 0

  constructor(
    private readonly rt: NativeRuntime,
    private readonly writer: NativeWriter,
    private readonly sink: ReadSink
  ) {}

  pause(): void {
    this.rt.unmark(this.writer.fd)
    if (!this.reading) return
    this.reading = false
    this.writer.setInterest(this.writer.interest & ~IN)
  }

  offload(table: HitTable): void {
    const fd = this.writer.fd
    if (fd < CONN_FAST && this.reading && !this.finished && this.writer.idle()) this.rt.connFast[fd] = table.id
  }

  resume(): void {
    if (this.reading || this.finished) return
    this.reading = true
    this.writer.setInterest(this.writer.interest | IN)
  }

  reads(): number {
    return this.count
  }

  /**
   * `broken`: the fd reported an error or hang-up. It is read even when paused (a paused,
   * level-triggered fd in error would otherwise wake the loop forever), and must not stay
   * registered: the read reports why it broke, or the connection is dropped.
   */
  onReadable(broken: boolean): void {
    if (this.finished || (!this.reading && !broken) || this.writer.socketDestroyed()) return
    this.rt.unmark(this.writer.fd)
    const buf = this.rt.readBuffer
    this.delivered(this.rt.addon.recv(this.writer.fd, buf, 0, buf.length), 0, broken)
  }

  /** Lets the serve loop look at the connection again without new bytes (it may be idle now). */
  nudge(): void {
    if (this.finished || this.writer.socketDestroyed()) return
    this.sink.bytes(this.rt.readBuffer, 0, 0)
  }

  /** A read the hit table made and could not finish: `n` as recv returned it, bytes from `from` still to serve. */
  handedOff(n: number, from: number): void {
    if (this.finished || this.writer.socketDestroyed()) return
    // Woken with nothing to read (the table read it all on an earlier round): the connection is
    // still idle, so the loop may hand it straight back.
    if (n === -EAGAIN) return this.nudge()
    this.delivered(n, from, false)
  }

  private delivered(n: number, from: number, broken: boolean): void {
    const buf = this.rt.readBuffer
    if (n > 0) {
      this.count++
      if (from < n) this.sink.bytes(buf, from, n)
      return
    }
    if (n === -EAGAIN && !broken) return
    this.finished = true
    this.reading = false
    if (!this.writer.socketDestroyed()) this.writer.setInterest(this.writer.interest & ~IN)
    if (n === 0) this.sink.end()
    else this.sink.error()
  }
}

/**
 * Writes a connection's responses with `send(MSG_MORE)` + `sendfile(2)` straight on the
 * socket's fd. The fd comes from `socket._handle.fd`: libuv owns the socket and keeps it
 * non-blocking, so every call returns at once; nothing else on the connection may go
 * through libuv's write queue, or bytes could interleave (the writer is the only path).
 */
class NativeWriter implements ConnectionWriter, Watched {
  private readonly queue: Array<Job> = []
  private head = 0
  private parked = false
  /** The fd's current registration on the shared epoll fd (IN | OUT, 0 = none). */
  interest = 0
  reader: NativeReader | undefined = undefined
  private failed: ConnectionWriteError | undefined
  private scratch: Job = newJob()
  /** The promise of the newest queued job (what `end` waits for). */
  private last: Promise<void> = RESOLVED

  constructor(
    private readonly rt: NativeRuntime,
    private readonly socket: net.Socket,
    readonly fd: number
  ) {
    // The number is this connection's now: a mark left by the connection that had it before must go.
    rt.unmark(fd)
    socket.setNoDelay(true)
    socket.on("error", noop) // surfaced as rejections
    socket.once("close", () => {
      // The fd closed with the socket (its registration with it); the number may already be another connection's.
      if (this.rt.conns.get(this.fd) === this) {
        this.rt.conns.delete(this.fd)
        this.rt.unmark(this.fd)
      }
      this.interest = 0
      if (this.head < this.queue.length) this.fail(undefined, "the connection closed mid-response")
    })
  }

  socketDestroyed(): boolean {
    return this.socket.destroyed
  }

  /** Nothing queued: every response so far is fully with the kernel. */
  idle(): boolean {
    return this.head === this.queue.length && this.failed === undefined
  }

  /**
   * The hit table stopped on this connection (see native/hits.c): first the rest of a reply it
   * sent only partly (from its own dup of the file, closed once sent), then the unserved bytes.
   */
  takeOver(ho: Int32Array): void {
    if (ho[3] === 1) {
      // Layout: native/plane.h (state_t.handoff). The header is copied: `ho` is rewritten by the next handoff.
      const dup = ho[4]!
      const header = new Uint8Array(ho.buffer, ho.byteOffset + 48 + ho[5]!, 16 - ho[5]!).slice()
      const offset = (ho[6]! >>> 0) + (ho[7]! >>> 0) * 4294967296
      const remaining = ho[8]! >>> 0
      const close = () => void this.rt.addon.closeFd(dup)
      // The serve loop never saw this reply: once it is out, tell the loop (an empty read) so it
      // can hand the idle connection back to the table.
      const sent = () => {
        close()
        this.reader?.nudge()
      }
      this.submit(header, remaining > 0 ? [{ fd: dup, offset, length: remaining }] : null).then(sent, close)
    }
    this.reader?.handedOff(ho[1]!, ho[2]!)
  }

  /** Changes the fd's registration (one epoll_ctl, only when it changes). */
  setInterest(mask: number): void {
    if (mask === this.interest) return
    // A destroyed socket's fd may already belong to another connection: never touch it.
    if (this.socket.destroyed) {
      this.interest = 0
      return
    }
    const r = this.rt.addon.watch(this.fd, mask)
    if (r < 0) {
      this.fail(r)
      return
    }
    this.interest = mask
    if (mask === 0) {
      if (this.rt.conns.get(this.fd) === this) this.rt.conns.delete(this.fd)
    } else this.rt.conns.set(this.fd, this)
  }

  /** Events of the fd from the shared epoll fd (IN | OUT | ERR). */
  onEvents(events: number): void {
    if (this.socket.destroyed) return
    const broken = (events & ERR) !== 0
    if (this.parked && (events & (OUT | ERR)) !== 0) this.pump()
    if (this.reader !== undefined && ((events & IN) !== 0 || broken)) this.reader.onReadable(broken)
    else if (broken && !this.socket.destroyed && (this.interest & OUT) === 0 && this.interest !== 0) this.socket.destroy()
  }

  writeFrame(frame: Uint8Array): Promise<void> {
    return this.submit(frame, null)
  }

  writeFile(header: Uint8Array, segments: ReadonlyArray<FileSegment>): Promise<void> {
    return this.submit(header, segments)
  }

  end(): Promise<void> {
    if (this.failed !== undefined) return Promise.reject(this.failed)
    const after = this.head === this.queue.length ? RESOLVED : this.last
    return after.then(() => {
      // libuv's write queue is empty (nothing ever goes through it), so its shutdown is immediate.
      if (!this.socket.destroyed) this.socket.end()
    })
  }

  private submit(header: Uint8Array, segments: ReadonlyArray<FileSegment> | null): Promise<void> {
    if (this.failed !== undefined) return Promise.reject(this.failed)
    if (this.socket.destroyed) return Promise.reject(this.fail(undefined, "the connection is closed"))
    const job = this.scratch
    job.header = header
    job.hdrOff = 0
    job.segments = segments
    job.segIndex = 0
    job.segDone = 0
    if (this.head === this.queue.length) {
      // Fast path: nothing queued; most responses complete here and allocate nothing (a shared resolved promise).
      const r = this.advance(job)
      if (r === DONE) {
        job.header = null
        job.segments = null
        return RESOLVED
      }
      if (r !== BLOCKED && r !== -EAGAIN) return Promise.reject(this.fail(r))
    }
    // Bytes are now queued behind JS: the hit table must not answer this connection until the
    // queue drains and the serve loop marks it idle again, or its replies would cut into this one.
    this.rt.unmark(this.fd)
    // Kept past this call: the caller's header buffer is reused for the next reply.
    if (segments !== null && job.header !== null) job.header = Uint8Array.prototype.slice.call(job.header)
    this.scratch = newJob()
    const promise = new Promise<void>((resolve, reject) => {
      job.resolve = resolve
      job.reject = reject
    })
    this.queue.push(job)
    this.last = promise
    if (!this.parked) this.park()
    return promise
  }

  /** Sends as much of `job` as the socket takes: DONE, BLOCKED, or -errno. */
  private advance(job: Job): number {
    const addon = this.rt.addon
    const segments = job.segments
    for (;;) {
      const header = job.header
      const hdrLen = header === null ? 0 : header.length - job.hdrOff
      let seg: FileSegment | undefined
      if (segments !== null) {
        while (job.segIndex < segments.length && segments[job.segIndex]!.length - job.segDone <= 0) {
          job.segIndex++
          job.segDone = 0
        }
        seg = segments[job.segIndex]
      }
      if (seg === undefined && hdrLen === 0) return DONE
      const fileLen = seg === undefined ? 0 : seg.length - job.segDone
      // A destroyed socket's fd may already belong to another connection: never touch it.
      if (this.socket.destroyed) return -32 // EPIPE
      const n =
        seg === undefined
          ? addon.sendHeaderFile(this.fd, header, job.hdrOff, hdrLen, -1, 0, 0)
          : addon.sendHeaderFile(this.fd, header, job.hdrOff, hdrLen, seg.fd, seg.offset + job.segDone, fileLen)
      if (n < 0) return n
      let fileSent = n
      if (hdrLen > 0) {
        const h = n < hdrLen ? n : hdrLen
        job.hdrOff += h
        fileSent -= h
        if (job.hdrOff === header!.length) job.header = null
      }
      job.segDone += fileSent
      if (n < hdrLen + fileLen) return BLOCKED
    }
  }

  /** Called when the socket is writable again (or errored: the retry then reports why). */
  pump(): void {
    this.parked = false
    this.drain()
    if (!this.parked && (this.interest & OUT) !== 0) this.setInterest(this.interest & ~OUT)
  }

  private drain(): void {
    while (this.head < this.queue.length) {
      const job = this.queue[this.head]!
      const r = this.advance(job)
      if (r === DONE) {
        this.queue[this.head++] = undefined as unknown as Job
        if (this.head === this.queue.length) {
          this.queue.length = 0
          this.head = 0
        }
        job.resolve()
        continue
      }
      if (r === BLOCKED || r === -EAGAIN) {
        this.park()
        return
      }
      this.fail(r)
      return
    }
  }

  private park(): void {
    if (this.socket.destroyed) {
      this.fail(undefined, "the connection closed mid-response")
      return
    }
    this.parked = true
    this.setInterest(this.interest | OUT)
  }

  private fail(negErrno: number | undefined, detail?: string): ConnectionWriteError {
    if (this.failed === undefined) {
      const code = negErrno === undefined ? undefined : this.rt.addon.errnoName(negErrno)
      this.failed = new ConnectionWriteError({
        plane: "native",
        code,
        detail:
          detail ??
          (code === "EPIPE" || code === "ECONNRESET" ? "the peer closed the connection" : `send/sendfile on fd ${this.fd} failed`)
      })
    }
    const error = this.failed
    if (this.rt.conns.get(this.fd) === this) {
      this.rt.conns.delete(this.fd)
      this.rt.unmark(this.fd)
    }
    this.interest = 0
    this.parked = false
    const pending = this.queue.slice(this.head)
    this.queue.length = 0
    this.head = 0
    this.socket.destroy()
    for (const job of pending) job.reject(error)
    return error
  }
}

export interface NativeOptions {
  /** Where to load the addon from (default: build/Release/talon_sendfile.node of this checkout). */
  readonly addonPath?: string
}

let runtime: { readonly addon: NativeAddon; readonly rt: NativeRuntime } | undefined

const runtimeFor = (addon: NativeAddon): NativeRuntime => {
  if (runtime === undefined || runtime.addon !== addon) runtime = { addon, rt: new NativeRuntime(addon) }
  return runtime.rt
}

/** The socket's fd (libuv's TCP handle exposes it on Unix), or a reason it has none. */
const socketFd = (socket: net.Socket): number => {
  const handle = (socket as unknown as { _handle?: { fd?: number } | null })._handle
  const fd = handle?.fd
  if (typeof fd !== "number" || fd < 0) {
    throw new Error("native data plane: the socket has no fd (not a connected TCP socket, or already closed)")
  }
  return fd
}

/**
 * The native plane when the addon loads (and epoll can be set up), else the portable plane
 * with a `reason` that says why native is not running.
 */
export const makeNativePlane = (options: NativeOptions = {}): DataPlaneShape => {
  const load = loadNativeAddon(options.addonPath)
  if (load._tag === "Unavailable") return makePortablePlane({ reason: `fell back to portable: ${load.reason}` })
  let rt: NativeRuntime
  try {
    rt = runtimeFor(load.addon)
  } catch (error) {
    return makePortablePlane({ reason: `fell back to portable: native addon loaded but ${(error as Error).message}` })
  }
  return {
    name: "native",
    reason: `native sendfile addon loaded from ${load.path}`,
    attach: (socket) => new NativeWriter(rt, socket, socketFd(socket)),
    read: (_socket, writer, sink) => {
      if (!(writer instanceof NativeWriter)) throw new Error("native data plane: read() needs the writer attach() returned")
      const reader = new NativeReader(rt, writer, sink)
      writer.reader = reader
      writer.setInterest(writer.interest | IN)
      return reader
    },
    hitTable: () => makeHitTable(rt),
    adoptListener: (server, onSocket) => {
      const fd = (server as unknown as { _handle?: { fd?: number } | null })._handle?.fd
      // A cluster worker's server has no fd of its own (the primary accepts): nothing to adopt.
      if (typeof fd !== "number" || fd < 0) return undefined
      const acceptor = new NativeAcceptor(rt, fd, onSocket)
      return acceptor.start() ? () => acceptor.stop() : undefined
    }
  }
}

const makeHitTable = (rt: NativeRuntime): HitTable | undefined => {
  const addon = rt.addon
  const counts = new Float64Array(new ArrayBuffer(16))
  const id = addon.hitsCreate(counts)
  if (id < 0) return undefined
  let open = true
  return {
    id,
    counts,
    publishObject: (bytes, size, blockSize, pageSize, freshMs, version) =>
      open ? addon.hitsObject(id, bytes, size, blockSize, pageSize, freshMs, version) : -1,
    publishUnit: (oid, start, bytes, fd, tag) => (open ? addon.hitsUnit(id, oid, start, bytes, fd, tag) : -1),
    dropObject: (oid) => void (open && addon.hitsDropObject(id, oid)),
    dropUnit: (oid, start) => void (open && addon.hitsDropUnit(id, oid, start)),
    clear: () => void (open && addon.hitsClear(id)),
    sweep: (out) => (open ? addon.hitsSweep(id, out) : 0),
    close: () => {
      if (!open) return
      open = false
      // Connections still marked for this table are no longer served by it (the addon ignores a freed id).
      addon.hitsDestroy(id)
    }
  }
}

/** This process's native-plane counters, or undefined when the addon does not load. */
export const nativeCounters = (options: NativeOptions = {}): NativeCounters | undefined => {
  const load = loadNativeAddon(options.addonPath)
  return load._tag === "Loaded" ? load.addon.counters() : undefined
}

/** Sets SO_SNDBUF on a socket through the addon (tests use a small one to force EAGAIN). */
export const setSendBuffer = (socket: net.Socket, bytes: number, options: NativeOptions = {}): number => {
  const load = loadNativeAddon(options.addonPath)
  if (load._tag === "Unavailable") throw new Error(load.reason)
  const r = load.addon.setSendBuffer(socketFd(socket), bytes)
  if (r < 0) throw new Error(`setsockopt(SO_SNDBUF) failed: ${load.addon.errnoName(r)}`)
  return load.addon.getSendBuffer(socketFd(socket))
}
