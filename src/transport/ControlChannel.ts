/**
 * Control-plane request/response channel to one peer (coordinator or worker) over
 * the framed protocol. Requests are pipelined on one connection and matched by
 * request id; a broken connection is replaced on the next request, and requests
 * that failed because the connection broke are retried (every control message is
 * idempotent: Register/Heartbeat re-assert state, the rest are queries).
 */
import { Data, Duration, Effect, Schedule, type Scope } from "effect"
import {
  DEFAULT_CAPS,
  Flags,
  MsgType,
  decodeControl,
  encodeControlFrame,
  encodeFrame,
  type ControlMessage,
  type FrameCaps
} from "../protocol/index.js"
import type { ControlTlsFiles } from "./controlTls.js"
import { FramedConnection, type Reply } from "./FramedConnection.js"

export class ControlConnectError extends Data.TaggedError("ControlConnectError")<{
  readonly address: string
  readonly detail: string
}> {
  override get message() {
    return `cannot connect to ${this.address}: ${this.detail}`
  }
}

export class ControlConnectionLost extends Data.TaggedError("ControlConnectionLost")<{
  readonly address: string
  readonly detail: string
}> {
  override get message() {
    return `control connection to ${this.address} lost: ${this.detail}`
  }
}

export class ControlTimeout extends Data.TaggedError("ControlTimeout")<{
  readonly address: string
  readonly request: string
  readonly timeoutMs: number
}> {
  override get message() {
    return `${this.request} to ${this.address} got no reply within ${this.timeoutMs} ms`
  }
}

/** The peer answered with an error frame; `detail` is its message verbatim. */
export class ControlRemoteError extends Data.TaggedError("ControlRemoteError")<{
  readonly address: string
  readonly detail: string
}> {
  override get message() {
    return `${this.address} answered with an error: ${this.detail}`
  }
}

/** The peer sent something that is not a valid reply (bad frame, undecodable payload). */
export class ControlProtocolError extends Data.TaggedError("ControlProtocolError")<{
  readonly address: string
  readonly detail: string
}> {
  override get message() {
    return `protocol error talking to ${this.address}: ${this.detail}`
  }
}

export type ControlError =
  | ControlConnectError
  | ControlConnectionLost
  | ControlTimeout
  | ControlRemoteError
  | ControlProtocolError

export interface ControlChannelOptions {
  /** Bound on one request's round trip (default 5 s). */
  readonly requestTimeout?: Duration.DurationInput
  readonly connectTimeout?: Duration.DurationInput
  /** Extra attempts after a connect failure or a lost connection (default 2). */
  readonly retries?: number
  /** Pause before each retry (default 100 ms). */
  readonly retryDelay?: Duration.DurationInput
  readonly caps?: FrameCaps
  /** Dial the peer over TLS with these files (controlTls.ts); plain TCP when absent. */
  readonly tls?: ControlTlsFiles | undefined
}

export interface RequestOptions {
  readonly timeout?: Duration.DurationInput
}

const isTransient = (e: ControlError): boolean => e._tag === "ControlConnectError" || e._tag === "ControlConnectionLost"

export class ControlChannel {
  private connection: FramedConnection | undefined
  private nextId = 1
  private closed = false
  private readonly requestTimeoutMs: number
  private readonly connectTimeoutMs: number
  private readonly retries: number
  private readonly retryDelay: Duration.Duration
  private readonly caps: FrameCaps
  private readonly tls: ControlTlsFiles | undefined

  private constructor(
    readonly address: string,
    options: ControlChannelOptions
  ) {
    this.requestTimeoutMs = Duration.toMillis(options.requestTimeout ?? "5 seconds")
    this.connectTimeoutMs = Duration.toMillis(options.connectTimeout ?? "3 seconds")
    this.retries = options.retries ?? 2
    this.retryDelay = Duration.decode(options.retryDelay ?? "100 millis")
    this.caps = options.caps ?? DEFAULT_CAPS
    this.tls = options.tls
  }

  /** A channel that is closed when the scope ends. Connects lazily, on the first request. */
  static make(address: string, options: ControlChannelOptions = {}): Effect.Effect<ControlChannel, never, Scope.Scope> {
    return Effect.acquireRelease(
      Effect.sync(() => new ControlChannel(address, options)),
      (channel) => channel.close
    )
  }

  /** A channel the caller closes with `close`. */
  static unsafeMake(address: string, options: ControlChannelOptions = {}): ControlChannel {
    return new ControlChannel(address, options)
  }

