/**
 * Data-plane connections to workers: a small pool per worker address, each
 * connection pipelined (many GetRange requests in flight, replies matched by
 * request id). A request goes to the pool's least-loaded usable connection; a
 * new connection is opened while every existing one is busy and the pool is
 * below its size. A failed connection (closed, short body, undecodable reply,
 * a request that timed out on it) is discarded and replaced on demand.
 *
 * `fetch` is the callback-based hot path (reply bytes as views into pooled read
 * buffers, no fiber); `getRange` is the Effect wrapper returning a copy.
 */
import { Data, Duration, Effect } from "effect"
import type { ObjectId } from "../core/ids.js"
import {
  DataErrorCode,
  DEFAULT_CAPS,
  decodeErrorPayload,
  encodeFrame,
  encodeGetCachedRangeFrame,
  encodeGetPinnedRangeFrame,
  encodeGetRangeFrame,
  encodeTenantScopedRange,
  Flags,
  MsgType,
  type FrameCaps,
  type TenantId
} from "../protocol/index.js"
import { DataConnection, type DataReply } from "./DataConnection.js"
import type { ControlTlsFiles } from "../transport/controlTls.js"
import { type Payload, SLAB_BYTES, SlabPool } from "./SlabPool.js"

/** The worker could not be reached or broke the connection; another replica may work. */
export class WorkerUnavailable extends Data.TaggedError("WorkerUnavailable")<{
  readonly address: string
  readonly detail: string
}> {
  override get message() {
    return `worker ${this.address} unavailable: ${this.detail}`
  }
}

/** The worker answered with an error frame; `detail` is its message verbatim, `code` its class (Unknown for an untyped reply). */
export class WorkerRejected extends Data.TaggedError("WorkerRejected")<{
  readonly address: string
  readonly detail: string
  readonly code: DataErrorCode
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
  /** Read buffers shared by every connection (default: 256 KiB slabs, 64 kept free). */
  readonly slabs?: SlabPool | undefined
  /** Tenant named by every request (sent as GetRangeTenant / GetCachedRangeTenant); empty or absent = none. */
  readonly tenant?: string | undefined
  /** Dial workers over TLS with these files (read anew for each connection, so rotated ones apply). */
  readonly tls?: ControlTlsFiles | undefined
}

export type FetchResult = { readonly ok: true; readonly payload: Payload } | { readonly ok: false; readonly error: WorkerRequestError }

/** Stops a `fetch` whose result is no longer wanted; its callback is not called afterwards. */
export type CancelFetch = () => void

export class WorkerPool {
  private readonly pools = new Map<string, Array<DataConnection>>()
  readonly slabs: SlabPool
  private nextId = 1
  private readonly caps: FrameCaps
  private readonly requestTimeoutMs: number
  private readonly connectTimeoutMs: number
  private closed = false
  /** The tenant every request names (Talon's tenant-scoped types 8 and 9), if the client has one. */
  private readonly tenant: TenantId | undefined

  constructor(private readonly options: WorkerPoolOptions) {
    this.tenant = options.tenant === undefined || options.tenant === "" ? undefined : { _tag: "Named", name: options.tenant }
    this.caps = { ...DEFAULT_CAPS, getRange: options.maxRequestBytes, get: options.maxRequestBytes }
    this.requestTimeoutMs = Duration.toMillis(options.requestTimeout)
    this.connectTimeoutMs = Duration.toMillis(options.connectTimeout)
    this.slabs = options.slabs ?? new SlabPool(SLAB_BYTES, 64)
  }

  /** Open connections per worker address (for status and tests). */
  get connectionCounts(): Record<string, number> {
    const out: Record<string, number> = {}
    for (const [address, pool] of this.pools) out[address] = pool.filter((c) => c.usable).length
    return out
  }

