/**
 * The two route layers. `Route.Origin` streams from the origin; `Route.Cache` splits a
 * read into aligned pieces fetched from the cluster through `TalonClient`, a bounded
 * window of them ahead of the writer, each falling back to the origin on its own when
 * its workers are unreachable or slow.
 */
import { Chunk, Effect, Either, Layer, Runtime, Stream } from "effect"
import { BackendStore, type ObjectStat } from "../backend/BackendStore.js"
import type { ObjectId } from "../core/ids.js"
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
  if (Chunk.size(chunks) === 1) return Chunk.unsafeHead(chunks)
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

    // The cluster must agree on the version the head promised; otherwise its workers could
    // serve another version's bytes, so the whole read goes to the origin (pinned) instead.
    // Asked on every read (the client answers from its own short-lived stat cache), so the
    // answer is the one the client's read itself uses, not an older one remembered here.
    const agrees = async (object: ObjectId, stat: ObjectStat): Promise<boolean> => {
      const info = await runPromise(Effect.either(client.stat(object)))
      return Either.isRight(info) && info.right.version === stat.version && info.right.size === stat.size
    }

    const fromOrigin = (object: ObjectId, offset: number, length: number, version: string, signal: AbortSignal): Promise<Settled> =>
      runPromise(Effect.either(originPiece(backend, object, offset, length, version)), { signal }).catch(() =>
        Either.left(new RouteError({ kind: "unavailable", detail: "read cancelled" }))
      )

    /**
     * One piece: from the cluster within `workerTimeoutMs`, else from the origin. Plain
     * promises around one runtime call each (a piece is the hot path; no fiber per timer).
     */
    const piece = async (object: ObjectId, stat: ObjectStat, offset: number, length: number, agreed: Promise<boolean>, signal: AbortSignal): Promise<Settled> => {
      if (signal.aborted) return Either.left(new RouteError({ kind: "unavailable", detail: "read cancelled" }))
      if (!(await agreed)) return fromOrigin(object, offset, length, stat.version, signal)
      const deadline = new AbortController()
      const onAbort = () => deadline.abort()
      signal.addEventListener("abort", onAbort, { once: true })
      const timer = setTimeout(() => deadline.abort(), workerTimeoutMs)
      // readStream hands over the worker's reply buffer itself; read() would copy it once more,
      // doubling the garbage a relayed byte leaves behind.
      const fromCache = await runPromise(Effect.either(Effect.map(Stream.runCollect(client.readStream(object, offset, length)), (chunks) => joinChunks(chunks, length))), {
        signal: deadline.signal
      }).catch(() => undefined)
      clearTimeout(timer)
      signal.removeEventListener("abort", onAbort)
      if (fromCache !== undefined && Either.isRight(fromCache) && fromCache.right.length === length) {
        counters.cachePieces++
        return Either.right(fromCache.right)
      }
      if (fromCache !== undefined && Either.isLeft(fromCache) && fromCache.left._tag === "ObjectNotFound") {
        return Either.left(new RouteError({ kind: "not-found", detail: fromCache.left.message }))
      }
      if (signal.aborted) return Either.left(new RouteError({ kind: "unavailable", detail: "read cancelled" }))
      // Unreachable or slow workers, no workers, the coordinator down, a short reply: this piece from the origin.
      counters.fallbackPieces++
      return fromOrigin(object, offset, length, stat.version, signal)
    }

    const open = (read: RouteRead): ByteReader => {
      const { object, stat } = read
      if (!read.cacheable) {
        counters.originReads++
        return originReader(runtime, backend, object, read.offset, read.length, stat.version)
      }
      const abort = new AbortController()
      const agreed = agrees(object, stat).then((ok) => {
        if (!ok) counters.originReads++
        return ok
      })
      const end = read.offset + read.length
      let pos = read.offset
      const window: Array<Promise<Settled>> = []
      const fill = () => {
        while (window.length < readAhead && pos < end) {
          // Pieces are aligned to multiples of pieceBytes within the object, so they never straddle blocks
          // (block sizes are multiples of the piece size) and repeated reads hit the same pieces.
          const len = Math.min(end, (Math.floor(pos / pieceBytes) + 1) * pieceBytes) - pos
          window.push(piece(object, stat, pos, len, agreed, abort.signal))
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
