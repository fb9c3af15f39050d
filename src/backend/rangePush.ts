/**
 * A range read pushed into a sink (the worker's fill): the same contract as `rangedReader`
 * (bounded retries resuming at the first byte not yet delivered, pinned to the version first
 * seen, an idle timeout), with the body received into reused buffers (receiveInto.ts) when the
 * origin is plain HTTP. Over TLS it pulls the relay reader instead.
 */
import type { IncomingHttpHeaders } from "node:http"
import { Effect, Either, Runtime } from "effect"
import { type BackendError, BackendRangeError, BackendRequestError, type RangeReader } from "./BackendStore.js"
import { contentLength, parseContentRange } from "./headers.js"
import { header, transportError, type OriginRequest, type RequestLabel } from "./http.js"
import { isRetryable, type RequestPolicy } from "./policy.js"
import { type BodySink, type DirectSink, type Receiver, STOP } from "./receiveInto.js"

/**
 * Takes the next bytes of the range, valid only during the call. Returns a promise only when
 * the read must wait before the next bytes; a throw or a rejection ends the read with that error.
 * `direct`, when set, lends the sink's memory to the native receive (receiveTypes.ts).
 */
export type PushSink = {
  (chunk: Uint8Array): Promise<void> | void
  readonly direct?: PushDirect | undefined
}

/** A push sink's memory lent to the native receive: DirectSink without the early stop. */
export interface PushDirect {
  readonly target: DirectSink["target"]
  readonly filled: (n: number, sum: bigint | undefined) => Promise<void> | void
}

/** How one attempt of a provider's range GET is asked for and how its refusals read. */
export interface RangeGet {
  /** The signed request for `[from, toInclusive]`, pinned with If-Match when `ifMatch` is set. */
  readonly request: (from: number, toInclusive: number, ifMatch: string | undefined) => Effect.Effect<OriginRequest, BackendError>
  /** A refusal (status and its buffered error document) as the provider's error. */
  readonly refused: (status: number, headers: IncomingHttpHeaders, body: Buffer) => BackendError
  /** The version a response serves (the ETag, or GCS's generation), "" when unnamed. */
  readonly versionOf: (headers: IncomingHttpHeaders) => string
  /** The relay reader for the same bytes: what a TLS origin is read through. */
  readonly reader: (offset: number, length: number, version: string | undefined) => RangeReader
}

/** The sink's own failure, kept apart from the transport's so it is never retried or rewrapped. */
class SinkFailure {
  constructor(readonly error: unknown) {}
}

/** A relay reader's batches into a push sink (TLS origins, stores without `pushRange`). */
export const pullInto = async (reader: RangeReader, sink: PushSink, signal: AbortSignal | undefined): Promise<void> => {
  const abort = () => reader.close()
  signal?.addEventListener("abort", abort, { once: true })
  try {
    for (;;) {
      const batch = await reader.next()
      if (batch === undefined) return
      for (let i = 0; i < batch.length; i++) {
        const wait = sink(batch[i]!)
        if (wait !== undefined) await wait
      }
    }
  } finally {
    signal?.removeEventListener("abort", abort)
    reader.close()
  }
}

const sleep = (ms: number, signal: AbortSignal | undefined) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(done, ms)
    function done() {
      signal?.removeEventListener("abort", aborted)
      resolve()
    }
    function aborted() {
      clearTimeout(timer)
      reject(signal!.reason)
    }
    signal?.addEventListener("abort", aborted, { once: true })
  })

/**
 * Pushes `[offset, offset+length)` into `sink`. Rejects with a BackendError, with what the
 * sink threw, or with the signal's reason.
 */
