/**
 * One client connection while the raw front owns it: request heads read as they arrive (a head
 * split over reads waits for the rest, pipelined heads are answered one after another, in order),
 * each answered with one sendfile of head and body when `planRead` says the front can, else the
 * connection handed to node:http from that request on, before anything was written for it.
 */
import type * as net from "node:net"
import { s3Accesses } from "../identities.js"
import type { Services } from "../context.js"
import type { LocalSegment } from "../localBlocks.js"
import type { Payload } from "../../client/SlabPool.js"
import { dropPlan, type Plan, planRead } from "./plan.js"
import { s3RequestId } from "./requestId.js"
import { type RequestHead, scanHead } from "./requestHead.js"
import { type DateLine, renderHead } from "./responseHead.js"

/** What every connection of one front shares. */
export interface FrontShared {
  readonly g: Services
  readonly date: DateLine
  /** node:http's largest head; a longer one is node's to refuse (431). */
  readonly maxHeadBytes: number
  readonly headersTimeoutMs: number
  /** Gives the socket to node:http (its own connection listener). */
  readonly handOver: (socket: net.Socket) => void
  readonly forget: (c: FrontConnection) => void
}

/** Pipelined bytes held while a response is being sent; past this the socket is paused. */
const MAX_PENDING = 64 * 1024

const EMPTY = Buffer.alloc(0)

export class FrontConnection {
  #pending: Buffer = EMPTY
  #busy = false
  #ended = false
  /** Handed over or closed: the front no longer touches the socket. */
  #released = false
  #headTimer: ReturnType<typeof setTimeout> | undefined

