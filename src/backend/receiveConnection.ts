/**
 * One keep-alive connection of the fill's origin client (receiveInto.ts): its read buffer, the
 * response head parsed by hand, and content-length, chunked and read-to-close bodies framed in
 * place and handed to the exchange's sink as views into that buffer. A content-length body
 * whose sink lends its memory (a DirectSink) is instead received by the native addon straight
 * into that memory once the bytes already read are delivered: node stops reading the socket
 * (as it does for a held sink) and the addon's thread owns the fd until it reports back.
 */
import type { IncomingHttpHeaders } from "node:http"
import * as net from "node:net"
import type { OriginRequest } from "./http.js"
import { requestHead } from "./requestHead.js"
import { FILL_DONE, type FillAddon, fillAddon, nativeFailure, socketFd } from "./nativeReceive.js"
import { type BodySink, type DirectSink, type Exchanged, type OnHead, ReceiveError, STOP } from "./receiveTypes.js"

/** Where a connection goes back to when its message ended cleanly, and leaves when it closes. */
export interface ConnectionPool {
  readonly release: (conn: Connection) => void
  readonly forget: (conn: Connection) => void
}

const READ_BUFFER = 256 * 1024
const MAX_HEAD = 64 * 1024
/** Error documents are small; an origin sending more than this for one is refused. */
const MAX_BUFFERED = 4 * 1024 * 1024

const CR = 13
const LF = 10

const enum Frame {
  Length,
  Chunked,
  Close
}
const enum Chunk {
  Size,
  Data,
  DataEnd,
  Trailer
}

/** One response being received on a connection. */
export class Exchange {
  head: Buffer | undefined = undefined
  status = 0
  headers: IncomingHttpHeaders = {}
  sink: BodySink | undefined = undefined
  buffered: Array<Buffer> | undefined = undefined
  bufferedBytes = 0
  inBody = false
  frame = Frame.Close
  /** Body bytes left (Length), or of the current chunk (Chunked). */
  left = 0
  chunk = Chunk.Size
  line = ""
  keepAlive = false
  received = 0
  /** Bytes of the read buffer not yet processed while a sink holds the socket paused. */
  pendingFrom = 0
  pendingTo = 0
  held = false
  /** The origin closed a read-to-close body while a sink held the socket paused. */
  endedHeld = false
  settled = false
  /** The sink's memory the rest of a content-length body is received into natively, when it lends it. */
  direct: DirectSink | undefined = undefined

  constructor(
    readonly onHead: OnHead,
    readonly resolve: (value: Exchanged) => void,
    readonly reject: (error: unknown) => void
  ) {}
}

export class Connection {
  readonly buffer = Buffer.allocUnsafeSlow(READ_BUFFER)
  readonly socket: net.Socket
  exchange: Exchange | undefined = undefined
  reused = false
  closed = false
  /** The addon, while its thread owns the fd: the socket must not be closed under it. */
  private nativeOwner: FillAddon | undefined = undefined
  /** The connection was dropped during a native receive: it is closed once the receive returns. */
  private doomed = false

  constructor(
    readonly pool: ConnectionPool,
    readonly key: string,
    host: string,
    port: number,
    readonly timeoutMs: number
  ) {
    this.socket = net.connect({
      host,
      port,
      noDelay: true,
      onread: { buffer: this.buffer, callback: (n: number) => this.onRead(n) }
    })
    this.socket.on("error", (error: NodeJS.ErrnoException) => {
      const x = this.exchange
      // A kept-alive connection the origin reset while idle: nothing was lost, the request may be resent at once.
      const stale = x !== undefined && !x.inBody && x.received === 0 && this.reused && (error.code === "ECONNRESET" || error.code === "EPIPE")
      this.fail(new ReceiveError(error.message, stale ? "ESTALE_KEEPALIVE" : (error.code ?? "ECONNRESET")))
    })
    this.socket.on("end", () => this.onEnd())
    this.socket.on("close", () => this.onClose())
    this.socket.on("timeout", () => {
      if (this.exchange === undefined) return this.socket.destroy()
      this.fail(new ReceiveError(`no bytes from the origin for ${this.timeoutMs} ms`, "ETIMEDOUT"))
    })
  }

