/**
 * One connection's serve loop: frames cut straight out of each read, replies through the
 * DataPlane writer in the ServeMode's order. Plain callbacks: this is the per-request hot path.
 *
 * Protocol violations (bad magic or version, an unknown type, a length over
 * its type's cap) end that connection, checked as soon as the 16 header bytes
 * are in, before the body is buffered: nothing after the bad header is parsed,
 * the requests before it still get their replies, a body over its cap is told
 * so in an error frame, and then the worker closes. A connection that
 * sits on a partial frame for the read timeout is dropped too. Other
 * connections are unaffected. Once a reply header is on the wire a failure
 * can only close the connection (the client sees a short body).
 */
import { HEADER_LEN } from "../../protocol/index.js"
import type { ConnectionWriter, DataPlaneShape, HitTable } from "../plane/DataPlane.js"
import type { WorkerStats } from "../metrics.js"
import { bodyLength, HEADER, OVER_CAP, overCapNotice, replyHeader, u32be } from "./frames.js"
import type { RequestHandler, Reply } from "./RequestHandler.js"
import type { ServeModeShape } from "./ServeMode.js"
import type { Connection } from "./SocketServer.js"

export interface ConnectionDeps {
  /** When it has `read`, the plane reads the socket (which was accepted paused); else libuv's 'data' events. */
  readonly plane?: DataPlaneShape
  readonly writer: ConnectionWriter
  readonly handler: RequestHandler
  readonly mode: ServeModeShape
  readonly stats: WorkerStats
  readonly readTimeoutMs: number
  readonly maxInflight: number
  /** Where the plane may answer this connection's hits itself while the loop is idle (native plane). */
  readonly hits?: HitTable
}

/** A partial frame kept between reads is copied here; past this size its buffer is not kept. */
const CARRY_KEEP = 4096

/**
 * Serves one accepted connection until its socket closes. Plain callbacks: this is the per-request hot loop.
 * Frames are cut straight out of each chunk read (no frame objects, no payload views); only a
 * frame split across reads is copied, into the connection's carry buffer.
 */
