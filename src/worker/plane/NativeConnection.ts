/**
 * One connection on the native plane: its reader (recv on the fd when the shared epoll fd says
 * it is readable) and its writer (send + sendfile straight on the fd).
 */
import type * as net from "node:net"
import { type ConnectionReader, type ConnectionWriter, type FileSegment, type HitTable, type ReadSink, WRITTEN } from "./DataPlane.js"
import { CONN_FAST, EAGAIN, ERR, IN, type NativeRuntime, OUT, type Watched } from "./NativeRuntime.js"
import { ConnectionWriteError } from "./WriteError.js"

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
 * Reads a connection with recv(2) on its fd when the shared epoll fd reports it readable,
 * into the runtime's one read buffer, and hands the bytes to the serve loop at once. No
 * Buffer per read, no stream machinery, and every ready connection is served from one
 * callback of the loop.
 */
export class NativeReader implements ConnectionReader {
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
 * socket's fd (the socket server's `Connection.fd`). libuv owns the socket and keeps it
 * non-blocking, so every call returns at once; nothing else on the connection may go
 * through libuv's write queue, or bytes could interleave (the writer is the only path).
 */
export class NativeWriter implements ConnectionWriter, Watched {
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