  constructor(
    readonly socket: net.Socket,
    private readonly shared: FrontShared
  ) {
    socket.on("data", this.#onData)
    socket.on("end", this.#onEnd)
    socket.on("error", this.#onError)
    socket.on("close", this.#onClose)
    socket.on("timeout", this.#onTimeout)
    socket.setTimeout(shared.g.options.idleTimeoutMs)
  }

  /** Closes the connection (the gateway is stopping). */
  destroy(): void {
    this.socket.destroy()
  }

  readonly #onData = (chunk: Buffer): void => {
    this.#pending = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk])
    if (this.#busy) {
      if (this.#pending.length > MAX_PENDING) this.socket.pause()
      return
    }
    this.#pump()
  }

  readonly #onEnd = (): void => {
    this.#ended = true
    if (!this.#busy) this.#pump()
  }

  readonly #onError = (): void => {
    this.socket.destroy()
  }

  readonly #onClose = (): void => {
    this.#release()
  }

  readonly #onTimeout = (): void => {
    this.socket.destroy()
  }

  #release(): void {
    if (this.#released) return
    this.#released = true
    clearTimeout(this.#headTimer)
    const s = this.socket
    s.off("data", this.#onData)
    s.off("end", this.#onEnd)
    s.off("error", this.#onError)
    s.off("close", this.#onClose)
    s.off("timeout", this.#onTimeout)
    s.setTimeout(0)
    this.shared.forget(this)
  }

  /** node:http answers from the request at the start of the pending bytes on (nothing of it was written). */
  #handOver(): void {
    const rest = this.#pending
    this.#pending = EMPTY
    this.#release()
    const s = this.socket
    if (s.destroyed) return
    if (s.isPaused()) s.resume()
    this.shared.handOver(s)
    // Bytes read already go to node's parser first, ahead of any the socket reads from now on.
    if (rest.length > 0) s.emit("data", rest)
    if (this.#ended) s.emit("end")
  }

  /** Answers the complete heads pending, one at a time. */
  #pump(): void {
    while (!this.#busy && !this.#released) {
      const s = this.socket
      if (s.destroyed) return
      if (this.#pending.length === 0) {
        clearTimeout(this.#headTimer)
        this.#headTimer = undefined
        if (this.#ended) {
          this.#release()
          s.end()
        } else if (s.isPaused()) s.resume()
        return
      }
      const head = scanHead(this.#pending, this.#pending.length, this.shared.maxHeadBytes)
      if (head === "unusual") return this.#handOver()
      if (head === "partial") {
        // A client that ended mid-head, or one too slow to finish it, is node's to answer (400, 408).
        if (this.#ended) return this.#handOver()
        this.#headTimer ??= setTimeout(() => {
          this.#headTimer = undefined
          // While a response is out, the next pump arms it again.
          if (!this.#busy && !this.#released) this.#handOver()
        }, this.shared.headersTimeoutMs)
        if (s.isPaused()) s.resume()
        return
      }
      clearTimeout(this.#headTimer)
      this.#headTimer = undefined
      const started = performance.now()
      const g = this.shared.g
      const fd = g.local === undefined ? -1 : g.local.fdOf(s)
      const planned = planRead(g, head, fd)
      if (planned instanceof Promise) {
        this.#busy = true
        planned.then((plan) => {
          this.#busy = false
          if (plan !== undefined && (this.#released || s.destroyed)) {
            dropPlan(plan)
            return
          }
          if (this.#released) return
          this.#take(head, plan, started)
          if (!this.#busy) this.#pump()
        })
        return
      }
      this.#take(head, planned, started)
    }
  }

  #take(head: RequestHead, plan: Plan | undefined, started: number): void {
    if (plan === undefined) return this.#handOver()
    this.#pending = this.#pending.length === head.length ? EMPTY : this.#pending.subarray(head.length)
    this.#busy = true
    const sent = this.#serve(head, plan, started)
    if (sent === true) this.#done(plan, true)
    else
      sent.then((ok) => {
        this.#done(plan, ok)
        if (!this.#busy) this.#pump()
      })
  }

  #done(plan: Plan, ok: boolean): void {
    this.#busy = false
    const s = this.socket
    if (!ok || s.destroyed) {
      this.#release()
      s.destroy()
      return
    }
    if (!plan.keepAlive) {
      this.#release()
      s.end()
      return
    }
    s.setTimeout(this.shared.g.options.keepAliveTimeoutMs)
  }

  /** Writes the head (and the body by sendfile); true when done at once, else whether all went. */
  #serve(head: RequestHead, plan: Plan, started: number): true | Promise<boolean> {
    const { g, date } = this.shared
    const s = this.socket
    g.counters.requests++
    g.counters.rawFront++
    if (g.options.auth) g.metrics?.authentication(true)
    const requestId = s3RequestId()
    const bytes = renderHead(
      plan.template,
      { partial: plan.partial, requestId, length: plan.length, contentRange: plan.contentRange, keepAlive: plan.keepAlive },
      date.line,
      Math.floor(g.options.keepAliveTimeoutMs / 1000)
    )
    const headersAt = performance.now()
    // A cut body counts what node's path counts for its sendfile bodies: the socket's own writes, none.
    const finish = (ok: boolean) => this.#record(head, plan, requestId, started, headersAt, ok ? plan.length : 0)
    if (plan.route !== undefined) return this.#stream(plan, bytes, finish)
    if (plan.pieces.length === 0) {
      s.write(bytes)
      finish(true)
      return true
    }
    const local = g.local!
    g.counters.localBodies++
    const segments: Array<LocalSegment> = []
    for (const p of plan.pieces) for (const seg of p.segments) segments.push(seg)
    const releaseAll = () => {
      for (const p of plan.pieces) p.release()
    }
    // A slow reader's sends re-arm this timeout as they progress.
    s.setTimeout(g.options.idleTimeoutMs)
    const fd = local.fdOf(s)
    const r = fd < 0 ? Promise.resolve(false) : local.send(s, fd, segments, bytes)
    const settle = (ok: boolean): boolean => {
      releaseAll()
      if (ok) {
        g.counters.bytesOut += plan.length
        g.counters.localBytes += plan.length
      } else g.counters.aborted++
      finish(ok)
      return ok
    }
    if (r === true) {
      settle(true)
      return true
    }
    return r.then(settle, () => settle(false))
  }

  /** A body through the route (not resident here): the head, then each run as the socket takes it. */
  async #stream(plan: Plan, head: Buffer, finish: (ok: boolean) => void): Promise<boolean> {
    const { g } = this.shared
    const s = this.socket
    const { reader } = plan.route!
    let run: Payload | undefined = plan.route!.first
    let ok = true
    s.setTimeout(g.options.idleTimeoutMs)
    s.cork()
    s.write(head)
    let corked = true
    try {
      while (run !== undefined) {
        g.counters.bytesOut += run.length
        const more = writeRun(s, run)
        if (corked) {
          corked = false
          s.uncork()
        }
        if (!more && !(await drained(s))) {
          ok = false
          break
        }
        run = await reader.next()
      }
    } catch {
      // The head promised bytes that cannot come: a short body tells the client, never wrong bytes.
      ok = false
    } finally {
      if (corked) s.uncork()
      reader.close()
    }
    if (!ok) g.counters.aborted++
    finish(ok)
    return ok
  }

  /** The metrics and audit line node's path records for the same response. */
  #record(head: RequestHead, plan: Plan, requestId: string, started: number, headersAt: number, bytes: number): void {
    const g = this.shared.g
    const status = plan.partial ? 206 : 200
    const end = performance.now()
    const read = plan.method === "GET"
    g.metrics?.observe({
      protocol: "s3",
      operation: read ? "read" : "stat",
      route: read ? g.route.name : "origin",
      status,
      responseBytes: bytes,
      headersSeconds: (headersAt - started) / 1000,
      totalSeconds: (end - started) / 1000
    })
    if (g.audit !== undefined) {
      const accesses = s3Accesses(plan.method, plan.bucket, plan.rawKey, new URLSearchParams(plan.rawQuery), head.headers)
      const first = accesses?.[0]
      g.audit.write({
        requestId,
        protocol: "s3",
        principal: g.options.auth ? "anonymous" : "unauthenticated",
        operation: first?.operation ?? (accesses === undefined ? `unsupported ${plan.method}` : "account"),
        bucket: first?.namespace ?? "",
        key: first?.key ?? "",
        status,
        bytes,
        decision: "allow"
      })
    }
  }
}

/** Writes a run's views; the run goes back to its pool once the socket has sent them. False: wait for drain. */
const writeRun = (s: net.Socket, run: Payload): boolean => {
  const views = run.views
  const last = views.length - 1
  if (last < 0) return true
  for (let i = 0; i < last; i++) s.write(views[i]!)
  // After a failed write the views are dropped, never recycled while the socket might still read them.
  return s.write(views[last]!, (err) => {
    if (err == null) run.release()
  })
}

const drained = (s: net.Socket): Promise<boolean> =>
  new Promise((resolve) => {
    if (s.destroyed) return resolve(false)
    const done = (ok: boolean) => {
      s.off("drain", onDrain)
      s.off("close", onClose)
      resolve(ok)
    }
    const onDrain = () => done(true)
    const onClose = () => done(false)
    s.on("drain", onDrain)
    s.on("close", onClose)
  })
