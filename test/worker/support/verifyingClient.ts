/**
 * A pipelined GetRange client that checks every reply as it streams in: the reply's id (FIFO
 * per connection, or any pending id in multiplexed mode), its type and length, and every payload
 * byte against the object's known content. It can stall its own reads at random moments so the
 * server's socket buffer fills and large replies leave in parts (the case where one reply's
 * bytes could cut into another's).
 */
import * as net from "node:net"
import type { ObjectId } from "../../../src/core/ids.js"
import { encodeGetRangeFrame, HEADER_LEN, MsgType } from "../../../src/protocol/index.js"

export interface Range {
  readonly offset: number
  readonly len: number
}

export interface VerifyOptions {
  readonly port: number
  readonly object: ObjectId
  /** The object's bytes: every payload byte is compared with these. */
  readonly content: Buffer
  /** Requests this connection sends, in order. */
  readonly ranges: ReadonlyArray<Range>
  /** Requests kept in flight. */
  readonly depth: number
  /** Replies must come back in request order (pipelined mode); otherwise by id (multiplexed). */
  readonly fifo: boolean
  /** Stall reads this often (per data event, 0..1) for a few milliseconds. */
  readonly stallChance?: number
  /** Deterministic choices (stalls). */
  readonly seed?: number
  /** Requests whose reply may be an error frame (by index into `ranges`): e.g. ranges past the end. */
  readonly errorsAllowed?: ReadonlySet<number>
  /** Called once per reply in arrival order: request index (tests assert orderings with it). */
  readonly onReply?: (index: number) => void
}

export interface VerifyResult {
  readonly replies: number
  readonly bytes: number
  readonly errorFrames: number
  /** Arrival order of replies, as request indexes. */
  readonly order: ReadonlyArray<number>
}

/** Fails with the first wrong thing seen (wrong id, type, flags, length or byte), with enough detail to debug it. */
export const verifyRanges = (o: VerifyOptions): Promise<VerifyResult> =>
  new Promise((resolve, reject) => {
    const socket = net.connect({ port: o.port, host: "127.0.0.1" })
    socket.setNoDelay(true)
    let rnd = (o.seed ?? 1) >>> 0 || 1
    const random = () => {
      rnd ^= rnd << 13
      rnd >>>= 0
      rnd ^= rnd >>> 17
      rnd ^= rnd << 5
      rnd >>>= 0
      return rnd / 4294967296
    }
    const baseId = 1 + Math.floor(random() * 1_000_000)
    let sent = 0
    /** Request indexes in flight, oldest first. */
    const inflight: Array<number> = []
    const order: Array<number> = []
    let bytes = 0
    let errorFrames = 0
    let settled = false

    const fail = (message: string) => {
      if (settled) return
      settled = true
      socket.destroy()
      reject(new Error(message))
    }

    const pump = () => {
      const frames: Array<Buffer> = []
      while (sent < o.ranges.length && inflight.length < o.depth) {
        const r = o.ranges[sent]!
        frames.push(encodeGetRangeFrame(baseId + sent, { object: o.object, offset: r.offset, len: r.len }))
        inflight.push(sent)
        sent++
      }
      if (frames.length > 0) socket.write(Buffer.concat(frames))
    }

    // Parser state: the header being read, then the payload of request `current`.
    const header = Buffer.alloc(HEADER_LEN)
    let headerGot = 0
    let current = -1
    let bodyLen = 0
    let bodyGot = 0
    let isError = false
    let errorText: Array<Buffer> = []

    const onHeader = (): boolean => {
      if (header.readUInt16BE(0) !== 0x544c || header[2] !== 1) {
        fail(`reply header is not a frame header: ${header.toString("hex")} (${describePos()})`)
        return false
      }
      const id = header.readUInt32BE(8)
      const index = id - baseId
      const at = inflight.indexOf(index)
      if (index < 0 || index >= sent || at < 0) {
        fail(`reply id ${id} matches no request in flight (${describePos()}), header ${header.toString("hex")}`)
        return false
      }
      if (o.fifo && at !== 0) {
        fail(`reply to request ${index} arrived before the reply to request ${inflight[0]} (pipelined replies must keep request order)`)
        return false
      }
      inflight.splice(at, 1)
      current = index
      bodyLen = header.readUInt32BE(12)
      bodyGot = 0
      isError = (header.readUInt16BE(4) & 2) !== 0
      errorText = []
      if (header[3] !== MsgType.GetRange) {
        fail(`reply ${index}: type ${header[3]}, expected GetRange`)
        return false
      }
      const r = o.ranges[index]!
      if (!isError && bodyLen !== r.len) {
        fail(`reply ${index}: length ${bodyLen}, expected ${r.len} (offset ${r.offset})`)
        return false
      }
      return true
    }

    const describePos = () => `after ${order.length} replies, ${bytes} payload bytes`

    const onReplyDone = () => {
      if (isError) {
        errorFrames++
        if (!(o.errorsAllowed?.has(current) ?? false)) {
          fail(`reply ${current}: error frame "${Buffer.concat(errorText).toString("utf8")}" for offset ${o.ranges[current]!.offset} len ${o.ranges[current]!.len}`)
          return
        }
      }
      order.push(current)
      o.onReply?.(current)
      current = -1
      headerGot = 0
      if (order.length === o.ranges.length) {
        settled = true
        socket.end()
        resolve({ replies: order.length, bytes, errorFrames, order })
      }
    }

    socket.on("data", (chunk: Buffer) => {
      let p = 0
      while (p < chunk.length && !settled) {
        if (current < 0) {
          const take = Math.min(HEADER_LEN - headerGot, chunk.length - p)
          chunk.copy(header, headerGot, p, p + take)
          headerGot += take
          p += take
          if (headerGot < HEADER_LEN) break
          if (!onHeader()) return
          if (bodyLen === 0) {
            onReplyDone()
            continue
          }
        }
        const take = Math.min(bodyLen - bodyGot, chunk.length - p)
        if (isError) errorText.push(Buffer.from(chunk.subarray(p, p + take)))
        else {
          const r = o.ranges[current]!
          const want = o.content.subarray(r.offset + bodyGot, r.offset + bodyGot + take)
          const got = chunk.subarray(p, p + take)
          if (!got.equals(want)) {
            let k = 0
            while (got[k] === want[k]) k++
            fail(
              `reply ${current} (offset ${r.offset}, len ${r.len}): wrong byte at ${bodyGot + k} of the payload; ` +
                `got ${got.subarray(k, k + 24).toString("hex")}, want ${want.subarray(k, k + 24).toString("hex")} (${describePos()})`
            )
            return
          }
          bytes += take
        }
        bodyGot += take
        p += take
        if (bodyGot === bodyLen) onReplyDone()
      }
      if (settled) return
      pump()
      if (o.stallChance !== undefined && random() < o.stallChance) {
        socket.pause()
        setTimeout(() => socket.resume(), 1 + Math.floor(random() * 4))
      }
    })
    socket.on("error", (e) => fail(`connection error: ${e.message} (${describePos()})`))
    socket.on("close", () => fail(`the server closed the connection (${describePos()}, ${inflight.length} in flight)`))
    socket.once("connect", pump)
  })
