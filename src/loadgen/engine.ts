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
import { readFileSync } from "node:fs"
import { performance } from "node:perf_hooks"
import hdr from "hdr-histogram-js"
import { HEADER_LEN } from "../protocol/frame.js"
import { type Conn, connectAll, KIND_HIT, KIND_MISS, newConns, nextRandom, seedStreams, startReply } from "./conn.js"
import { LinearRecorder } from "./histogram.js"
import type { StartSignal, ThreadResult, ThreadSpec } from "./threadMessages.js"

export type { FrameTemplate, StartSignal, ThreadResult, ThreadSpec } from "./threadMessages.js"

/** A thread whose connections are all up: `run` once, then `close` (also safe without a run). */
export interface ConnectedThread {
  readonly run: (signal: StartSignal) => Promise<ThreadResult>
  readonly close: () => void
}

/**
 * Connects every connection of the spec; the returned thread's `run` waits for the
 * signal's start and runs until the window ends and all requests have drained (or
 * the drain times out).
 */
export const connectThread = async (
  spec: ThreadSpec,
  progress: Float64Array | null,
  progressSlot: number
): Promise<ConnectedThread> => {
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
  const rng = seedStreams(spec)

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

  const conns = newConns(spec, maxReq)

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
    const problem = startReply(c, h, at, depth, slotMask, range)
    if (problem === null) return true
    fail(problem)
    kill(c)
    return false
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

  await connectAll(spec, conns, readBuf, onData)
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

  const closeAll = (): void => {
    for (const c of conns) {
      c.dead = true
      c.socket?.destroy()
    }
  }
  let started = false
  const run = async (signal: StartSignal): Promise<ThreadResult> => {
    if (started) throw new Error("this loadgen thread already ran; connect a new one for another run")
    started = true
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
    closeAll()
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
  return { run, close: closeAll }
}
