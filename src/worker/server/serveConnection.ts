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
import { HEADER_LEN, MsgType } from "../../protocol/index.js"
import type { ConnectionWriter, DataPlaneShape, HitTable } from "../plane/DataPlane.js"
import type { WorkerStats } from "../metrics.js"
import { bodyLength, HEADER, OVER_CAP, overCapNotice, replyHeader, u32be } from "./frames.js"
import type { RequestHandler, Reply } from "./RequestHandler.js"
import type { ServeModeShape } from "./ServeMode.js"
import type { BodySink } from "./Writes.js"
import { collectBody } from "./rawBody.js"
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
 * Serves one accepted connection until its socket closes. Frames are cut straight out of each chunk
 * read (no frame objects, no payload views); only a frame split across reads is copied (`carry`).
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
  let paused = false
  /** The raw body of a Put or an AdmitCachedBlock being read: the bytes after its frame go here until it has them all. */
  let body: BodySink | undefined
  /** The Put's upload is full: reading waits for it (whatever else is in flight). */
  let bodyFull = false
  /**
   * A Put is being written through: what follows it waits (its bytes kept in `held`), so a
   * request after a Put sees what the Put wrote, as Talon's worker serves them in turn.
   */
  let holding = false
  let held: Buffer | undefined
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

  const maybeFinish = () => ended && !dead && conn.pending() === 0 && finish()

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
      if (paused && !bodyFull && !holding && conn.pending() < deps.maxInflight / 2 && !dead) {
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
    if (
      hits !== undefined &&
      !walking &&
      !paused &&
      !dead &&
      !refused &&
      !ended &&
      carryLen === 0 &&
      body === undefined &&
      !holding &&
      conn.pending() === 0
    ) {
      reader?.offload?.(hits)
    }
  }

  const pause = () => {
    paused = true
    if (reader !== undefined) reader.pause()
    else socket.pause()
  }

  /** The upload took what it had: read the connection again (unless requests in flight hold it). */
  const bodyDrained = () => {
    if (!bodyFull) return
    bodyFull = false
    // Mid-body the Put's own hold does not apply: the rest of its body must come in.
    if (paused && !dead && body !== undefined && conn.pending() <= deps.maxInflight) {
      paused = false
      if (reader !== undefined) reader.resume()
      else socket.resume()
    }
  }

  /** Hands the Put body's share of `b[p, end)` to its upload; returns where the next frame starts. */
  const feed = (b: Buffer, p: number, end: number): number => {
    const sink = body!
    const n = Math.min(end - p, sink.left)
    const more = sink.write(b, p, p + n)
    if (sink.left === 0) body = undefined
    else if (!more) {
      bodyFull = true
      if (!paused) pause()
    }
    return p + n
  }

  /** Serves one whole frame at `b[p, p+16+length)`; false when nothing after it may be read as a frame. */
  const frame = (b: Buffer, p: number, length: number): boolean => {
    const type = b[p + 3]!
    if (type === MsgType.Put) {
      const started = handler.handlePut(u32be(b, p + 8), b, p + HEADER_LEN, p + HEADER_LEN + length)
      if (started._tag === "PutStarted") {
        holding = true
        // Registered before the serve mode's own reaction: held frames are pushed before it may finish the connection.
        started.reply.then(release, release)
        conn.push(started.reply)
        if (started.sink.left > 0) {
          body = started.sink
          body.onDrain = bodyDrained
        }
        return true
      }
      conn.push(started)
      if (started._tag === "File" || !started.closeAfter) return true
      if (reader === undefined) pause()
      return false
    }
    const reply = handler.handleAt(type, u32be(b, p + 8), b, p + HEADER_LEN, p + HEADER_LEN + length)
    if (!(reply instanceof Promise) && reply._tag === "AwaitBody") {
      // Its reply waits for the body (read by walk), keeping its place among the replies.
      conn.push(
        new Promise<Reply>((resolve) => {
          const cut: Reply = { _tag: "Frame", bytes: new Uint8Array(0), closeAfter: true }
          body = collectBody(reply.length, (got) => (got === undefined ? resolve(cut) : void reply.then(got).then(resolve, () => resolve(cut))))
          if (body.left === 0) body = undefined
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

  /** The Put is answered: serve what arrived after it, and read again. */
  const release = () => {
    holding = false
    const rest = held
    held = undefined
    if (paused && !bodyFull && !dead && conn.pending() - 1 < deps.maxInflight) {
      paused = false
      if (reader !== undefined) reader.resume()
      else socket.resume()
    }
    if (rest !== undefined) onBytes(rest, 0, rest.length)
  }

  const onBytes = (b: Buffer, start: number, end: number) => {
    if (dead || refused) return
    if (holding && body === undefined) {
      // Only a read already under way when the loop paused lands here.
      held = held === undefined ? Buffer.from(b.subarray(start, end)) : Buffer.concat([held, b.subarray(start, end)])
      return
    }
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
    }
    while (true) {
      if (body !== undefined) {
        p = feed(b, p, end)
        if (body !== undefined) return true
      }
      if (holding) {
        // The Put's body is in; what follows waits for its reply.
        if (p < end) held = Buffer.from(b.subarray(p, end))
        if (!paused) pause()
        return false
      }
      if (end - p < HEADER_LEN) break
      const length = bodyLength(b, p)
      if (length < 0) {
        refuse(b, p, length)
        return false
      }
      if (end - p - HEADER_LEN < length) break
      const more = frame(b, p, length)
      p += HEADER_LEN + length
      if (!more) return false
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
    if (body !== undefined) {
      body.abort("the connection ended before the last byte")
      body = undefined
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
    body?.abort("the connection closed before the last byte")
    body = undefined
    conn.close()
    stats.connectionsOpen--
  })
}
