import { Data } from "effect"
import type { ControlError } from "../transport/ControlChannel.js"

/** The origin has no such object (the coordinator's StatObject said so). */
export class ObjectNotFound extends Data.TaggedError("ObjectNotFound")<{
  readonly object: string
  readonly detail: string
}> {
  override get message() {
    return `${this.object} not found: ${this.detail}`
  }
}

/** The coordinator lists no healthy worker, so nothing can serve a read. */
export class NoWorkers extends Data.TaggedError("NoWorkers")<{
  readonly coordinator: string
}> {
  override get message() {
    return `no healthy workers registered with the coordinator at ${this.coordinator}; start a worker (talon worker --coordinator ${this.coordinator})`
  }
}

/** The coordinator could not be reached or refused a request. */
export class CoordinatorUnavailable extends Data.TaggedError("CoordinatorUnavailable")<{
  readonly coordinator: string
  readonly detail: string
  readonly cause?: ControlError | undefined
}> {
  override get message() {
    return `coordinator ${this.coordinator}: ${this.detail}`
  }
}

export interface FailedAttempt {
  readonly address: string
  readonly detail: string
}

/**
 * Every replica failed for a block, twice (before and after refreshing the
 * membership). `detail` is the last worker's message verbatim.
 */
export class ReadFailed extends Data.TaggedError("ReadFailed")<{
  readonly object: string
  readonly offset: number
  readonly length: number
  readonly detail: string
  readonly attempts: ReadonlyArray<FailedAttempt>
}> {
  override get message() {
    const tried = this.attempts.map((a) => `${a.address}: ${a.detail}`).join("; ")
    return `reading ${this.object} [${this.offset}, ${this.offset + this.length}) failed: ${this.detail}${tried.length > 0 ? ` (tried ${tried})` : ""}`
  }
}

/**
 * The object kept changing at the origin while it was read: every attempt's pieces were pinned
 * to the version its stat named (so no bytes of two versions were ever combined), and a worker
 * reported that the origin no longer has it. Retrying the read later reads the new version.
 */
export class VersionChanged extends Data.TaggedError("VersionChanged")<{
  readonly object: string
  /** The version the last attempt was pinned to. */
  readonly version: string
  readonly attempts: number
  readonly detail: string
}> {
  override get message() {
    return `${this.object} changed at the origin while it was read (${this.attempts} attempt${this.attempts === 1 ? "" : "s"}, last pinned to version ${this.version}): ${this.detail}; retry the read`
  }
}

/** A malformed URI / path or range given by the caller. */
export class InvalidRequest extends Data.TaggedError("InvalidRequest")<{
  readonly detail: string
}> {
  override get message() {
    return this.detail
  }
}

/**
 * A worker refused the read: the client's tenant is over its rate limit there (Talon's typed
 * `RateLimited`). Not tried on another replica, which would spend the allowance twice; back off
 * for `retryAfterMs` (the worker's hint, when it gave one) and read again.
 */
export class RateLimited extends Data.TaggedError("RateLimited")<{
  readonly object: string
  readonly address: string
  readonly detail: string
  readonly retryAfterMs: number | undefined
}> {
  override get message() {
    return `reading ${this.object}: ${this.address} refused it, the tenant is over its rate limit (${this.detail}); back off${this.retryAfterMs === undefined ? "" : ` ${this.retryAfterMs} ms`} and retry`
  }
}

/**
 * A cache-only read (`readCached`) found some of the range resident on none of its block's
 * replicas (Talon's typed `CacheMiss`): no worker asked the origin for it. Read it with `read`
 * (which fills from the origin), or `admit` the block first.
 */
export class CacheMiss extends Data.TaggedError("CacheMiss")<{
  readonly object: string
  readonly version: string
  readonly offset: number
  readonly length: number
  /** The replicas asked, each with its answer. */
  readonly attempts: ReadonlyArray<FailedAttempt>
}> {
  override get message() {
    return `${this.object} version ${this.version} [${this.offset}, ${this.offset + this.length}) is not wholly resident on any replica (asked ${this.attempts.map((a) => a.address).join(", ") || "none"}); read it with read() to fill from the origin`
  }
}

export type TalonClientError = ObjectNotFound | NoWorkers | CoordinatorUnavailable | ReadFailed | InvalidRequest | VersionChanged | RateLimited