  /**
   * Exactly `length` bytes of `object` from absolute `offset`, served by the worker at
   * `address`, as views into the pool's read buffers (the caller releases the payload).
   * `done` is called exactly once unless cancelled. A reply not in within the request
   * timeout closes its connection: replies on a pipelined connection come in order, so
   * a stuck one blocks the rest. With `version` the request is a GetPinnedRange: the worker
   * answers only with bytes of that version (or a VersionMismatch rejection); with `cacheOnly`
   * too it is Talon's GetCachedRange: resident bytes of that version or a CacheMiss rejection,
   * and the worker never asks the origin.
   */
  fetch(
    address: string,
    object: ObjectId,
    offset: number,
    length: number,
    done: (result: FetchResult) => void,
    version?: string,
    cacheOnly = false
  ): CancelFetch {
    if (this.closed) {
      done({ ok: false, error: new WorkerUnavailable({ address, detail: "client closed" }) })
      return noop
    }
    const connection = this.pick(address)
    const id = this.allocateId()
    let settled = false
    const finish = (result: FetchResult) => {
      if (settled) {
        if (result.ok) result.payload.release()
        return
      }
      settled = true
      clearTimeout(timer)
      done(result)
    }
    const timer = setTimeout(() => {
      if (settled) return
      connection.close()
      finish({ ok: false, error: new WorkerUnavailable({ address, detail: `no reply within ${this.requestTimeoutMs} ms` }) })
    }, this.requestTimeoutMs)
    const tenant = this.tenant
    const frame =
      version === undefined
        ? tenant === undefined
          ? encodeGetRangeFrame(id, { object, offset, len: length })
          : encodeFrame(MsgType.GetRangeTenant, id, encodeTenantScopedRange({ tenant, request: { object, offset, len: length } }))
        : (cacheOnly ? encodeGetCachedRangeFrame : encodeGetPinnedRangeFrame)(id, { object, version, offset, len: length }, tenant)
    connection.send(id, frame, (reply: DataReply) => {
      if (!reply.ok) return finish({ ok: false, error: new WorkerUnavailable({ address, detail: `${reply.kind}: ${reply.detail}` }) })
      const { header, payload } = reply
      if ((header.flags & Flags.Error) !== 0) {
        const e = decodeErrorPayload(payload.copyOut())
        payload.release()
        return finish({ ok: false, error: new WorkerRejected({ address, detail: e.message, code: e.code }) })
      }
      if (header.type !== MsgType.GetRange) {
        payload.release()
        connection.close()
        return finish({ ok: false, error: new WorkerUnavailable({ address, detail: `answered GetRange with message type ${header.type}` }) })
      }
      if (payload.length !== length) {
        payload.release()
        return finish({ ok: false, error: new WorkerUnavailable({ address, detail: `sent ${payload.length} bytes for a ${length}-byte range` }) })
      }
      finish({ ok: true, payload })
    })
    return () => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      connection.cancel(id)
    }
  }

  /** `fetch` as an Effect, the bytes copied out into a buffer the caller owns. */
  getRange(address: string, object: ObjectId, offset: number, length: number): Effect.Effect<Uint8Array, WorkerRequestError> {
    return Effect.async<Uint8Array, WorkerRequestError>((resume) => {
      const cancel = this.fetch(address, object, offset, length, (r) => {
        if (!r.ok) return resume(Effect.fail(r.error))
        const bytes = r.payload.copyOut()
        resume(Effect.succeed(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)))
      })
      return Effect.sync(cancel)
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

  private pick(address: string): DataConnection {
    let pool = this.pools.get(address)
    if (pool === undefined) {
      pool = []
      this.pools.set(address, pool)
    }
    for (let i = pool.length - 1; i >= 0; i--) if (!pool[i]!.usable) pool.splice(i, 1)
    let best: DataConnection | undefined
    for (const c of pool) if (best === undefined || c.inFlight < best.inFlight) best = c
    if (best === undefined || (best.inFlight > 0 && pool.length < this.options.connectionsPerWorker)) {
      best = new DataConnection(address, { caps: this.caps, connectTimeoutMs: this.connectTimeoutMs, pool: this.slabs, tls: this.options.tls })
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

const noop: CancelFetch = () => {}
