/**
 * Why a request could not be served. The `reason` goes to the client verbatim
 * in an ERROR frame, so it names the object and the number that was wrong.
 */
import { Data } from "effect"
import type { BackendError } from "../backend/BackendStore.js"
import type { ObjectId } from "../core/ids.js"
import { objectIdToUri } from "../core/objectId.js"
import { DataErrorCode } from "../protocol/dataError.js"

export class ReadFailed extends Data.TaggedError("ReadFailed")<{
  readonly reason: string
  /** Whether the cached version of the object should be forgotten (it may have changed). */
  readonly staleVersion?: boolean
  /** The class a typed error reply carries (Talon's DataErrorCode); Internal when unset. */
  readonly code?: DataErrorCode
}> {
  override get message(): string {
    return this.reason
  }
}

/** Same wording as Talon's ceiling server, so clients see one message for one condition. */
export const outOfBounds = (offset: number, len: number, size: number): ReadFailed =>
  new ReadFailed({
    reason: `range out of bounds: offset ${offset} + len ${len} exceeds object size ${size}`,
    code: DataErrorCode.InvalidRequest
  })

export const tooLong = (len: number): ReadFailed =>
  new ReadFailed({ reason: `range too long: len ${len} does not fit a u32 frame length`, code: DataErrorCode.InvalidRequest })

/**
 * A read pinned to `expected` that the origin cannot serve any more (Talon's VersionMismatch):
 * the reader should stat the object again and read the version it gets.
 */
export const versionMismatch = (object: ObjectId, expected: string, found: string | undefined, detail?: string): ReadFailed =>
  new ReadFailed({
    reason:
      `version mismatch: expected ${expected}, found ${found ?? "another version"} for ${objectIdToUri(object)}` +
      (detail === undefined ? "" : ` (${detail})`) +
      "; stat the object again and read the version it names",
    code: DataErrorCode.VersionMismatch
  })

/**
 * Talon's answer to a cache-only read (GetCachedRange) that is not wholly resident: the worker
 * never asks the origin for it. The reader may read through the origin-backed path instead.
 */
export const cacheMiss = (object: ObjectId, version: string, offset: number, len: number): ReadFailed =>
  new ReadFailed({
    reason: `requested range is not fully resident: ${len} bytes at ${offset} of ${objectIdToUri(object)} version ${version} (a cache-only read never fetches from the origin)`,
    code: DataErrorCode.CacheMiss
  })

export const fromBackend = (object: ObjectId, e: BackendError): ReadFailed => {
  const uri = objectIdToUri(object)
  switch (e._tag) {
    case "BackendNotFound":
      return new ReadFailed({ reason: `object ${uri} does not exist at the origin`, staleVersion: true, code: DataErrorCode.NotFound })
    case "BackendRangeError":
      return new ReadFailed({ reason: `origin rejected a range of ${uri}: ${e.message}`, staleVersion: true, code: DataErrorCode.Origin })
    case "BackendRequestError":
      // 412: the object changed since its version was learned; the caller re-reads the version.
      return e.status === 412
        ? new ReadFailed({
            reason: `${uri} changed at the origin during a fill: ${e.message}`,
            staleVersion: true,
            code: DataErrorCode.VersionMismatch
          })
        : new ReadFailed({ reason: `origin request for ${uri} failed: ${e.message}`, code: DataErrorCode.Origin })
  }
}

export const describeUnknown = (e: unknown): string =>
  e instanceof Error ? e.message : typeof e === "string" ? e : JSON.stringify(e)
