/**
 * The RangeReader forms a relay pulls: the fiber-free reader over a provider's per-attempt
 * request (rangedReader), and any store's `getRange` stream pulled in batches.
 */
import type { Readable } from "node:stream"
import { Chunk, Effect, Either, Exit, Runtime, Scope, Stream } from "effect"
import {
  type BackendError,
  BackendRangeError,
  BackendRequestError,
  type BackendStoreShape,
  type GetRangeOptions,
  type RangeReader
} from "./BackendStore.js"
import type { ObjectId } from "../core/ids.js"
import { transportError } from "./http.js"
import { isRetryable } from "./policy.js"
import type { RangeBody, RangedReadArgs } from "./ranged.js"

/**
 * `rangedRead` for relays, with the same contract (backpressure, an idle timeout while
 * the consumer waits, bounded retries that resume at the first byte not yet delivered,
 * pinned to the version first seen) but no fiber per chunk: one runtime call opens each
 * attempt, then the body is read with plain listeners, paused past `highWaterMark`
 * bytes not yet pulled.
 */
export const rangedReader = (
  args: RangedReadArgs & {
    readonly runtime: Runtime.Runtime<never>
    readonly highWaterMark?: number
  }
): RangeReader => {
  const { label, policy } = args
  const runPromise = Runtime.runPromise(args.runtime)
  const runSync = Runtime.runSync(args.runtime)
  const highWaterMark = args.highWaterMark ?? 1024 * 1024
  let pos = args.offset
  let end = args.offset + args.length
  let pinned = args.version
  let retriesLeft = policy.retries
  let delay = policy.retryBaseMs

  let queue: Array<Uint8Array> = []
  let queued = 0
  let done = false
  let closed = false
  let failure: BackendError | undefined
  let wake: (() => void) | undefined
  let idleTimer: ReturnType<typeof setTimeout> | undefined
  let current: { readonly body: Readable; readonly scope: Scope.CloseableScope; readonly detach: () => void } | undefined

  const notify = () => {
    const w = wake
    wake = undefined
    w?.()
  }
  const closeScope = (scope: Scope.CloseableScope) => {
    try {
      runSync(Scope.close(scope, Exit.void))
    } catch {
      // Finalizers here only destroy sockets; nothing to report.
    }
  }
  const endAttempt = () => {
    const c = current
    current = undefined
    if (c === undefined) return
    c.detach()
    closeScope(c.scope)
  }

  /** A failed attempt: retried from `pos` when the error allows it, else the read fails. */
  const attemptFailed = (error: BackendError) => {
    endAttempt()
    if (closed || done || failure !== undefined) return
    // A resumed read must be pinned to the version already partly delivered.
    if (!isRetryable(error) || retriesLeft <= 0 || (pos > args.offset && pinned === undefined)) {
      failure = error
      return notify()
    }
    retriesLeft--
    const wait = Math.min(delay, policy.retryMaxMs) * (0.5 + Math.random())
    delay *= 2
    setTimeout(attempt, wait)
  }

  const attempt = () => {
    if (closed) return
    const scope = runSync(Scope.make())
    const from = pos
    runPromise(Effect.either(Scope.extend(args.open(from, end - 1, pinned), scope))).then(
      (r) => {
        if (Either.isLeft(r)) {
          closeScope(scope)
          return attemptFailed(r.left)
        }
        const range = r.right
        if (closed) return closeScope(scope)
        // Some origins (Azurite) answer a range starting exactly at EOF with an empty 206.
        if (range.size !== undefined && pos >= range.size) {
          closeScope(scope)
          failure = new BackendRangeError({ object: label.object, offset: args.offset, length: args.length, size: range.size })
          return notify()
        }
        if (pinned === undefined && range.version !== undefined && range.version !== "") pinned = range.version
        if (range.size !== undefined) end = Math.min(end, range.size)
        stream(range, scope)
      },
      (defect: unknown) => {
        closeScope(scope)
        attemptFailed(transportError(label, defect))
      }
    )
  }

  const stream = (range: RangeBody, scope: Scope.CloseableScope) => {
    const body = range.body
    let at = range.start
    const onData = (chunk: Uint8Array) => {
      const chunkStart = at
      at += chunk.length
      // Drops bytes before `pos` (an origin that ignored the range) and after `end`.
      const from = Math.max(pos - chunkStart, 0)
      const to = Math.min(chunk.length, end - chunkStart)
      if (from < to) {
        const piece = from === 0 && to === chunk.length ? chunk : chunk.subarray(from, to)
        pos += piece.length
        queue.push(piece)
        queued += piece.length
      }
      if (pos >= end) {
        done = true
        detach()
        // The message usually completes in the same parser pass; the scope's finalizer then
        // leaves the keep-alive socket alone (it destroys only an unfinished body).
        setImmediate(() => {
          if (current?.body === body) endAttempt()
        })
      } else if (queued >= highWaterMark) body.pause()
      notify()
    }
    const onEnd = () => {
      if (pos < end) attemptFailed(new BackendRequestError({ ...label, retryable: true, detail: `origin closed the body at byte ${pos}, expected up to ${end}` }))
    }
    const onError = (error: unknown) => attemptFailed(transportError(label, error))
    const onClose = () => {
      if (!done) attemptFailed(transportError(label, Object.assign(new Error("body closed before its end"), { code: "ERR_STREAM_PREMATURE_CLOSE" })))
    }
    const detach = () => {
      body.off("data", onData)
      body.off("end", onEnd)
      body.off("error", onError)
      body.off("close", onClose)
    }
    current = { body, scope, detach }
    body.on("data", onData)
    body.on("end", onEnd)
    body.on("error", onError)
    body.on("close", onClose)
  }

  const take = (): ReadonlyArray<Uint8Array> => {
    const out = queue
    queue = []
    queued = 0
    const body = current?.body
    if (body !== undefined && body.isPaused() && !done) body.resume()
    return out
  }

  attempt()

  const next = (): Promise<ReadonlyArray<Uint8Array> | undefined> => {
    if (queue.length > 0) return Promise.resolve(take())
    if (failure !== undefined) return Promise.reject(failure)
    if (done || closed) return Promise.resolve(undefined)
    return new Promise((resolve, reject) => {
      // The idle timer runs only while the consumer waits, so a slow consumer is never timed
      // out; an attempt still opening has the transport's own deadline for its head.
      const armIdle = () => {
        idleTimer = setTimeout(() => {
          if (current !== undefined) {
            attemptFailed(new BackendRequestError({ ...label, retryable: true, detail: `origin sent no body bytes for ${policy.timeoutMs} ms at byte ${pos}` }))
          }
          if (wake !== undefined) armIdle()
        }, policy.timeoutMs)
      }
      armIdle()
      wake = () => {
        clearTimeout(idleTimer)
        next().then(resolve, reject)
      }
    })
  }

  return {
    next,
    close: () => {
      if (closed) return
      closed = true
      clearTimeout(idleTimer)
      endAttempt()
      notify()
    }
  }
}