  start(request: OriginRequest, x: Exchange) {
    this.exchange = x
    this.socket.ref()
    this.socket.setTimeout(this.timeoutMs)
    this.socket.write(requestHead(request))
    // The read that completed the previous message returned false, which stopped reading.
    if (this.reused) this.socket.resume()
  }

  private onRead(n: number): boolean {
    const x = this.exchange
    if (x === undefined) {
      // Bytes nobody asked for: this connection's framing can no longer be trusted.
      this.socket.destroy()
      return false
    }
    x.received += n
    return this.process(x, 0, n)
  }

  /** Frames `buffer[from, to)`; false when a sink holds the socket paused. */
  private process(x: Exchange, from: number, to: number): boolean {
    let at = from
    try {
      while (at < to && !x.settled) {
        if (!x.inBody) {
          at = this.readHead(x, at, to)
          continue
        }
        if (x.frame === Frame.Chunked && x.chunk !== Chunk.Data) {
          at = this.chunkFraming(x, at, to)
          continue
        }
        const n = x.frame === Frame.Close ? to - at : Math.min(x.left, to - at)
        const wait = this.deliver(x, this.buffer.subarray(at, at + n))
        at += n
        if (x.frame !== Frame.Close) x.left -= n
        if (x.left === 0 && x.frame === Frame.Length) return this.finish(x, at === to, wait === STOP ? undefined : wait)
        if (wait === STOP) return this.finish(x, false)
        if (x.left === 0 && x.frame === Frame.Chunked) x.chunk = Chunk.DataEnd
        if (wait !== undefined) return this.hold(x, wait, at, to)
      }
    } catch (error) {
      this.fail(error)
      return false
    }
    if (x.direct !== undefined && !x.settled && x.inBody && x.left > 0) {
      // Node reads no further (this returns false); the rest of the body is the addon's to receive.
      this.socket.setTimeout(0)
      this.receiveNative(x, x.direct)
      return false
    }
    return !x.settled
  }

  /** Receives the next part of a content-length body into the sink's memory, off the JS thread. */
  private receiveNative(x: Exchange, direct: DirectSink) {
    const addon = fillAddon()
    const fd = socketFd(this.socket)
    if (typeof addon === "string" || fd < 0) return this.fail(new ReceiveError("the origin connection closed", "ECONNRESET"))
    let target
    try {
      target = direct.target(x.left)
    } catch (error) {
      return this.fail(error)
    }
    // An empty target would report no bytes and be asked for again, forever.
    if (target.to <= target.from) return this.fail(new ReceiveError("the fill lent no room for the body", "EINVAL"))
    this.nativeOwner = addon
    const rc = addon.receive(fd, target.bytes, target.from, target.to, target.unit, this.timeoutMs, (code, n, sum) => {
      this.nativeOwner = undefined
      if (this.doomed) {
        // Dropped meanwhile (aborted, or the pool closed): the exchange already ended.
        this.doomed = false
        this.socket.destroy()
        return
      }
      this.nativeDone(x, direct, code, n, sum)
    })
    if (rc < 0) {
      this.nativeOwner = undefined
      this.fail(new ReceiveError(`the native receive could not start (errno ${-rc})`, "ECONNRESET"))
    }
  }

  private nativeDone(x: Exchange, direct: DirectSink, code: number, n: number, sum: bigint | undefined) {
    if (x.settled) return
    x.received += n
    x.left -= n
    let wait: Promise<void> | typeof STOP | undefined | void
    try {
      // Delivered before any failure below, so a resumed read starts after these bytes.
      if (n > 0) wait = direct.filled(n, code === FILL_DONE ? sum : undefined)
    } catch (error) {
      return this.fail(error)
    }
    if (code !== FILL_DONE) {
      const error = nativeFailure(code, this.timeoutMs)
      if (wait instanceof Promise) wait.then(() => this.fail(error), (e: unknown) => this.fail(e))
      else this.fail(error)
      return
    }
    if (x.left === 0) return void this.finish(x, true, wait instanceof Promise ? wait : undefined)
    if (wait === STOP) return void this.finish(x, false)
    const next = () => (x.settled ? undefined : this.receiveNative(x, direct))
    if (wait instanceof Promise) wait.then(next, (e: unknown) => this.fail(e))
    else next()
  }

