/**
 * The two route layers. `Route.Origin` streams from the origin; `Route.Cache` splits a
 * read into aligned pieces fetched from the cluster through `TalonClient`, a bounded
 * window of them ahead of the writer, each falling back to the origin on its own when
 * its workers are unreachable or slow.
 */
import { Chunk, Effect, Either, Layer, Runtime, Stream } from "effect"
import { BackendStore } from "../backend/BackendStore.js"
import { TalonClient } from "../client/TalonClient.js"
import { GATEWAY_DEFAULTS } from "./config.js"
import { originPiece, originReader } from "./originRead.js"
import { type ByteReader, newCounters, Route, RouteError, type RouteRead, type RouteShape } from "./Route.js"

export const OriginRoute: Layer.Layer<Route, never, BackendStore> = Layer.effect(
  Route,
  Effect.gen(function* () {
    const backend = yield* BackendStore
    const runtime = yield* Effect.runtime<never>()
    const counters = newCounters()
    return {
      name: "origin",
      counters,
      open: (read) => {
        counters.originReads++
        return originReader(runtime, backend, read.object, read.offset, read.length, read.stat.version)
      }
    } satisfies RouteShape
  })
)

export interface CacheRouteOptions {
  readonly pieceBytes: number
  readonly readAhead: number
  readonly workerTimeoutMs: number
}

type Settled = Either.Either<Uint8Array, RouteError>

const joinChunks = (chunks: Chunk.Chunk<Uint8Array>, length: number): Uint8Array => {
  const out = new Uint8Array(length)
  let at = 0
  for (const c of chunks) {
    if (at + c.length > length) break
    out.set(c, at)
    at += c.length
  }
  return at === length ? out : out.subarray(0, at)
}

export const makeCacheRoute = (options: Partial<CacheRouteOptions> = {}) =>
  Effect.gen(function* () {
    const pieceBytes = options.pieceBytes ?? GATEWAY_DEFAULTS.pieceBytes
    const readAhead = options.readAhead ?? GATEWAY_DEFAULTS.readAhead
    const workerTimeoutMs = options.workerTimeoutMs ?? GATEWAY_DEFAULTS.workerTimeoutMs
    const client = yield* TalonClient
    const backend = yield* BackendStore
    const runtime = yield* Effect.runtime<never>()
    const runPromise = Runtime.runPromise(runtime)
    const counters = newCounters()

    const open = (read: RouteRead): ByteReader => {
      const { object, stat } = read
      if (!read.cacheable) {
        counters.originReads++
        return originReader(runtime, backend, object, read.offset, read.length, stat.version)
      }
      const abort = new AbortController()
      const settle = (effect: Effect.Effect<Uint8Array, RouteError>): Promise<Settled> =>
        runPromise(Effect.either(effect), { signal: abort.signal }).catch(() =>
          Either.left(new RouteError({ kind: "unavailable", detail: "read cancelled" }))
        )

      // The cluster must agree on the version the head promised; otherwise its workers could
      // serve another version's bytes, so the whole read goes to the origin (pinned) instead.
      let agreed: Effect.Effect<boolean> | undefined
      const agree = () =>
        (agreed ??= client.stat(object).pipe(
          Effect.map((info) => info.version === stat.version && info.size === stat.size),
          Effect.orElseSucceed(() => false),
          Effect.tap((ok) =>
            Effect.sync(() => {
              if (!ok) counters.originReads++
            })
          ),
          Effect.cached,
          Effect.runSync
        ))

      const piece = (offset: number, length: number): Effect.Effect<Uint8Array, RouteError> =>
        Effect.gen(function* () {
          if (!(yield* agree())) return yield* originPiece(backend, object, offset, length, stat.version)
          // readStream hands over the worker's reply buffer itself (read() would copy it once more).
          const fromCache = yield* client.readStream(object, offset, length).pipe(
            Stream.runCollect,
            Effect.map((chunks) => (Chunk.size(chunks) === 1 ? Chunk.unsafeHead(chunks) : joinChunks(chunks, length))),
            Effect.timeout(workerTimeoutMs),
            Effect.either
          )
          if (Either.isRight(fromCache) && fromCache.right.length === length) {
            counters.cachePieces++
            return fromCache.right
          }
          if (Either.isLeft(fromCache) && fromCache.left._tag === "ObjectNotFound") {
            return yield* Effect.fail(new RouteError({ kind: "not-found", detail: fromCache.left.message }))
          }
          // Unreachable or slow workers, no workers, the coordinator down, a short reply: this piece from the origin.
          counters.fallbackPieces++
          return yield* originPiece(backend, object, offset, length, stat.version)
        })

      const end = read.offset + read.length
      let pos = read.offset
      const window: Array<Promise<Settled>> = []
      const fill = () => {
        while (window.length < readAhead && pos < end) {
          // Pieces are aligned to multiples of pieceBytes within the object, so they never straddle blocks
          // (block sizes are multiples of the piece size) and repeated reads hit the same pieces.
          const len = Math.min(end, (Math.floor(pos / pieceBytes) + 1) * pieceBytes) - pos
          window.push(settle(piece(pos, len)))
          pos += len
        }
      }
      let closed = false
      return {
        next: async () => {
          if (closed) return undefined
          fill()
          const head = window.shift()
          if (head === undefined) return undefined
          fill()
          const r = await head
          if (Either.isLeft(r)) throw r.left
          return r.right
        },
        close: () => {
          if (closed) return
          closed = true
          window.length = 0
          abort.abort()
        }
      }
    }

    return { name: "cache", counters, open } satisfies RouteShape
  })

export const CacheRoute = (options: Partial<CacheRouteOptions> = {}): Layer.Layer<Route, never, TalonClient | BackendStore> =>
  Layer.effect(Route, makeCacheRoute(options))