export const pushRange = async (p: {
  readonly label: RequestLabel
  readonly policy: RequestPolicy
  readonly runtime: Runtime.Runtime<never>
  readonly receiver: Receiver
  readonly get: RangeGet
  readonly offset: number
  readonly length: number
  readonly version: string | undefined
  readonly sink: PushSink
  readonly signal?: AbortSignal | undefined
}): Promise<void> => {
  const { label, policy, get, offset, signal } = p
  const runPromise = Runtime.runPromise(p.runtime)
  let pos = offset
  let end = offset + p.length
  let pinned = p.version
  let retriesLeft = policy.retries
  let delay = policy.retryBaseMs

  const guarded = (chunk: Uint8Array): Promise<void> | undefined => {
    let wait: Promise<void> | void
    try {
      wait = p.sink(chunk)
    } catch (error) {
      throw new SinkFailure(error)
    }
    return wait === undefined
      ? undefined
      : wait.catch((error: unknown) => {
          throw new SinkFailure(error)
        })
  }

  const onHead = (status: number, headers: IncomingHttpHeaders): BodySink | undefined => {
    if (status !== 206 && status !== 200) return undefined
    const sent = parseContentRange(header(headers, "content-range"))
    const size = status === 206 ? sent.size : contentLength(headers)
    // Some origins (Azurite) answer a range starting exactly at EOF with an empty 206.
    if (size !== undefined && pos >= size) throw new BackendRangeError({ object: label.object, offset, length: p.length, size })
    const version = get.versionOf(headers)
    if (pinned === undefined && version !== "") pinned = version
    if (size !== undefined) end = Math.min(end, size)
    let at = status === 206 ? (sent.start ?? pos) : 0
    const push = (chunk: Uint8Array) => {
      const chunkStart = at
      at += chunk.length
      // Drops bytes before `pos` (an origin that ignored the range) and after `end`.
      const from = Math.max(pos - chunkStart, 0)
      const to = Math.min(chunk.length, end - chunkStart)
      let wait: Promise<void> | undefined
      if (from < to) {
        pos += to - from
        wait = guarded(from === 0 && to === chunk.length ? chunk : chunk.subarray(from, to))
      }
      return pos >= end && wait === undefined ? STOP : wait
    }
    const lent = p.sink.direct
    // Only a body that starts at `pos`: bytes to drop are framed in JS.
    if (lent === undefined || at !== pos) return push
    const direct: DirectSink = {
      target: (max) => {
        try {
          return lent.target(Math.min(max, end - pos))
        } catch (error) {
          throw new SinkFailure(error)
        }
      },
      filled: (n, sum) => {
        at += n
        pos += n
        let wait: Promise<void> | void
        try {
          wait = lent.filled(n, sum)
        } catch (error) {
          throw new SinkFailure(error)
        }
        const waited =
          wait === undefined
            ? undefined
            : wait.catch((error: unknown) => {
                throw new SinkFailure(error)
              })
        return pos >= end && waited === undefined ? STOP : waited
      }
    }
    return Object.assign(push, { direct })
  }

  for (;;) {
    let error: BackendError
    try {
      const built = await runPromise(Effect.either(get.request(pos, end - 1, pinned)))
      if (Either.isLeft(built)) throw built.left
      const request = built.right
      if (request.protocol !== "http:") return await pullInto(get.reader(pos, end - pos, pinned), p.sink, signal)
      const res = await p.receiver.exchange(request, onHead, signal)
      if (res.body !== undefined) throw get.refused(res.status, res.headers, res.body)
      if (pos >= end) return
      throw new BackendRequestError({ ...label, retryable: true, detail: `origin closed the body at byte ${pos}, expected up to ${end}` })
    } catch (e) {
      if (e instanceof SinkFailure) throw e.error
      if (signal?.aborted) throw signal.reason
      error = isBackendError(e) ? e : transportError(label, e)
    }
    // A resumed read must be pinned to the version already partly delivered.
    if (!isRetryable(error) || retriesLeft <= 0 || (pos > offset && pinned === undefined)) throw error
    retriesLeft--
    await sleep(Math.min(delay, policy.retryMaxMs) * (0.5 + Math.random()), signal)
    delay *= 2
  }
}

const BACKEND_TAGS: ReadonlySet<unknown> = new Set(["BackendNotFound", "BackendRequestError", "BackendRangeError"])
const isBackendError = (e: unknown): e is BackendError =>
  typeof e === "object" && e !== null && BACKEND_TAGS.has((e as { _tag?: unknown })._tag)
