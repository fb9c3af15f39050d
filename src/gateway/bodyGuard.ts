/**
 * What stands between a client's request body and the origin: a size cap, a read deadline
 * (a body that stalls, or trickles in slower than a floor rate, is cut off so it cannot hold
 * a connection and an upload slot for minutes), and a payload hash check that holds back
 * the last chunk until it passes, so the origin never receives a complete body that fails it.
 */
import { createHash, type Hash } from "node:crypto"
import { Transform, type TransformCallback } from "node:stream"

export class BodyTimeout extends Error {
  constructor(readonly reason: string) {
    super(reason)
  }
}

export class BodyLimit extends Error {
  constructor(readonly limit: number) {
    super(`request body exceeds ${limit} bytes`)
  }
}

export class PayloadHashMismatch extends Error {}

export interface BodyGuardOptions {
  /** Largest body accepted (raw bytes as sent). */
  readonly maxBytes: number
  /** No byte for this long ends the body. */
  readonly idleMs: number
  /** After `idleMs`, the average rate must stay at or above this. */
  readonly minBytesPerSec: number
  /** A hex SHA-256 the body must match (a signed payload). */
  readonly sha256?: string | undefined
  /** The gateway's Clock (a Node stream on the body path cannot ask the Effect runtime per chunk). */
  readonly now: () => number
}

export class BodyGuard extends Transform {
  length = 0
  readonly #started: number
  #lastByte: number
  // A per-request Node stream on the body path: a plain timer, cleared with the stream.
  readonly #timer: NodeJS.Timeout
  readonly #hash: Hash | undefined
  #held: Buffer | undefined

  constructor(private readonly options: BodyGuardOptions) {
    super()
    this.#started = options.now()
    this.#lastByte = this.#started
    this.#hash = options.sha256 === undefined ? undefined : createHash("sha256")
    const tick = Math.max(50, Math.min(1000, Math.floor(options.idleMs / 4)))
    this.#timer = setInterval(() => this.#check(), tick)
    this.#timer.unref()
  }

  #check(): void {
    const now = this.options.now()
    const elapsed = now - this.#started
    if (now - this.#lastByte > this.options.idleMs) {
      return this.#fail(new BodyTimeout(`no request body bytes arrived for ${this.options.idleMs} ms`))
    }
    if (elapsed > this.options.idleMs && (this.length * 1000) / elapsed < this.options.minBytesPerSec) {
      this.#fail(new BodyTimeout(`the request body arrived slower than ${this.options.minBytesPerSec} bytes/s`))
    }
  }

  #fail(e: Error): void {
    clearInterval(this.#timer)
    this.destroy(e)
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.length += chunk.length
    this.#lastByte = this.options.now()
    if (this.length > this.options.maxBytes) return done(new BodyLimit(this.options.maxBytes))
    if (this.#hash === undefined) return done(null, chunk)
    this.#hash.update(chunk)
    const previous = this.#held
    this.#held = chunk
    done(null, previous)
  }

  override _flush(done: TransformCallback): void {
    clearInterval(this.#timer)
    if (this.#hash !== undefined && this.#hash.digest("hex") !== this.options.sha256) {
      return done(new PayloadHashMismatch("The provided 'x-amz-content-sha256' header does not match what was computed."))
    }
    done(null, this.#held)
  }

  override _destroy(error: Error | null, done: (error: Error | null) => void): void {
    clearInterval(this.#timer)
    done(error)
  }
}
