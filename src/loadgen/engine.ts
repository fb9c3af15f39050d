/**
 * The load generator's hot loop: one thread's share of the connections, each
 * keeping `depth` GetRange requests in flight (closed loop).
 *
 * Deliberately plain TypeScript with callbacks rather than Effect: it runs once
 * per received chunk at gigabytes per second. What makes it fast enough to
 * stand next to the C `pound` client:
 * - one shared read buffer per thread (`onread`), so no Buffer per chunk;
 *   payload bytes are only counted (or compared with --verify), never copied;
 * - headers parsed in place when whole, byte-by-byte only across chunk edges;
 * - request frames pre-encoded once; only request id and offset are patched;
 * - one clock read per chunk, and one socket write per chunk for all the
 *   requests that chunk's completions released.
 * Replies are matched by request id (slot = id & mask) as they arrive, in any
 * order, so a multiplexed server is measured as faithfully as a pipelined one.
 */
import * as net from "node:net"
import { readFileSync } from "node:fs"
import { performance } from "node:perf_hooks"
import hdr from "hdr-histogram-js"
import { Flags, HEADER_LEN, MAGIC, MsgType, PROTOCOL_VERSION } from "../protocol/frame.js"
import { LinearRecorder } from "./histogram.js"

const MAGIC_HI = MAGIC >>> 8
const MAGIC_LO = MAGIC & 0xff
const VERSION = PROTOCOL_VERSION
const TYPE_GET_RANGE = MsgType.GetRange
const FLAG_ERROR = Flags.Error
/** Longest error body accepted; a longer one is a protocol violation. */
const ERROR_BODY_CAP = 64 * 1024

/** A pre-encoded GetRange frame: request id at byte 8, offset (u64 LE) at `offsetPos`. */
export interface FrameTemplate {
  readonly bytes: Uint8Array
  readonly offsetPos: number
}

/** What one thread runs; structured-cloneable so it can be `workerData`. */
export interface ThreadSpec {
  readonly host: string
  readonly port: number
  /** Global indices of this thread's connections (they seed the RNG and split the cold region). */
  readonly conns: ReadonlyArray<number>
  readonly totalConns: number
  readonly depth: number
  readonly range: number
  /** Hit traffic: offsets are uniform multiples of `range` in `[0, hotBlocks × range)`. */
  readonly hot: FrameTemplate
  readonly hotBlocks: number
  /** Fraction of requests sent to the cold region (0 = all hits). */
  readonly missShare: number
  /** Cold traffic: frame for the miss object (may be the hot object itself). */
  readonly miss: FrameTemplate | null
  /** First cold offset; connection c takes `missStart + (c + k × totalConns) × missStride`, k = 0, 1, … */
  readonly missStart: number
  readonly missStride: number
  /** Cold offsets must satisfy `offset + range ≤ missEnd`. */
  readonly missEnd: number
  /** True when cold requests name the same object as hot ones (so --verify applies to them too). */
  readonly missSameObject: boolean
  readonly seed: number
  /** Local file holding the hot object's bytes; every payload byte is compared with it. */
  readonly verify: string | null
  readonly failFast: boolean
  readonly readBufferBytes: number
  /** Warmup ramp: requests in flight per connection grow from 1 to `depth` over this many ms (0: none). */
  readonly rampMs: number
}

/** Absolute times (ms since the epoch, fractional) shared by all threads. */
export interface StartSignal {
  readonly measureFromMs: number
  readonly measureUntilMs: number
  readonly drainTimeoutMs: number
}

export interface ThreadResult {
  /** Successful replies completed inside the measured window. */
  readonly samples: number
  readonly hitSamples: number
  readonly missSamples: number
  /** Successful replies completed at any time (warmup and drain included). */
  readonly replies: number
  /** Payload bytes of successful replies (any time). */
  readonly bytes: number
  /** Payload bytes of successful replies inside the window. */
  readonly measuredBytes: number
  readonly errors: number
  readonly errorFrames: number
  /** Socket reads and writes inside the window: Node pays a JS callback per read and stream work per write. */
  readonly windowReads: number
  readonly windowWrites: number
  readonly firstError: string | null
  /** Compressed HdrHistograms (µs) of hits and misses inside the window. */
  readonly hitHistogram: string
  readonly missHistogram: string
}

