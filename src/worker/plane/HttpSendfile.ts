/**
 * File bytes onto a socket someone else owns (a node:http response's socket in a gateway that
 * runs in the worker's process): sendfile(2) by the addon on the socket's fd, a short send
 * resumed when the shared epoll fd says the socket is writable, so a slow reader holds its
 * pinned blocks and no buffer, and the event loop never waits on it.
 *
 * The caller owns the socket and must have nothing queued on it while a send runs (the HTTP
 * head is flushed first; node writes nothing else on a keep-alive socket mid-response).
 */
import type * as net from "node:net"
import type { FileSegment } from "./DataPlane.js"
import { loadNativeAddon, type NativeAddon } from "./NativeAddon.js"
import { nativeRuntime } from "./Native.js"
import { EAGAIN, ERR, type NativeRuntime, OUT, type Watched } from "./NativeRuntime.js"

export interface SocketSendfile {
  /** The socket's fd when sendfile can write to it (a plain TCP socket, open), else -1 (TLS, closed). */
  readonly fdOf: (socket: net.Socket) => number
  /**
   * Sends `head` (if any) and every byte of `segments` in order, the head in the same segments as
   * the first bytes of the file (MSG_MORE). `true` when all went out at once, else a promise of
   * whether all did (false: the socket failed or closed; the bytes after the failure never went).
   */
  readonly send: (socket: net.Socket, fd: number, segments: ReadonlyArray<FileSegment>, head?: Uint8Array) => true | Promise<boolean>
}

interface Handle {
  readonly fd?: number
}

/** What `net.Socket` keeps of its libuv handle: the fd is there for TCP sockets on Linux. */
const handleFd = (socket: net.Socket): number => {
  if ((socket as { encrypted?: boolean }).encrypted === true || socket.destroyed) return -1
  const fd = (socket as unknown as { _handle?: Handle | null })._handle?.fd
  return typeof fd === "number" && fd >= 0 ? fd : -1
}

/** One send in progress on one socket: where it is, and the wait for writability when the buffer is full. */
class Send implements Watched {
  #segment = 0
  #done = 0
  #headDone = 0
  #resolve: ((ok: boolean) => void) | undefined
  readonly #onClose = () => this.#finish(false)

  constructor(
    private readonly rt: NativeRuntime,
    private readonly socket: net.Socket,
    private readonly fd: number,
    private readonly segments: ReadonlyArray<FileSegment>,
    private readonly head: Uint8Array | undefined
  ) {}

  /** Sends as far as the socket takes: true (all sent), false (failed), or "wait" (buffer full). */
  step(): boolean | "wait" {
    const addon: NativeAddon = this.rt.addon
    while (this.#segment < this.segments.length) {
      if (this.socket.destroyed) return false
      const s = this.segments[this.#segment]!
      const head = this.head
      const headLeft = head === undefined ? 0 : head.length - this.#headDone
      const left = s.length - this.#done
      if (left + headLeft > 0) {
        const n = addon.sendHeaderFile(this.fd, headLeft > 0 ? head! : null, this.#headDone, headLeft, s.fd, s.offset + this.#done, left)
        if (n === -EAGAIN) return "wait"
        if (n < 0) return false
        const ofHead = n < headLeft ? n : headLeft
        this.#headDone += ofHead
        this.#done += n - ofHead
        if (n < left + headLeft) return "wait"
      }
      this.#segment++
      this.#done = 0
    }
    return true
  }

  wait(): Promise<boolean> {
    return new Promise((resolve) => {
      this.#resolve = resolve
      this.socket.once("close", this.#onClose)
      this.#arm()
    })
  }

  #arm(): void {
    // A stale hit-table mark from an earlier connection on this fd number must not claim our wakeups.
    this.rt.unmark(this.fd)
    this.rt.conns.set(this.fd, this)
    if (this.rt.addon.watch(this.fd, OUT) < 0) this.#finish(false)
  }

  onEvents(events: number): void {
    if (this.#resolve === undefined) return
    // Progress means the client is reading: the connection is not idle.
    const timeout = this.socket.timeout
    if (timeout !== undefined && timeout > 0) this.socket.setTimeout(timeout)
    const r = this.step()
    if (r === "wait" && (events & ERR) === 0) return
    this.#finish(r === true)
  }

  #finish(ok: boolean): void {
    const resolve = this.#resolve
    if (resolve === undefined) return
    this.#resolve = undefined
    this.socket.off("close", this.#onClose)
    if (this.rt.conns.get(this.fd) === this) {
      this.rt.conns.delete(this.fd)
      this.rt.addon.watch(this.fd, 0)
    }
    resolve(ok)
  }
}

const sendWith =
  (rt: NativeRuntime) =>
  (socket: net.Socket, fd: number, segments: ReadonlyArray<FileSegment>, head?: Uint8Array): true | Promise<boolean> => {
    const send = new Send(rt, socket, fd, segments, head)
    // Bytes node still holds (the head, when the kernel did not take it at once) go first.
    if (socket.writableLength > 0) {
      return new Promise((resolve) => {
        const go = () => {
          socket.off("close", gone)
          const r = send.step()
          if (r === "wait") send.wait().then(resolve)
          else resolve(r)
        }
        const gone = () => {
          socket.off("drain", go)
          resolve(false)
        }
        socket.once("drain", go)
        socket.once("close", gone)
      })
    }
    const r = send.step()
    if (r === true) return true
    return r === false ? Promise.resolve(false) : send.wait()
  }

/** The sender over this process's native runtime, or why there is none (no addon, no epoll). */
export const makeSocketSendfile = (addonPath?: string): SocketSendfile | string => {
  const load = loadNativeAddon(addonPath)
  if (load._tag === "Unavailable") return load.reason
  const rt = nativeRuntime(load.addon)
  if (typeof rt === "string") return rt
  return { fdOf: handleFd, send: sendWith(rt) }
}
