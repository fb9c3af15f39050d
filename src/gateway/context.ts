/**
 * What a gateway request handler works with: the request (raw path and query kept
 * for signature checks), the services, and helpers that write with backpressure,
 * read bodies under a size limit and run effects under the request's deadline.
 */
import type { GatewayMetrics } from "./metrics.js"
import type { IncomingMessage, ServerResponse } from "node:http"
import { Transform, type TransformCallback, Writable } from "node:stream"
import { pipeline } from "node:stream/promises"
import { Effect, Either, Runtime } from "effect"
import type { BackendStoreShape } from "../backend/BackendStore.js"
import type { Payload } from "../client/SlabPool.js"
import type { HttpCtx } from "../http/context.js"
import type { GatewayOptions } from "./config.js"
import type { LocalBlocksShape } from "./localBlocks.js"
import type { RemoteBodies } from "./remoteBody.js"
import type { OriginHttpShape } from "./OriginHttp.js"
import type { RouteShape } from "./Route.js"
import type { OriginStatCache } from "./originStatCache.js"
import type { PrincipalStore } from "./principalStore.js"
import type { AuditLog } from "./audit.js"
import type { Principal } from "./principals.js"
import type { GatewaySpans } from "./spans.js"
import type { Tracer } from "effect"

export interface GatewayCounters {
  requests: number
  rejectedBusy: number
  bytesOut: number
  errors: number
  /** Responses aborted after their head was sent (the body could not be completed). */
  aborted: number
  /** Responses whose body came from the co-located worker's blocks by sendfile, and those bytes. */
  localBodies: number
  localBytes: number
  /** Responses whose body was relayed from workers by splice, and those bytes. */
  remoteBodies: number
  remoteBytes: number
  /** Requests the raw front answered itself (front/), outside node:http. */
  rawFront: number
}

export interface Services {
  readonly options: GatewayOptions
  readonly backend: BackendStoreShape
  readonly route: RouteShape
  readonly origin: OriginHttpShape
  readonly stats: OriginStatCache
  readonly runtime: Runtime.Runtime<never>
  readonly counters: GatewayCounters
  /** The service's Clock, read synchronously on the request path (signature windows, body deadlines). */
  readonly now: () => number
  /** Talon's gateway families (metrics.ts), for the admin port's /metrics. */
  readonly metrics?: GatewayMetrics
  /** The co-located worker's resident blocks (absent: every read goes through the route). */
  readonly local?: LocalBlocksShape
  /** Worker bodies relayed socket-to-socket (absent: the route's buffers carry them). */
  readonly remote?: RemoteBodies
  /** Base URL clients reach the gateway at (for Azure's ServiceEndpoint). */
  url: string
  /** Principals from identity files with their grants (principalStore.ts), when configured. */
  readonly principals?: PrincipalStore | undefined
  /** One line per request (audit.ts), when configured. */
  readonly audit?: AuditLog | undefined
  /** Request spans (spans.ts), only while traces are exported. */
  readonly spans?: GatewaySpans | undefined
}

export interface GwCtx extends HttpCtx {
  readonly req: IncomingMessage
  readonly res: ServerResponse
  readonly query: URLSearchParams
  readonly rawPath: string
  readonly rawQuery: string
  readonly g: Services
  /** Aborted when the deadline for the response head passes or the client goes away. */
  readonly signal: AbortSignal
  /** The same state without an AbortSignal (made only when `signal` is read). */
  readonly aborts: RequestAbort
  /** Who signed the request, when the gateway has principals (set by the signature check). */
  principal: Principal | undefined
  /** `talon.gateway.request`, while traces are exported (spans.ts). */
  span: Tracer.Span | undefined
}

/**
 * Whether a request was abandoned (deadline passed, client gone). An AbortController with its
 * EventTarget per request was a good part of a cached read's garbage, yet almost no request
 * reads the signal: it is made on first use, already aborted if the request is. The hot path
 * waits with `onAbort`, one callback slot.
 */