  private deliver(x: Exchange, bytes: Buffer): Promise<void> | typeof STOP | undefined {
    if (x.sink !== undefined) {
      const r = x.sink(bytes)
      return r === STOP ? STOP : r instanceof Promise ? r : undefined
    }
    x.bufferedBytes += bytes.length
    if (x.bufferedBytes > MAX_BUFFERED) throw new ReceiveError(`an error document over ${MAX_BUFFERED} bytes`, "EPROTO")
    x.buffered!.push(Buffer.from(bytes))
    return undefined
  }

  private hold(x: Exchange, wait: Promise<void>, at: number, to: number): boolean {
    x.held = true
    x.pendingFrom = at
    x.pendingTo = to
    // A paused socket reads nothing, so its inactivity is ours, not the origin's.
    this.socket.setTimeout(0)
    wait.then(
      () => {
        if (x.settled) return
        x.held = false
        this.socket.setTimeout(this.timeoutMs)
        if (this.process(x, x.pendingFrom, x.pendingTo) && !x.settled) {
          if (x.endedHeld) this.finish(x, false)
          else this.socket.resume()
        }
      },
      (error: unknown) => this.fail(error)
    )
    return false
  }

  private readHead(x: Exchange, at: number, to: number): number {
    const prior = x.head?.length ?? 0
    const joined = x.head === undefined ? this.buffer.subarray(at, to) : Buffer.concat([x.head, this.buffer.subarray(at, to)])
    const end = joined.indexOf("\r\n\r\n", Math.max(0, prior - 3), "latin1")
    if (end < 0) {
      if (joined.length > MAX_HEAD) throw new ReceiveError(`a response head over ${MAX_HEAD} bytes`, "EPROTO")
      x.head = Buffer.from(joined)
      return to
    }
    x.head = undefined
    const consumed = at + (end + 4 - prior)
    parseHead(x, joined.toString("latin1", 0, end))
    // An interim response (100 Continue) is followed by the real one.
    if (x.status >= 100 && x.status < 200) return consumed
    x.inBody = true
    x.sink = x.onHead(x.status, x.headers)
    if (x.sink === undefined) x.buffered = []
    else if (x.frame === Frame.Length && x.sink.direct !== undefined && typeof fillAddon() !== "string" && socketFd(this.socket) >= 0) x.direct = x.sink.direct
    if (x.frame === Frame.Length && x.left === 0) this.finish(x, consumed === to)
    return consumed
  }

  private chunkFraming(x: Exchange, at: number, to: number): number {
    const buf = this.buffer
    while (at < to) {
      const byte = buf[at++]!
      if (byte !== LF) {
        if (x.line.length > 1024) throw new ReceiveError("a chunk-size line over 1024 bytes", "EPROTO")
        if (byte !== CR) x.line += String.fromCharCode(byte)
        continue
      }
      const line = x.line
      x.line = ""
      if (x.chunk === Chunk.DataEnd) {
        if (line !== "") throw new ReceiveError("a chunk not followed by CRLF", "EPROTO")
        x.chunk = Chunk.Size
      } else if (x.chunk === Chunk.Size) {
        const hex = (line.split(";", 1)[0] ?? "").trim()
        if (!/^[0-9a-fA-F]{1,12}$/.test(hex)) throw new ReceiveError(`a chunk size "${line.slice(0, 40)}" that is not hex`, "EPROTO")
        const size = parseInt(hex, 16)
        if (size === 0) x.chunk = Chunk.Trailer
        else {
          x.left = size
          x.chunk = Chunk.Data
          return at
        }
      } else if (line === "") {
        this.finish(x, at === to)
        return to
      }
    }
    return at
  }