  /** Sends one control message and waits for the reply carrying the same request id. */
  request(message: ControlMessage, options: RequestOptions = {}): Effect.Effect<ControlMessage, ControlError> {
    return this.retrying(
      this.exchange(message._tag, options, (id) => encodeControlFrame(id, message)).pipe(
        Effect.flatMap((reply) => this.decodeReply(reply))
      )
    )
  }

  /** A Ping frame round trip (liveness probe of the peer itself, not of its state). */
  ping(options: RequestOptions = {}): Effect.Effect<void, ControlError> {
    return this.retrying(
      this.exchange("Ping", options, (id) => encodeFrame(MsgType.Ping, id, new Uint8Array(0))).pipe(
        Effect.flatMap((reply): Effect.Effect<void, ControlError> =>
          (reply.header.flags & Flags.Error) !== 0
            ? Effect.fail(new ControlRemoteError({ address: this.address, detail: reply.payload.toString("utf8") }))
            : reply.header.type === MsgType.Ping
              ? Effect.void
              : Effect.fail(
                  new ControlProtocolError({
                    address: this.address,
                    detail: `expected a Ping reply, got message type ${reply.header.type}`
                  })
                )
        )
      )
    )
  }

  readonly close: Effect.Effect<void> = Effect.sync(() => {
    this.closed = true
    this.connection?.close()
    this.connection = undefined
  })

  private retrying<A>(effect: Effect.Effect<A, ControlError>): Effect.Effect<A, ControlError> {
    return effect.pipe(
      Effect.retry({
        times: this.retries,
        while: (e) => isTransient(e) && !this.closed,
        schedule: Schedule.spaced(this.retryDelay)
      })
    )
  }

  private current(): FramedConnection {
    if (this.connection === undefined || !this.connection.usable) {
      this.connection = new FramedConnection(this.address, { caps: this.caps, connectTimeoutMs: this.connectTimeoutMs, tls: this.tls })
    }
    return this.connection
  }

  private allocateId(): number {
    const id = this.nextId
    this.nextId = this.nextId >= 0xffffffff ? 1 : this.nextId + 1
    return id
  }

  private exchange(
    what: string,
    options: RequestOptions,
    encode: (requestId: number) => Uint8Array
  ): Effect.Effect<Extract<Reply, { ok: true }>["frame"], ControlError> {
    const timeoutMs = options.timeout === undefined ? this.requestTimeoutMs : Duration.toMillis(options.timeout)
    return Effect.suspend(() => {
      if (this.closed) {
        return Effect.fail(new ControlConnectionLost({ address: this.address, detail: "channel closed" }))
      }
      const connection = this.current()
      const id = this.allocateId()
      const frame = encode(id)
      return Effect.async<Extract<Reply, { ok: true }>["frame"], ControlError>((resume) => {
        connection.send(id, frame, (reply) => {
          if (reply.ok) resume(Effect.succeed(reply.frame))
          else if (reply.kind === "connect")
            resume(Effect.fail(new ControlConnectError({ address: this.address, detail: reply.detail })))
          else if (reply.kind === "lost")
            resume(Effect.fail(new ControlConnectionLost({ address: this.address, detail: reply.detail })))
          else resume(Effect.fail(new ControlProtocolError({ address: this.address, detail: reply.detail })))
        })
        return Effect.sync(() => connection.cancel(id))
      }).pipe(
        Effect.timeoutFail({
          duration: Duration.millis(timeoutMs),
          onTimeout: () => new ControlTimeout({ address: this.address, request: what, timeoutMs })
        })
      )
    })
  }

  private decodeReply(reply: Extract<Reply, { ok: true }>["frame"]): Effect.Effect<ControlMessage, ControlError> {
    if ((reply.header.flags & Flags.Error) !== 0) {
      return Effect.fail(new ControlRemoteError({ address: this.address, detail: reply.payload.toString("utf8") }))
    }
    if (reply.header.type !== MsgType.Control) {
      return Effect.fail(
        new ControlProtocolError({
          address: this.address,
          detail: `expected a Control reply, got message type ${reply.header.type}`
        })
      )
    }
    const decoded = decodeControl(reply.payload)
    return decoded._tag === "Right"
      ? Effect.succeed(decoded.right.message)
      : Effect.fail(new ControlProtocolError({ address: this.address, detail: decoded.left.message }))
  }
}