export class RequestAbort {
  aborted = false
  /** Called once on abort (the read waiting for its first bytes sets it, and clears it after). */
  onAbort: (() => void) | undefined = undefined
  #controller: AbortController | undefined

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController()
      if (this.aborted) this.#controller.abort()
    }
    return this.#controller.signal
  }

  abort(): void {
    if (this.aborted) return
    this.aborted = true
    this.#controller?.abort()
    const f = this.onAbort
    this.onAbort = undefined
    f?.()
  }
}

/**
 * A request's context. A class, so `signal` is one getter on the prototype: an object literal
 * with its own accessor per request kept more of every request alive through scavenges
 * (docs/decisions/measured-in-code.md).
 */
export class RequestContext implements GwCtx {
  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly method: string,
    readonly requestId: string,
    readonly query: URLSearchParams,
    readonly rawPath: string,
    readonly rawQuery: string,
    readonly g: Services,
    readonly aborts: RequestAbort
  ) {}

  principal: Principal | undefined = undefined
  span: Tracer.Span | undefined = undefined

  get signal(): AbortSignal {
    return this.aborts.signal
  }
}

/** The request's deadline passed, or the client disconnected, before the effect finished. */
export class Aborted {
  readonly _tag = "Aborted"
}

/** Runs an effect for this request; never rejects. */
export const run = <A, E>(ctx: GwCtx, effect: Effect.Effect<A, E>): Promise<Either.Either<A, E | Aborted>> =>
  Runtime.runPromise(ctx.g.runtime)(Effect.either(effect), { signal: ctx.signal }).catch(
    (): Either.Either<A, E | Aborted> => Either.left(new Aborted())
  )

/**
 * Writes a run of bytes (one writev for its views) without copying them; the run is
 * released to its pool once the socket has sent it. `true` when the socket can take more
 * at once, else a promise of whether it drained (false: the client is gone).
 */
export const writePayload = (res: ServerResponse, bytes: Payload): true | Promise<boolean> => {
  if (res.destroyed) return Promise.resolve(false)
  const views = bytes.views
  const last = views.length - 1
  if (last < 0) return true
  if (last > 0) res.cork()
  for (let i = 0; i < last; i++) res.write(views[i])
  // Only a write that completed without error has handed the bytes to the kernel; after an
  // error the views are dropped instead (never recycled while a socket might still read them).
  // The return value is what arms the response's 'drain' event, so it is the one waited on.
  const ok = res.write(views[last], (err) => {
    if (err == null) bytes.release()
  })
  if (last > 0) res.uncork()
  return ok ? true : drained(res)
}

const drained = (res: ServerResponse): Promise<boolean> =>
  new Promise((resolve) => {
    if (res.destroyed) return resolve(false)
    const done = (ok: boolean) => {
      res.off("drain", onDrain)
      res.off("close", onClose)
      resolve(ok)
    }
    const onDrain = () => done(true)
    const onClose = () => done(false)
    res.on("drain", onDrain)
    res.on("close", onClose)
  })

export class BodyTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`request body exceeds ${limit} bytes`)
  }
}

/** Collects a stream's output in memory up to `limit` bytes. */
class Collector extends Writable {
  readonly chunks: Array<Buffer> = []
  length = 0
  constructor(private readonly limit: number) {
    super()
  }
  override _write(chunk: Buffer, _enc: BufferEncoding, done: (error?: Error | null) => void): void {
    this.length += chunk.length
    if (this.length > this.limit) return done(new BodyTooLarge(this.limit))
    this.chunks.push(chunk)
    done()
  }
}

/** Counts raw bytes so an unbounded encoded body is cut off too. */
class Limit extends Transform {
  length = 0
  constructor(private readonly limit: number) {
    super()
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.length += chunk.length
    if (this.length > this.limit) return done(new BodyTooLarge(this.limit))
    done(null, chunk)
  }
}

/**
 * The request body through `transforms` (decoding, digests), whole. Raw bytes are capped
 * at twice the decoded limit plus framing slack (aws-chunked adds per-chunk headers).
 */
export const readBody = async (
  req: IncomingMessage,
  limit: number,
  transforms: ReadonlyArray<Transform>
): Promise<Buffer> => {
  const collector = new Collector(limit)
  await pipeline([req, new Limit(limit * 2 + 65536), ...transforms, collector])
  return collector.chunks.length === 1 ? collector.chunks[0]! : Buffer.concat(collector.chunks, collector.length)
}