export const serveConnection = (connection: Connection, deps: ConnectionDeps): void => {
  const socket = connection.socket
  const { writer, handler, stats, hits } = deps
  const ownsReads = deps.plane?.read !== undefined
  /** The bytes of an incomplete frame (header first; its body once the header passed the checks). */
  let carry: Buffer | undefined
  let carryLen = 0
  /** Total bytes of the frame in `carry` once its header is in, else 0. */
  let carryNeed = 0
  /** The raw body an AdmitCachedBlock frame announced, while it is read: nothing in it is a frame. */
  let body: { readonly buf: Buffer; have: number; readonly done: (b: Buffer | undefined) => void } | undefined
  let paused = false
  let ended = false
  let dead = false
  stats.connectionsOpen++
  stats.connectionsTotal++

  const drop = () => {
    if (dead) return
    dead = true
    stats.connectionsDropped++
    socket.destroy()
  }

  /**
   * Closes after the last reply. libuv: a FIN (end). A plane-read socket is destroyed instead:
   * libuv never sees its end of stream, so an ended socket would stay open; its queued bytes
   * still leave before the FIN (only unread input would turn a close into a reset, and this
   * runs after the end of stream was read).
   */
  const finish = () => {
    dead = true
    if (ownsReads) socket.destroy()
    else socket.end()
  }

  const maybeFinish = () => {
    if (ended && !dead && conn.pending() === 0) finish()
  }

  /** A frame broke the protocol: nothing after it is parsed; the requests before it still get their replies. */
  let refused = false

  /**
   * Refuses the connection at the frame header at `b[p, p+16)` (`why`: its bodyLength code): a
   * body over its type's cap is told so in an error frame (a well-formed reply); bad magic,
   * version or an unknown type get none (the peer does not speak this protocol, and no Talon
   * decoder reads such a frame back), as Talon's reference server does. Input is then read and
   * discarded.
   */
  const refuse = (b: Buffer, p: number, why: number) => {
    if (refused || dead) return
    refused = true
    stats.connectionsDropped++
    if (why === OVER_CAP) conn.push({ _tag: "Frame", bytes: overCapNotice(b, p), closeAfter: false })
    if (paused) {
      paused = false
      if (reader !== undefined) reader.resume()
      else socket.resume()
    }
    closeIfRefused()
  }

  /** After a refusal, once every reply is out: FIN; a plane-read socket is destroyed at the peer's end (or its read timeout). */
  const closeIfRefused = () => {
    if (!refused || dead || conn.pending() > 0) return
    dead = true
    socket.end()
  }

  const send = (reply: Reply): Promise<void> => {
    if (reply._tag === "File") {
      replyHeader(reply.type, reply.requestId, reply.range.length)
      return writer.writeFile(HEADER, reply.segments)
    }
    const p = writer.writeFrame(reply.bytes)
    if (!reply.closeAfter) return p
    return p.then(() => {
      dead = true
      // A plane-read socket keeps reading (and discarding) to the peer's end of stream, then is destroyed.
      socket.end()
    })
  }

  const conn = deps.mode.open({
    writer,
    send,
    done: (reply) => handler.done(reply),
    onSettled: () => {
      if (paused && conn.pending() < deps.maxInflight / 2 && !dead) {
        paused = false
        if (reader !== undefined) reader.resume()
        else socket.resume()
      }
      maybeFinish()
      closeIfRefused()
      offload()
    },
    onWriteFailure: () => {
      dead = true
      socket.destroy()
    }
  })

  /** True while onBytes walks a read's frames: replies settling mid-walk must not hand the connection to the plane. */
  let walking = false

  /**
   * Idle: the plane may answer the next reads' hits itself (until it hands bytes back to onBytes).
   * Never mid-walk: frames after the current one are not answered yet, and a hit the plane answered
   * before them would leave first (out of order) or cut into a reply still being sent.
   */
  const offload = () => {
    if (hits !== undefined && !walking && !paused && !dead && !refused && !ended && carryLen === 0 && body === undefined && conn.pending() === 0) reader?.offload?.(hits)
  }

  const pause = () => {
    paused = true
    if (reader !== undefined) reader.pause()
    else socket.pause()
  }

  /**
   * Copies what `b[p, end)` holds of the awaited raw body; once it is whole its request is
   * answered (in its place in reply order). Returns where the frames after it begin.
   */
  const feedBody = (b: Buffer, p: number, end: number): number => {
    const r = body!
    const take = Math.min(r.buf.length - r.have, end - p)
    b.copy(r.buf, r.have, p, p + take)
    r.have += take
    if (r.have === r.buf.length) {
      body = undefined
      r.done(r.buf)
    }
    return p + take
  }

  /** Serves one whole frame at `b[p, p+16+length)`; false when nothing after it may be read as a frame. */
  const frame = (b: Buffer, p: number, length: number): boolean => {
    const type = b[p + 3]!
    const reply = handler.handleAt(type, u32be(b, p + 8), b, p + HEADER_LEN, p + HEADER_LEN + length)
    if (!(reply instanceof Promise) && reply._tag === "AwaitBody") {
      // Its reply waits for the body (read by walk), keeping its place among the replies.
      conn.push(
        new Promise<Reply>((resolve) => {
          body = {
            buf: Buffer.allocUnsafe(reply.length),
            have: 0,
            done: (b) =>
              b === undefined
                ? resolve({ _tag: "Frame", bytes: new Uint8Array(0), closeAfter: true })
                : void reply.then(b).then(resolve, () => resolve({ _tag: "Frame", bytes: new Uint8Array(0), closeAfter: true }))
          }
          if (reply.length === 0) feedBody(b, 0, 0)
        })
      )
      return true
    }
    conn.push(reply)
    // Nothing after a Put can be trusted to be a frame.
    if (reply instanceof Promise || reply._tag === "File" || !reply.closeAfter) return true
    if (reader === undefined) pause()
    return false
  }

  const onBytes = (b: Buffer, start: number, end: number) => {
    if (dead || refused) return
    walking = true
    let whole: boolean
    try {
      whole = walk(b, start, end)
    } finally {
      walking = false
    }
    // Stopped early (a frame still incomplete, a dropped connection, a Put): nothing to pause or hand over.
    if (!whole || dead) return
    if (!paused && conn.pending() >= deps.maxInflight) pause()
    else offload()
  }

  /** Serves the whole frames in `b[start, end)` and keeps a trailing partial one; true when it read to the end. */
  const walk = (b: Buffer, start: number, end: number): boolean => {
    let p = start
    if (body !== undefined) {
      p = feedBody(b, p, end)
      if (body !== undefined) return false
    }
    if (carryLen > 0) {
      const c = carry!
      if (carryNeed === 0) {
        const take = Math.min(HEADER_LEN - carryLen, end - p)
        b.copy(c, carryLen, p, p + take)
        carryLen += take
        p += take
        if (carryLen < HEADER_LEN) return false
        const length = bodyLength(c, 0)
        if (length < 0) {
          refuse(c, 0, length)
          return false
        }
        carryNeed = HEADER_LEN + length
        if (carryNeed > c.length) {
          const grown = Buffer.allocUnsafe(carryNeed)
          c.copy(grown, 0, 0, carryLen)
          carry = grown
        }
      }
      const take = Math.min(carryNeed - carryLen, end - p)
      b.copy(carry!, carryLen, p, p + take)
      carryLen += take
      p += take
      if (carryLen < carryNeed) return false
      const whole = carry!
      const length = carryNeed - HEADER_LEN
      carryLen = 0
      carryNeed = 0
      if (whole.length > CARRY_KEEP) carry = undefined
      if (!frame(whole, 0, length)) return false
      if (body !== undefined) {
        p = feedBody(b, p, end)
        if (body !== undefined) return false
      }
    }
    while (end - p >= HEADER_LEN) {
      const length = bodyLength(b, p)
      if (length < 0) {
        refuse(b, p, length)
        return false
      }
      if (end - p - HEADER_LEN < length) break
      const more = frame(b, p, length)
      p += HEADER_LEN + length
      if (!more) return false
      if (body !== undefined) {
        p = feedBody(b, p, end)
        if (body !== undefined) return false
      }
    }
    if (p < end) {
      const rest = end - p
      if (carry === undefined) carry = Buffer.allocUnsafe(Math.max(256, rest))
      if (rest >= HEADER_LEN) {
        // The header passed its checks in the loop above: size the carry for the whole frame.
        carryNeed = HEADER_LEN + bodyLength(b, p)
        if (carry.length < carryNeed) carry = Buffer.allocUnsafe(carryNeed)
      } else if (carry.length < HEADER_LEN) carry = Buffer.allocUnsafe(256)
      b.copy(carry, 0, p, end)
      carryLen = rest
    }
    return true
  }

  const onEnd = () => {
    // Half-close: queued replies still go out, then the connection closes.
    ended = true
    // The peer ended inside an admission body: nothing is admitted, and its reply settles so the connection can close.
    if (body !== undefined) {
      const cut = body
      body = undefined
      cut.done(undefined)
    }
    // A Put answered: its reply is out and the peer is done; nothing more to read.
    if (dead && ownsReads) socket.destroy()
    maybeFinish()
  }

  const reader = deps.plane?.read?.(connection, writer, { bytes: onBytes, end: onEnd, error: drop })
  offload()
  if (reader === undefined) {
    socket.on("data", (chunk: Buffer) => onBytes(chunk, 0, chunk.length))
    socket.on("end", onEnd)
    socket.resume()
  }
  socket.setTimeout(deps.readTimeoutMs)
  let readsAtTimeout = 0
  socket.on("timeout", () => {
    if (reader !== undefined) {
      // A Put was answered and the peer never closed: nothing more is coming.
      if (dead) return void socket.destroy()
      // libuv sees no reads on a plane-read socket, so its idle timer never restarts by itself:
      // restart it here, and drop only a connection that sat a whole period on a partial frame.
      const reads = reader.reads()
      const idle = reads === readsAtTimeout
      readsAtTimeout = reads
      if (idle && (carryLen > 0 || body !== undefined) && !paused) drop()
      else socket.setTimeout(deps.readTimeoutMs)
      return
    }
    if ((carryLen > 0 || body !== undefined) && !paused) drop()
  })
  socket.on("error", () => {})
  socket.once("close", () => {
    dead = true
    // A body cut by the peer: nothing is admitted, and its reply (never sent) settles.
    const cut = body
    body = undefined
    cut?.done(undefined)
    conn.close()
    stats.connectionsOpen--
  })
}
