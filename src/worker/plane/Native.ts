import type * as net from "node:net"
import { type ConnectionWriter, type DataPlaneShape, type FileSegment, WRITTEN } from "./DataPlane.js"
import { loadNativeAddon, type NativeAddon, type NativeCounters } from "./NativeAddon.js"
import { makePortablePlane } from "./Portable.js"
import { ConnectionWriteError } from "./WriteError.js"

const EAGAIN = 11
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
 * The process-wide half of the native plane: the addon, and the writers parked on the
 * shared epoll fd keyed by socket fd. The addon copies ready fds into `ready` before
 * calling back; they are copied again into a local array before any writer runs, because
 * a writer that blocks again re-arms while we are still walking the list.
 */
class NativeRuntime {
  readonly parked = new Map<number, NativeWriter>()
  private readonly ready = new Int32Array(1024)

  constructor(readonly addon: NativeAddon) {
    const r = addon.init(this.ready, (count) => this.onReady(count))
    if (r < 0) throw new Error(`epoll setup failed (${addon.errnoName(r)})`)
  }

  private onReady(count: number): void {
    const fds = Array.from(this.ready.subarray(0, count))
    for (const fd of fds) {
      const writer = this.parked.get(fd)
      if (writer === undefined) continue // stale: its socket closed and nothing reused the fd yet
      this.parked.delete(fd)
      writer.pump()
    }
  }
}

/**
 * Writes a connection's responses with `send(MSG_MORE)` + `sendfile(2)` straight on the
 * socket's fd. The fd comes from `socket._handle.fd`: libuv owns the socket and keeps it
 * non-blocking, so every call returns at once; nothing else on the connection may go
 * through libuv's write queue, or bytes could interleave (the writer is the only path).
 */
class NativeWriter implements ConnectionWriter {
  private readonly queue: Array<Job> = []
  private head = 0
  private parked = false
  private failed: ConnectionWriteError | undefined
  private scratch: Job = newJob()
  /** The promise of the newest queued job (what `end` waits for). */
  private last: Promise<void> = RESOLVED

  constructor(
    private readonly rt: NativeRuntime,
    private readonly socket: net.Socket,
    private readonly fd: number
  ) {
    socket.setNoDelay(true)
    socket.on("error", noop) // surfaced as rejections
    socket.once("close", () => {
      if (this.rt.parked.get(this.fd) === this) this.rt.parked.delete(this.fd)
      if (this.head < this.queue.length) this.fail(undefined, "the connection closed mid-response")
    })
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
    const r = this.rt.addon.waitWritable(this.fd)
    if (r < 0) {
      this.fail(r)
      return
    }
    this.parked = true
    this.rt.parked.set(this.fd, this)
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
    if (this.rt.parked.get(this.fd) === this) this.rt.parked.delete(this.fd)
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
    attach: (socket) => new NativeWriter(rt, socket, socketFd(socket))
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