/** mulberry32: a tiny, fast 32-bit generator; each connection has its own stream. */
const nextRandom = (state: Uint32Array, i: number): number => {
  let t = (state[i] = (state[i]! + 0x6d2b79f5) >>> 0)
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const EMPTY = Buffer.alloc(0)
const KIND_HIT = 0
const KIND_MISS = 1

interface Conn {
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

/**
 * Connects every connection of the spec, then waits for `start` and runs until
 * the window ends and all requests have drained (or the drain times out).
 */
export const runThread = async (
  spec: ThreadSpec,
  connected: () => Promise<StartSignal>,
  progress: Float64Array | null,
  progressSlot: number
): Promise<ThreadResult> => {
  const { depth, range } = spec
  const slotBits = Math.max(1, Math.ceil(Math.log2(depth)))
  const slotMask = (1 << slotBits) - 1
  const seqLimit = 2 ** (32 - slotBits)
  const readBuf = Buffer.allocUnsafe(spec.readBufferBytes)
  const hot = Buffer.from(spec.hot.bytes)
  const miss = spec.miss ? Buffer.from(spec.miss.bytes) : null
  const maxReq = Math.max(hot.length, miss ? miss.length : 0)
  const fixedFrames = miss === null || miss.length === hot.length
  const verify = spec.verify ? readFileSync(spec.verify) : null
  const hitHist = new LinearRecorder()
  const missHist = spec.missShare > 0 ? new LinearRecorder() : null
  const scratchHist = new LinearRecorder()
  const rng = new Uint32Array(spec.conns.length)
  spec.conns.forEach((c, i) => {
    rng[i] = (Math.imul(spec.seed >>> 0, 0x9e3779b1) ^ Math.imul(c + 1, 0x85ebca6b)) >>> 0
  })

  let sending = false
  let measureFrom = Infinity
  let measureUntil = Infinity
  let samples = 0
  let hitSamples = 0
  let missSamples = 0
  let replies = 0
  // Byte totals pass 2^31 within a second; kept in a Float64Array so the optimised hot
  // loop never starts on small-integer arithmetic and deopts (twice, mid-window) when they do.
  const byteCounts = new Float64Array(2)
  const BYTES = 0
  const MEASURED_BYTES = 1
  let errors = 0
  let errorFrames = 0
  let windowReads = 0
  let windowWrites = 0
  /** 1 while `now` is inside the measured window, else 0 (a number, to count with). */
  let inWindow = 0
  let firstError: string | null = null
  let draining = false
  let resolveDone: () => void = () => {}
  const done = new Promise<void>((resolve) => (resolveDone = resolve))

  const fail = (message: string): void => {
    errors++
    if (firstError === null) firstError = message
    if (spec.failFast) sending = false
  }

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
  for (const c of conns) c.out = Buffer.allocUnsafe(depth * maxReq)

  const allIdle = (): boolean => {
    for (const c of conns) if (!c.dead && c.inflight > 0) return false
    return true
  }
  const allDead = (): boolean => conns.every((c) => c.dead)
  const checkDrained = (): void => {
    if ((draining && allIdle()) || allDead()) resolveDone()
  }

  const kill = (c: Conn): void => {
    if (c.dead) return
    c.dead = true
    c.inflight = 0
    c.active.fill(0)
    c.socket?.destroy()
    checkDrained()
  }

  /** Fills `slot` with a fresh request and appends its frame to the pending output. */
  const issue = (c: Conn, slot: number, now: number): void => {
    let tmpl = hot
    let offsetPos = spec.hot.offsetPos
    let kind = KIND_HIT
    let offset: number
    if (spec.missShare > 0 && nextRandom(rng, c.local) < spec.missShare) {
      offset = spec.missStart + c.coldNext * spec.missStride
      if (offset + range > spec.missEnd) {
        fail(
          `cold region exhausted on conn ${c.index}: offset ${offset} + range ${range} passes ${spec.missEnd}; ` +
            `give a larger miss object, a smaller --miss-stride, or a lower --miss-share/--seconds`
        )
        sending = false
        c.active[slot] = 0
        c.inflight--
        return
      }
      c.coldNext += spec.totalConns
      tmpl = miss!
      offsetPos = spec.miss!.offsetPos
      kind = KIND_MISS
    } else {
      offset = Math.floor(nextRandom(rng, c.local) * spec.hotBlocks) * range
    }
    const id = ((c.nextSeq * (slotMask + 1)) | slot) >>> 0
    c.nextSeq = c.nextSeq + 1 === seqLimit ? 0 : c.nextSeq + 1
    c.ids[slot] = id
    c.t0[slot] = now
    c.offsets[slot] = offset
    c.kinds[slot] = kind
    const out = c.out
    const at = c.outLen
    // With one frame length, position k of the batch always starts at k × length,
    // so the template is copied only when that position last held the other kind.
    if (!fixedFrames || c.posKind[c.pending] !== kind) {
      tmpl.copy(out, at)
      if (fixedFrames) c.posKind[c.pending] = kind
    }
    out[at + 8] = id >>> 24
    out[at + 9] = (id >>> 16) & 0xff
    out[at + 10] = (id >>> 8) & 0xff
    out[at + 11] = id & 0xff
    let lo = offset % 4294967296
    let hi = (offset - lo) / 4294967296
    const p = at + offsetPos
    for (let i = 0; i < 4; i++, lo >>>= 8, hi >>>= 8) {
      out[p + i] = lo & 0xff
      out[p + 4 + i] = hi & 0xff
    }
    c.outLen = at + tmpl.length
    c.pending++
  }

  const flush = (c: Conn): void => {
    c.queued = false
    if (c.outLen === 0 || c.dead) return
    const socket = c.socket!
    windowWrites += inWindow
    socket.write(c.out.subarray(0, c.outLen))
    c.outLen = 0
    c.pending = 0
    // A write the kernel took whole is finished with the buffer; a partial one still
    // holds it in libuv's queue, so the connection moves on to a fresh one.
    if (socket.writableLength > 0) {
      c.out = Buffer.allocUnsafe(c.out.length)
      c.posKind.fill(-1)
    }
  }

  // Like pound, requests released by every read of one event-loop turn go out in one
  // write per connection: a write per read costs a syscall and stream work per chunk.
  let dirty: Array<Conn> = []
  let spare: Array<Conn> = []
  let flushScheduled = false
  const flushAll = (): void => {
    flushScheduled = false
    const list = dirty
    dirty = spare
    for (let i = 0; i < list.length; i++) flush(list[i]!)
    list.length = 0
    spare = list
  }
  const scheduleFlush = (c: Conn): void => {
    if (c.queued || c.outLen === 0) return
    c.queued = true
    dirty.push(c)
    if (!flushScheduled) {
      flushScheduled = true
      setImmediate(flushAll)
    }
  }

  const complete = (c: Conn, slot: number, ok: boolean, now: number): void => {
    if (ok) {
      replies++
      byteCounts[BYTES] += c.bodyLen
      // Warmup replies take the same path into a scratch recorder: code first run at the
      // window's start would deoptimise there and be recompiled on the measured core.
      const w = inWindow
      const us = Math.floor((now - c.t0[slot]!) * 1000)
      samples += w
      byteCounts[MEASURED_BYTES] += w * c.bodyLen
      if (c.kinds[slot] === KIND_HIT) {
        hitSamples += w
        ;(w === 1 ? hitHist : scratchHist).record(us)
      } else {
        missSamples += w
        ;(w === 1 ? missHist! : scratchHist).record(us)
      }
    }
    if (sending && now < measureUntil) {
      issue(c, slot, now)
    } else {
      c.active[slot] = 0
      c.inflight--
    }
  }

  /** Validates a whole header; returns false when the connection had to be dropped. */
  const onHeader = (c: Conn, h: Buffer, at: number): boolean => {
    if (h[at] !== MAGIC_HI || h[at + 1] !== MAGIC_LO || h[at + 2] !== VERSION) {
      fail(`conn ${c.index}: bad reply header ${h.toString("hex", at, at + 4)} (want magic 544c version 01)`)
      kill(c)
      return false
    }
    const type = h[at + 3]!
    const flags = (h[at + 4]! << 8) | h[at + 5]!
    const id = ((h[at + 8]! << 24) | (h[at + 9]! << 16) | (h[at + 10]! << 8) | h[at + 11]!) >>> 0
    const len = ((h[at + 12]! << 24) | (h[at + 13]! << 16) | (h[at + 14]! << 8) | h[at + 15]!) >>> 0
    const slot = id & slotMask
    if (slot >= depth || c.active[slot] === 0 || c.ids[slot] !== id) {
      fail(`conn ${c.index}: reply id ${id} matches no request in flight`)
      kill(c)
      return false
    }
    if (type !== TYPE_GET_RANGE) {
      fail(`conn ${c.index} id ${id}: reply message type ${type} (expected ${TYPE_GET_RANGE} GetRange)`)
      kill(c)
      return false
    }
    if ((flags & FLAG_ERROR) !== 0) {
      if (len > ERROR_BODY_CAP) {
        fail(`conn ${c.index} id ${id}: error frame body of ${len} bytes is over the ${ERROR_BODY_CAP} cap`)
        kill(c)
        return false
      }
      c.bodyError = Buffer.alloc(len)
    } else if (len !== range) {
      fail(`conn ${c.index} id ${id}: reply length ${len} (expected ${range} for offset ${c.offsets[slot]})`)
      kill(c)
      return false
    } else {
      c.bodyError = null
    }
    c.bodySlot = slot
    c.bodyLen = len
    c.bodyLeft = len
    c.inBody = true
    return true
  }

  const onBodyDone = (c: Conn, now: number): void => {
    c.inBody = false
    const slot = c.bodySlot
    if (c.bodyError !== null) {
      errorFrames++
      fail(
        `error frame from server (conn ${c.index}, id ${c.ids[slot]}, offset ${c.offsets[slot]}): ${c.bodyError.toString("utf8")}`
      )
      c.bodyError = null
      complete(c, slot, false, now)
    } else {
      complete(c, slot, true, now)
    }
  }

  const onData = (c: Conn, n: number, buf: Buffer): void => {
    const now = performance.now()
    inWindow = +(now >= measureFrom) & +(now < measureUntil)
    windowReads += inWindow
    let p = 0
    while (p < n) {
      if (!c.inBody) {
        if (c.hgot === 0 && n - p >= HEADER_LEN) {
          if (!onHeader(c, buf, p)) return
          p += HEADER_LEN
        } else {
          const take = Math.min(HEADER_LEN - c.hgot, n - p)
          buf.copy(c.hdr, c.hgot, p, p + take)
          c.hgot += take
          p += take
          if (c.hgot < HEADER_LEN) break
          c.hgot = 0
          if (!onHeader(c, c.hdr, 0)) return
        }
        if (c.bodyLeft === 0) {
          onBodyDone(c, now)
          continue
        }
      }
      const take = c.bodyLeft < n - p ? c.bodyLeft : n - p
      if (c.bodyError !== null) {
        buf.copy(c.bodyError, c.bodyLen - c.bodyLeft, p, p + take)
      } else if (verify !== null && (c.kinds[c.bodySlot] === KIND_HIT || spec.missSameObject)) {
        const at = c.offsets[c.bodySlot]! + (c.bodyLen - c.bodyLeft)
        if (verify.compare(buf, p, p + take, at, at + take) !== 0) {
          let k = 0
          while (buf[p + k] === verify[at + k]) k++
          fail(
            `conn ${c.index} id ${c.ids[c.bodySlot]}: payload mismatch at byte ${c.bodyLen - c.bodyLeft + k} ` +
              `of range offset ${c.offsets[c.bodySlot]} (file offset ${at + k})`
          )
        }
      }
      p += take
      c.bodyLeft -= take
      if (c.bodyLeft === 0) onBodyDone(c, now)
    }
    scheduleFlush(c)
    if (progress !== null) progress[progressSlot] = replies
    if (draining && c.inflight === 0) checkDrained()
  }

  // Connect everything before the clock starts, as pound does.
  await Promise.all(
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
  ).catch((e: unknown) => {
    for (const c of conns) c.socket?.destroy()
    throw e
  })
  for (const c of conns) {
    const socket = c.socket!
    socket.on("error", (e) => {
      if (!c.dead) fail(`conn ${c.index}: ${e.message} (${c.inflight} request(s) outstanding)`)
      kill(c)
    })
    socket.on("end", () => {
      if (!c.dead && c.inflight > 0) fail(`conn ${c.index}: server closed the connection with ${c.inflight} request(s) outstanding`)
      kill(c)
    })
    socket.on("close", () => kill(c))
  }

  const signal = await connected()
  const origin = performance.timeOrigin
  measureFrom = signal.measureFromMs - origin
  measureUntil = signal.measureUntilMs - origin

  sending = true
  const rampStart = performance.now()
  let limit = spec.rampMs > 0 ? 1 : depth
  const fill = (): void => {
    const now = performance.now()
    for (const c of conns) {
      if (c.dead) continue
      for (let slot = 0; slot < depth && sending && c.inflight < limit; slot++) {
        if (c.active[slot] !== 0) continue
        c.active[slot] = 1
        c.inflight++
        issue(c, slot, now)
      }
      scheduleFlush(c)
    }
  }
  fill()
  let rampTimer: ReturnType<typeof setInterval> | undefined
  if (limit < depth) {
    rampTimer = setInterval(() => {
      const t = performance.now() - rampStart
      limit = t >= spec.rampMs ? depth : Math.max(1, Math.ceil((depth * t) / spec.rampMs))
      if (!sending || limit >= depth) clearInterval(rampTimer)
      if (sending) fill()
    }, 10)
  }

  const stopTimer = setTimeout(() => {
    sending = false
    draining = true
    checkDrained()
  }, Math.max(0, measureUntil - performance.now()))
  const drainTimer = setTimeout(() => {
    let outstanding = 0
    for (const c of conns) if (!c.dead) outstanding += c.inflight
    fail(`drain timeout: ${outstanding} request(s) still outstanding ${signal.drainTimeoutMs / 1000} s after the measured window`)
    resolveDone()
  }, Math.max(0, measureUntil - performance.now()) + signal.drainTimeoutMs)
  checkDrained()
  await done
  clearTimeout(stopTimer)
  clearTimeout(drainTimer)
  clearInterval(rampTimer)
  for (const c of conns) {
    c.dead = true
    c.socket?.destroy()
  }
  if (progress !== null) progress[progressSlot] = replies
  return {
    samples,
    hitSamples,
    missSamples,
    replies,
    bytes: byteCounts[BYTES]!,
    measuredBytes: byteCounts[MEASURED_BYTES]!,
    errors,
    errorFrames,
    windowReads,
    windowWrites,
    firstError,
    hitHistogram: hdr.encodeIntoCompressedBase64(hitHist.toHistogram()),
    missHistogram: hdr.encodeIntoCompressedBase64((missHist ?? new LinearRecorder()).toHistogram())
  }
}
