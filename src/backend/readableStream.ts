import type { Readable } from "node:stream"
import { Chunk, Effect, Option, Stream } from "effect"

/**
 * A Node Readable as a Stream with backpressure and an idle timeout. Data events fill a
 * small queue; past `highWaterMark` bytes the readable is paused until the consumer pulls,
 * so a slow consumer holds at most that much (plus socket buffers). The idle timer runs
 * only while the consumer is waiting for bytes, so a slow consumer is never timed out.
 * One plain callback per wait, no fiber per chunk: this is the miss path's hot loop.
 */
export const fromReadable = <E>(
  readable: Readable,
  options: {
    readonly idleMs: number
    readonly onError: (error: unknown) => E
    readonly onIdle: () => E
    readonly highWaterMark?: number
  }
): Stream.Stream<Uint8Array, E> =>
  Stream.suspend(() => {
    const highWaterMark = options.highWaterMark ?? 1024 * 1024
    let queue: Array<Uint8Array> = []
    let queued = 0
    let ended = false
    let failure: { readonly error: unknown } | undefined
    let wake: (() => void) | undefined

    const notify = () => {
      const w = wake
      wake = undefined
      w?.()
    }
    const onData = (chunk: Uint8Array) => {
      queue.push(chunk)
      queued += chunk.length
      if (queued >= highWaterMark) readable.pause()
      notify()
    }
    const onEnd = () => {
      ended = true
      notify()
    }
    const onError = (error: unknown) => {
      failure ??= { error }
      notify()
    }
    const onClose = () => {
      if (!ended) failure ??= { error: Object.assign(new Error("body closed before its end"), { code: "ERR_STREAM_PREMATURE_CLOSE" }) }
      notify()
    }
    readable.on("data", onData)
    readable.on("end", onEnd)
    readable.on("error", onError)
    readable.on("close", onClose)

    const take = (): Chunk.Chunk<Uint8Array> => {
      const out = Chunk.unsafeFromArray(queue)
      queue = []
      queued = 0
      if (readable.isPaused() && !ended) readable.resume()
      return out
    }

    const pull: Effect.Effect<Chunk.Chunk<Uint8Array>, Option.Option<E>> = Effect.suspend(() => {
      if (queue.length > 0) return Effect.succeed(take())
      if (failure !== undefined) return Effect.fail(Option.some(options.onError(failure.error)))
      if (ended) return Effect.fail(Option.none())
      return Effect.async<Chunk.Chunk<Uint8Array>, Option.Option<E>>((resume) => {
        const timer = setTimeout(() => {
          wake = undefined
          resume(Effect.fail(Option.some(options.onIdle())))
        }, options.idleMs)
        wake = () => {
          clearTimeout(timer)
          resume(pull)
        }
        return Effect.sync(() => {
          clearTimeout(timer)
          wake = undefined
        })
      })
    })

    return Stream.repeatEffectChunkOption(pull).pipe(
      Stream.ensuring(
        Effect.sync(() => {
          readable.off("data", onData)
          readable.off("end", onEnd)
          readable.off("error", onError)
          readable.off("close", onClose)
          // An unfinished body must not go back to the keep-alive pool half-read.
          if (!ended) readable.destroy()
        })
      )
    )
  })
