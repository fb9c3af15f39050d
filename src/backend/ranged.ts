/** A provider's range reads as a Stream, resumed after retryable failures pinned to one version, and the getRange/openRange pair built on them. */
import type { Readable } from "node:stream"
import { Chunk, Effect, Runtime, Schedule, Scope, Stream } from "effect"
import {
  type BackendError,
  BackendRangeError,
  BackendRequestError,
  type BackendStoreShape,
  type GetRangeOptions
} from "./BackendStore.js"
import type { ObjectId } from "../core/ids.js"
import { transportError, type RequestLabel } from "./http.js"
import { isRetryable, type RequestPolicy, retrySchedule } from "./policy.js"
import { fromReadable } from "./readableStream.js"
import { rangedReader, readerFromStream } from "./rangeReaders.js"

/** One origin response to a range request, as the provider understood its headers. */
export interface RangeBody {
  /** Absolute offset of the body's first byte (0 when the origin ignored the range). */
  readonly start: number
  /** The object's size, when the origin said it (Content-Range total). */
  readonly size: number | undefined
  /** Normalised ETag of the version being read. */
  readonly version: string | undefined
  readonly body: Readable
}

export type OpenRange = (
  from: number,
  toInclusive: number,
  ifMatch: string | undefined
) => Effect.Effect<RangeBody, BackendError, Scope.Scope>

/** What a ranged read needs: the request it is, its retry policy, the range, the version to pin (if known) and how to open an attempt. */
export interface RangedReadArgs {
  readonly label: RequestLabel
  readonly policy: RequestPolicy
  readonly offset: number
  readonly length: number
  readonly version?: string | undefined
  readonly open: OpenRange
}

/**
 * Streams `[offset, offset+length)` with backpressure (the socket is read only as the
 * consumer pulls). A retryable failure — before or after the first byte — re-requests only
 * the bytes not yet emitted, pinned with `If-Match` to the version first seen, so a resumed
 * read can never splice two versions of an object; if the object changed the read fails
 * with 412. Attempts are bounded by the policy's schedule over the whole read.
 */
export const rangedRead = (args: RangedReadArgs): Stream.Stream<Uint8Array, BackendError> =>
  Stream.unwrap(
    Effect.map(Schedule.driver(retrySchedule(args.policy)), (driver) => {
      let pos = args.offset
      let end = args.offset + args.length
      let pinned = args.version

      const shortBody = () =>
        new BackendRequestError({
          ...args.label,
          retryable: true,
          detail: `origin closed the body at byte ${pos}, expected up to ${end}`
        })

      /** Drops bytes before `pos` (an origin that ignored the range) and after `end`. */
      const slice = (start: number) => {
        let at = start
        return (chunks: Chunk.Chunk<Uint8Array>): Chunk.Chunk<Uint8Array> => {
          const out: Array<Uint8Array> = []
          for (const chunk of chunks) {
            const chunkStart = at
            at += chunk.length
            const from = Math.max(pos - chunkStart, 0)
            const to = Math.min(chunk.length, end - chunkStart)
            if (from >= to) continue
            const piece = from === 0 && to === chunk.length ? chunk : chunk.subarray(from, to)
            pos += piece.length
            out.push(piece)
          }
          return Chunk.unsafeFromArray(out)
        }
      }

      const attempt = (): Stream.Stream<Uint8Array, BackendError> =>
        Stream.unwrapScoped(
          Effect.map(args.open(pos, end - 1, pinned), (range): Stream.Stream<Uint8Array, BackendError> => {
            // Some origins (Azurite) answer a range starting exactly at EOF with an empty 206.
            if (range.size !== undefined && pos >= range.size) {
              return Stream.fail(
                new BackendRangeError({ object: args.label.object, offset: args.offset, length: args.length, size: range.size })
              )
            }
            if (pinned === undefined && range.version !== undefined && range.version !== "") pinned = range.version
            if (range.size !== undefined) end = Math.min(end, range.size)
            const body = fromReadable(range.body, {
              idleMs: args.policy.timeoutMs,
              onError: (error) => transportError(args.label, error),
              onIdle: () =>
                new BackendRequestError({
                  ...args.label,
                  retryable: true,
                  detail: `origin sent no body bytes for ${args.policy.timeoutMs} ms at byte ${pos}`
                })
            })
            return body.pipe(
              // Per batch, not per element: `pos` advances as a whole batch is sliced.
              Stream.chunks,
              Stream.map(slice(range.start)),
              Stream.takeUntil(() => pos >= end),
              Stream.flattenChunks,
              Stream.concat(Stream.suspend(() => (pos < end ? Stream.fail(shortBody()) : Stream.empty)))
            )
          })
        )

      const loop = (): Stream.Stream<Uint8Array, BackendError> =>
        attempt().pipe(
          Stream.catchAll((error) => {
            // A resumed read must be pinned to the version already partly emitted.
            if (!isRetryable(error) || (pos > args.offset && pinned === undefined)) return Stream.fail(error)
            return Stream.fromEffect(Effect.catchAll(driver.next(error), () => Effect.fail(error))).pipe(
              Stream.drain,
              Stream.concat(Stream.suspend(loop))
            )
          })
        )

      return loop()
    })
  )

/**
 * A provider's `getRange` and `openRange` from its per-attempt request: the argument checks,
 * a zero-length read answered by `stat` (so a range past the end still fails), and the
 * fiber-free relay reader (odd cases go through `getRange`'s stream).
 */
export const rangeOperations = (p: {
  readonly operation: string
  readonly labelOf: (object: ObjectId, operation: string) => RequestLabel
  readonly opener: (object: ObjectId, offset: number, length: number, label: RequestLabel) => OpenRange
  readonly stat: BackendStoreShape["stat"]
  readonly policy: RequestPolicy
  readonly runtime: Runtime.Runtime<never>
}): {
  readonly getRange: BackendStoreShape["getRange"]
  readonly openRange: NonNullable<BackendStoreShape["openRange"]>
} => {
  const { operation, labelOf, opener, stat, policy, runtime } = p
  const getRange: BackendStoreShape["getRange"] = (object, offset, length, options?: GetRangeOptions) => {
    const label = labelOf(object, operation)
    if (offset < 0 || length < 0 || !Number.isSafeInteger(offset) || !Number.isSafeInteger(length)) {
      return Stream.fail(new BackendRangeError({ object: label.object, offset, length }))
    }
    if (length === 0) {
      return Stream.fromEffect(stat(object)).pipe(
        Stream.flatMap((s) =>
          offset > s.size
            ? Stream.fail(new BackendRangeError({ object: label.object, offset, length, size: s.size }))
            : Stream.empty
        )
      )
    }
    return rangedRead({ label, policy, offset, length, version: options?.version, open: opener(object, offset, length, label) })
  }
  const openRange: NonNullable<BackendStoreShape["openRange"]> = (object, offset, length, options) => {
    if (length === 0 || offset < 0 || length < 0 || !Number.isSafeInteger(offset) || !Number.isSafeInteger(length)) {
      return readerFromStream(runtime, getRange(object, offset, length, options))
    }
    const label = labelOf(object, operation)
    return rangedReader({ label, policy, offset, length, version: options?.version, open: opener(object, offset, length, label), runtime })
  }
  return { getRange, openRange }
}
