/**
 * One load-generator connection's state, laid out for the hot loop in engine.ts: typed arrays
 * per in-flight slot, the reply parser's state, and the request frames waiting for the next
 * write. Plus the per-connection random stream and the socket setup.
 */
import * as net from "node:net"
import { Flags, HEADER_LEN, MAGIC, MsgType, PROTOCOL_VERSION } from "../protocol/frame.js"
import type { ThreadSpec } from "./threadMessages.js"

/** mulberry32: a tiny, fast 32-bit generator; each connection has its own stream. */
export const nextRandom = (state: Uint32Array, i: number): number => {
  let t = (state[i] = (state[i]! + 0x6d2b79f5) >>> 0)
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

/** One seed per connection, from the run's seed and the connection's global index. */
export const seedStreams = (spec: ThreadSpec): Uint32Array => {
  const rng = new Uint32Array(spec.conns.length)
  spec.conns.forEach((c, i) => {
    rng[i] = (Math.imul(spec.seed >>> 0, 0x9e3779b1) ^ Math.imul(c + 1, 0x85ebca6b)) >>> 0
  })
  return rng
}

export const KIND_HIT = 0
export const KIND_MISS = 1

export interface Conn {
  readonly index: number
  readonly local: number
  socket: net.Socket | null
  dead: boolean
  inflight: number
  nextSeq: number
  coldNext: number
  // per slot
  readonly ids: Uint32Array
  readonly t0: Float64Array
  readonly offsets: Float64Array
  readonly kinds: Uint8Array
  readonly active: Uint8Array
  // parse state
  readonly hdr: Buffer
  hgot: number
  inBody: boolean
  bodyLeft: number
  bodyLen: number
  bodySlot: number
  bodyError: Buffer | null
  // pending request frames, written once per event-loop turn
  out: Buffer
  outLen: number
  /** Requests in `out` not yet written; `posKind[k]` = template kind at batch position k (-1 none). */
  pending: number
  readonly posKind: Int8Array
  queued: boolean
}

const EMPTY = Buffer.alloc(0)

export const newConns = (spec: ThreadSpec, maxReqBytes: number): Array<Conn> => {
  const { depth } = spec
  const conns: Array<Conn> = spec.conns.map((index, local) => ({
    index,
    local,
    socket: null,
    dead: false,
    inflight: 0,
    nextSeq: 0,
    coldNext: index,
    ids: new Uint32Array(depth),
    t0: new Float64Array(depth),
    offsets: new Float64Array(depth),
    kinds: new Uint8Array(depth),
    active: new Uint8Array(depth),
    hdr: Buffer.alloc(HEADER_LEN),
    hgot: 0,
    inBody: false,
    bodyLeft: 0,
    bodyLen: 0,
    bodySlot: 0,
    bodyError: null,
    out: EMPTY,
    outLen: 0,
    pending: 0,
    posKind: new Int8Array(depth).fill(-1),
    queued: false
  }))
  // `out` is replaced after a partial write; assigning it once more now, before any code
  // is optimised, keeps that first replacement from deoptimising everything that reads it.
  for (const c of conns) c.out = Buffer.allocUnsafe(depth * maxReqBytes)
  return conns
}

/**
 * Connects every connection before the clock starts, as pound does; reads land in the
 * thread's one shared buffer and go to `onData`. Any connect failure closes them all.
 */
export const connectAll = (
  spec: ThreadSpec,
  conns: ReadonlyArray<Conn>,
  readBuf: Buffer,
  onData: (c: Conn, n: number, buf: Buffer) => void
): Promise<void> =>
  Promise.all(
    conns.map(
      (c) =>
        new Promise<void>((resolve, reject) => {
          const socket = net.connect({
            host: spec.host,
            port: spec.port,
            noDelay: true,
            onread: { buffer: readBuf, callback: (n: number, buf: Uint8Array) => (onData(c, n, buf as Buffer), true) }
          })
          c.socket = socket
          socket.once("connect", () => {
            socket.off("error", reject)
            resolve()
          })
          socket.once("error", (e) => reject(new Error(`connect ${spec.host}:${spec.port} (conn ${c.index}): ${e.message}`)))
        })
    )
  ).then(
    () => undefined,
    (e: unknown) => {
      for (const c of conns) c.socket?.destroy()
      throw e
    }
  )

const MAGIC_HI = MAGIC >>> 8
const MAGIC_LO = MAGIC & 0xff
const TYPE_GET_RANGE = MsgType.GetRange
/** Longest error body accepted; a longer one is a protocol violation. */
const ERROR_BODY_CAP = 64 * 1024

/**
 * Checks a whole reply header at `h[at]` against the requests `c` has in flight and, when it
 * fits one, sets `c` up to read its body. Returns why the connection must be dropped, or null.
 */
export const startReply = (c: Conn, h: Buffer, at: number, depth: number, slotMask: number, range: number): string | null => {
  if (h[at] !== MAGIC_HI || h[at + 1] !== MAGIC_LO || h[at + 2] !== PROTOCOL_VERSION) {
    return `conn ${c.index}: bad reply header ${h.toString("hex", at, at + 4)} (want magic 544c version 01)`
  }
  const type = h[at + 3]!
  const flags = (h[at + 4]! << 8) | h[at + 5]!
  const id = ((h[at + 8]! << 24) | (h[at + 9]! << 16) | (h[at + 10]! << 8) | h[at + 11]!) >>> 0
  const len = ((h[at + 12]! << 24) | (h[at + 13]! << 16) | (h[at + 14]! << 8) | h[at + 15]!) >>> 0
  const slot = id & slotMask
  if (slot >= depth || c.active[slot] === 0 || c.ids[slot] !== id) return `conn ${c.index}: reply id ${id} matches no request in flight`
  if (type !== TYPE_GET_RANGE) return `conn ${c.index} id ${id}: reply message type ${type} (expected ${TYPE_GET_RANGE} GetRange)`
  if ((flags & Flags.Error) !== 0) {
    if (len > ERROR_BODY_CAP) return `conn ${c.index} id ${id}: error frame body of ${len} bytes is over the ${ERROR_BODY_CAP} cap`
    c.bodyError = Buffer.alloc(len)
  } else if (len !== range) {
    return `conn ${c.index} id ${id}: reply length ${len} (expected ${range} for offset ${c.offsets[slot]})`
  } else {
    c.bodyError = null
  }
  c.bodySlot = slot
  c.bodyLen = len
  c.bodyLeft = len
  c.inBody = true
  return null
}