  /**
   * The message is complete (or its sink stopped): the connection is kept if it can be reused,
   * and the exchange settles once the sink's last wait, if any, has.
   */
  private finish(x: Exchange, clean: boolean, wait?: Promise<void>): false {
    const reusable = clean && x.keepAlive && x.inBody && x.frame !== Frame.Close && !(x.frame === Frame.Length && x.left > 0)
    x.settled = true
    this.exchange = undefined
    if (reusable) this.pool.release(this)
    else this.drop()
    const done: Exchanged = { status: x.status, headers: x.headers, body: x.buffered === undefined ? undefined : Buffer.concat(x.buffered) }
    if (wait === undefined) x.resolve(done)
    else wait.then(() => x.resolve(done), x.reject)
    return false
  }

  fail(error: unknown) {
    const x = this.exchange
    this.exchange = undefined
    this.drop()
    if (x === undefined || x.settled) return
    x.settled = true
    x.reject(error)
  }

  /**
   * Closes the socket, or, while the addon's thread reads its fd, wakes that read (shutdown)
   * and closes it once the read returns: a closed fd number could be reused under the read.
   */
  private drop() {
    const owner = this.nativeOwner
    if (owner === undefined) return this.socket.destroy()
    this.doomed = true
    owner.shutdown(socketFd(this.socket))
  }

  private onEnd() {
    const x = this.exchange
    if (x === undefined) return this.socket.destroy()
    if (x.inBody && x.frame === Frame.Close) {
      if (x.held) x.endedHeld = true
      else this.finish(x, false)
      return
    }
    const where = x.inBody ? `after ${x.frame === Frame.Length ? "a short body" : "an unfinished chunked body"}` : "before a response"
    // A kept-alive connection the origin closed while idle: nothing was lost, the caller may resend at once.
    const code = !x.inBody && x.received === 0 && this.reused ? "ESTALE_KEEPALIVE" : "ERR_STREAM_PREMATURE_CLOSE"
    this.fail(new ReceiveError(`origin closed the connection ${where}`, code))
  }

  private onClose() {
    this.closed = true
    this.pool.forget(this)
    if (this.exchange !== undefined && !this.exchange.endedHeld) this.fail(new ReceiveError("origin connection closed", "ECONNRESET"))
  }
}

const parseHead = (x: Exchange, text: string) => {
  const lines = text.split("\r\n")
  const status = /^HTTP\/1\.([01]) (\d{3})(?: |$)/.exec(lines[0] ?? "")
  if (status === null) throw new ReceiveError(`a response that is not HTTP/1.x: "${(lines[0] ?? "").slice(0, 40)}"`, "EPROTO")
  const headers: Record<string, string> = {}
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!
    const colon = line.indexOf(":")
    if (colon <= 0) throw new ReceiveError(`a malformed header line "${line.slice(0, 40)}"`, "EPROTO")
    const name = line.slice(0, colon).trim().toLowerCase()
    const value = line.slice(colon + 1).trim()
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`
  }
  x.status = Number(status[2])
  x.headers = headers
  const connection = (headers.connection ?? "").toLowerCase()
  x.keepAlive = status[1] === "1" ? !connection.includes("close") : connection.includes("keep-alive")
  const encoding = (headers["transfer-encoding"] ?? "").toLowerCase()
  const length = headers["content-length"]
  if (x.status === 204 || x.status === 304) {
    x.frame = Frame.Length
    x.left = 0
  } else if (encoding !== "") {
    if (!encoding.endsWith("chunked")) x.frame = Frame.Close
    else {
      x.frame = Frame.Chunked
      x.chunk = Chunk.Size
    }
  } else if (length !== undefined) {
    if (!/^\d{1,15}$/.test(length)) throw new ReceiveError(`a content-length "${length.slice(0, 40)}" that is not a number`, "EPROTO")
    x.frame = Frame.Length
    x.left = Number(length)
  } else x.frame = Frame.Close
}
