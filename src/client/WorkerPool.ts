/**
 * Data-plane connections to workers: a small pool per worker address, each
 * connection pipelined (many GetRange requests in flight, replies matched by
 * request id). A request goes to the pool's least-loaded usable connection; a
 * new connection is opened while every existing one is busy and the pool is
 * below its size. A failed connection (closed, short body, undecodable reply,
 * a request that timed out on it) is discarded and replaced on demand.
 */
import { Data, Duration, Effect } from "effect"
import type { ObjectId } from "../core/ids.js"
import { DEFAULT_CAPS, Flags, MsgType, encodeGetRangeFrame, type FrameCaps } from "../protocol/index.js"
import { FramedConnection, type Reply } from "./FramedConnection.js"

/** The worker could not be reached or broke the connection; another replica may work. */
export class WorkerUnavailable extends Data.TaggedError("WorkerUnavailable")<{
  readonly address: string
  readonly detail: string
}> {
  override get message() {
    return `worker ${this.address} unavailable: ${this.detail}`
  }
}

/** The worker answered with an error frame; `detail` is its message verbatim. */
export class WorkerRejected extends Data.TaggedError("WorkerRejected")<{
  readonly address: string
  readonly detail: string
}> {
  override get message() {
    return `worker ${this.address}: ${this.detail}`
  }
}

export type WorkerRequestError = WorkerUnavailable | WorkerRejected

export interface WorkerPoolOptions {
  readonly connectionsPerWorker: number
  readonly requestTimeout: Duration.DurationInput
  readonly connectTimeout: Duration.DurationInput
  /** Largest GetRange body this client asks for (the reply cap). */
  readonly maxRequestBytes: number
}

export class WorkerPool {
  private readonly pools = new Map<string, Array<FramedConnection>>()
  private nextId = 1
  private readonly caps: FrameCaps
  private readonly requestTimeoutMs: number
  private readonly connectTimeoutMs: number
  private closed = false

  constructor(private readonly options: WorkerPoolOptions) {
    this.caps = { ...DEFAULT_CAPS, getRange: options.maxRequestBytes, get: options.maxRequestBytes }
    this.requestTimeoutMs = Duration.toMillis(options.requestTimeout)
    this.connectTimeoutMs = Duration.toMillis(options.connectTimeout)
  }

  /** Open connections per worker address (for status and tests). */
  get connectionCounts(): Record<string, number> {
    const out: Record<string, number> = {}
    for (const [address, pool] of this.pools) out[address] = pool.filter((c) => c.usable).length
    return out
  }

  /** Exactly `length` bytes of `object` from absolute `offset`, served by the worker at `address`. */
  getRange(address: string, object: ObjectId, offset: number, length: number): Effect.Effect<Uint8Array, WorkerRequestError> {
    return Effect.suspend(() => {
      if (this.closed) return Effect.fail(new WorkerUnavailable({ address, detail: "client closed" }))
      const connection = this.pick(address)
      const id = this.allocateId()
      const frame = encodeGetRangeFrame(id, { object, offset, len: length })
      return Effect.async<Uint8Array, WorkerRequestError>((resume) => {
        connection.send(id, frame, (reply: Reply) => {
          if (!reply.ok) {
            resume(Effect.fail(new WorkerUnavailable({ address, detail: `${reply.kind}: ${reply.detail}` })))
            return
          }
          const { header, payload } = reply.frame
          if ((header.flags & Flags.Error) !== 0) {
            resume(Effect.fail(new WorkerRejected({ address, detail: payload.toString("utf8") })))
          } else if (header.type !== MsgType.GetRange) {
            connection.close()
            resume(
              Effect.fail(new WorkerUnavailable({ address, detail: `answered GetRange with message type ${header.type}` }))
            )
          } else if (payload.length !== length) {
            resume(
              Effect.fail(
                new WorkerUnavailable({ address, detail: `sent ${payload.length} bytes for a ${length}-byte range` })
              )
            )
          } else {
            resume(Effect.succeed(new Uint8Array(payload.buffer, payload.byteOffset, payload.byteLength)))
          }
        })
        return Effect.sync(() => connection.cancel(id))
      }).pipe(
        Effect.timeoutFail({
          duration: Duration.millis(this.requestTimeoutMs),
          onTimeout: () => {
            // Replies on a pipelined connection are in order: a stuck one blocks the rest, so drop it.
            connection.close()
            return new WorkerUnavailable({ address, detail: `no reply within ${this.requestTimeoutMs} ms` })
          }
        })
      )
    })
  }

  /** Closes every connection to `address` (after the worker left the membership). */
  forget(address: string): void {
    const pool = this.pools.get(address)
    if (pool === undefined) return
    this.pools.delete(address)
    for (const c of pool) c.close()
  }

  close(): void {
    this.closed = true
    for (const address of [...this.pools.keys()]) this.forget(address)
  }

  private pick(address: string): FramedConnection {
    let pool = this.pools.get(address)
    if (pool === undefined) {
      pool = []
      this.pools.set(address, pool)
    }
    for (let i = pool.length - 1; i >= 0; i--) if (!pool[i]!.usable) pool.splice(i, 1)
    let best: FramedConnection | undefined
    for (const c of pool) if (best === undefined || c.inFlight < best.inFlight) best = c
    if (best === undefined || (best.inFlight > 0 && pool.length < this.options.connectionsPerWorker)) {
      best = new FramedConnection(address, { caps: this.caps, connectTimeoutMs: this.connectTimeoutMs })
      pool.push(best)
    }
    return best
  }

  private allocateId(): number {
    const id = this.nextId
    this.nextId = this.nextId >= 0xffffffff ? 1 : this.nextId + 1
    return id
  }
}