/** A stream pulled a batch at a time through `runtime` (stores without `openRange`). */
export const readerFromStream = (runtime: Runtime.Runtime<never>, stream: Stream.Stream<Uint8Array, BackendError>): RangeReader => {
  const run = Runtime.runPromise(runtime)
  const scope = Runtime.runSync(runtime)(Scope.make())
  const pull = run(Scope.extend(Stream.toPull(stream), scope))
  let done = false
  let closed = false
  const close = () => {
    if (closed) return
    closed = true
    void run(Scope.close(scope, Exit.void)).catch(() => undefined)
  }
  return {
    next: async () => {
      if (done || closed) return undefined
      const r = await run(Effect.either(Effect.flatten(Effect.promise(() => pull))))
      if (Either.isRight(r)) return Chunk.toReadonlyArray(r.right)
      if (r.left._tag === "None") {
        done = true
        return undefined
      }
      close()
      throw r.left.value
    },
    close
  }
}

/** `store.openRange` where the store has it, else its `getRange` pulled in batches. */
export const rangeReader = (
  runtime: Runtime.Runtime<never>,
  store: BackendStoreShape,
  object: ObjectId,
  offset: number,
  length: number,
  options?: GetRangeOptions
): RangeReader =>
  store.openRange !== undefined
    ? store.openRange(object, offset, length, options)
    : readerFromStream(runtime, store.getRange(object, offset, length, options))
