/**
 * The two route layers. `Route.Origin` streams from the origin; `Route.Cache` splits a
 * read into aligned pieces fetched from the cluster through `TalonClient`, a bounded
 * window of them ahead of the writer, each falling back to the origin on its own when
 * its workers are unreachable or slow.
 *
 * Every piece is pinned to the version the response head promised: from the cluster as
 * GetPinnedRange of that version (workers refuse any other), from the origin under If-Match.
 * A worker that reports the version gone (VersionMismatch) ends the read as `changed`, like
 * the origin's 412, and the server stats again (before the head is sent) or cuts the
 * response (after): a body is always the bytes of the version its ETag names.
 */
import { Effect, Either, Layer, Runtime } from "effect"
import { BackendStore, type ObjectStat } from "../backend/BackendStore.js"
import { Payload } from "../client/SlabPool.js"
import { type ObjectInfo, TalonClient } from "../client/TalonClient.js"
import type { ObjectId } from "../core/ids.js"
import { GATEWAY_DEFAULTS } from "./config.js"
import { originReads, type PieceResult, readCancelled } from "./originRead.js"
import { type ByteReader, newCounters, type RemotePlacement, Route, RouteError, type RouteRead, type RouteShape } from "./Route.js"

export const OriginRoute: Layer.Layer<Route, never, BackendStore> = Layer.effect(
  Route,
  Effect.gen(function* () {
    const origin = originReads(yield* Effect.runtime<never>(), yield* BackendStore)
    const counters = newCounters()
    return {
      name: "origin",
      counters,
      open: (read) => {
        counters.originReads++
        return origin.reader(read)
      }
    } satisfies RouteShape
  })
)

export interface CacheRouteOptions {
  readonly pieceBytes: number
  readonly readAhead: number
  readonly workerTimeoutMs: number
}

export const makeCacheRoute = (options: Partial<CacheRouteOptions> = {}) =>
  Effect.gen(function* () {
    const pieceBytes = options.pieceBytes ?? GATEWAY_DEFAULTS.pieceBytes
    const readAhead = options.readAhead ?? GATEWAY_DEFAULTS.readAhead
    const workerTimeoutMs = options.workerTimeoutMs ?? GATEWAY_DEFAULTS.workerTimeoutMs
    const client = yield* TalonClient
    const runtime = yield* Effect.runtime<never>()
    const origin = originReads(runtime, yield* BackendStore)
    const runPromise = Runtime.runPromise(runtime)
    const counters = newCounters()

    const matches = (info: ObjectInfo, stat: ObjectStat) => info.version === stat.version && info.size === stat.size

    // When the client's own (short-lived) stat names another version than the head's, the
    // object has likely changed: the read goes to the origin pinned to the head's version,
    // which serves it or answers 412 (and the server stats again), rather than serving a
    // version the cluster may hold for up to the gateway's stat TTL. Asked on every read
    // (without a runtime call while the client's stat is fresh); the pieces are then read
    // as GetPinnedRange of exactly that version.
    const agreed = (object: ObjectId, stat: ObjectStat): ObjectInfo | undefined | Promise<ObjectInfo | undefined> => {
      const cached = client.cachedStat(object)
      if (cached !== undefined) return matches(cached, stat) ? cached : undefined
      return runPromise(Effect.either(client.stat(object))).then(
        (r) => (Either.isRight(r) && matches(r.right, stat) ? r.right : undefined),
        () => undefined
      )
    }

    const fromOrigin = (object: ObjectId, offset: number, length: number, version: string, isClosed: () => boolean): Promise<PieceResult> =>
      isClosed() ? Promise.resolve(readCancelled()) : origin.piece(object, offset, length, version, isClosed)

    /**
     * One piece from the cluster within `workerTimeoutMs`, else from the origin. Callbacks
     * and one promise: no fiber, no copy (the bytes stay in the client's read buffers
     * until the response writer has sent them).
     */
    const fromCache = (info: ObjectInfo, offset: number, length: number, isClosed: () => boolean, onCancel: (c: () => void) => void): Promise<PieceResult | undefined> =>
      new Promise((resolve) => {
        let done = false
        const timer = setTimeout(() => {
          if (done) return
          done = true
          cancel()
          resolve(undefined)
        }, workerTimeoutMs)
        const cancel = client.readRaw(info, offset, length, (r) => {
          if (done) {
            if (r.ok) for (const p of r.payloads) p.release()
            return
          }
          done = true
          clearTimeout(timer)
          if (!r.ok && r.error._tag === "VersionChanged") {
            // The origin no longer has the promised version: no piece of it can come from anywhere.
            return resolve({ ok: false, error: new RouteError({ kind: "changed", detail: r.error.message }) })
          }
          if (!r.ok && r.error._tag === "RateLimited") {
            // The gateway's tenant is over its limit: reading the origin instead would defeat the limit.
            return resolve({ ok: false, error: new RouteError({ kind: "unavailable", detail: r.error.message }) })
          }
          if (!r.ok || isClosed()) return resolve(undefined)
          const total = r.payloads.reduce((n, p) => n + p.length, 0)
          if (total !== length) {
            for (const p of r.payloads) p.release()
            return resolve(undefined)
          }
          resolve({ ok: true, bytes: Payload.concat(r.payloads) })
        })
        onCancel(() => {
          if (done) return
          done = true
          clearTimeout(timer)
          cancel()
          resolve(readCancelled())
        })
      })

    const open = (read: RouteRead): ByteReader => {
      const { object, stat } = read
      if (!read.cacheable) {
        counters.originReads++
        return origin.reader(read)
      }
      let closed = false
      const isClosed = () => closed
      const cancels = new Set<() => void>()
      const agreement = agreed(object, stat)
      let info: ObjectInfo | undefined | Promise<ObjectInfo | undefined> = agreement
      if (agreement instanceof Promise) {
        void agreement.then((i) => {
          info = i
          if (i === undefined) counters.originReads++
        })
      } else if (agreement === undefined) counters.originReads++

      const piece = async (offset: number, length: number): Promise<PieceResult> => {
        const i = info instanceof Promise ? await info : info
        if (closed) return readCancelled()
        if (i === undefined) return fromOrigin(object, offset, length, stat.version, isClosed)
        let cancel: (() => void) | undefined
        const got = await fromCache(i, offset, length, isClosed, (c) => {
          cancel = c
          cancels.add(c)
        })
        if (cancel !== undefined) cancels.delete(cancel)
        if (got !== undefined) {
          if (got.ok) counters.cachePieces++
          return got
        }
        if (closed) return readCancelled()
        // Unreachable or slow workers, no workers, the coordinator down, a short reply: this piece from the origin.
        counters.fallbackPieces++
        return fromOrigin(object, offset, length, stat.version, isClosed)
      }

      const end = read.offset + read.length
      let pos = read.offset
      const window: Array<Promise<PieceResult>> = []
      const fill = () => {
        while (window.length < readAhead && pos < end) {
          // Pieces are aligned to multiples of pieceBytes within the object, so they never straddle blocks
          // (block sizes are multiples of the piece size) and repeated reads hit the same pieces.
          const len = Math.min(end, (Math.floor(pos / pieceBytes) + 1) * pieceBytes) - pos
          window.push(piece(pos, len))
          pos += len
        }
      }
      return {
        next: async () => {
          if (closed) return undefined
          fill()
          const head = window.shift()
          if (head === undefined) return undefined
          fill()
          const r = await head
          if (!r.ok) throw r.error
          if (closed) {
            r.bytes.release()
            return undefined
          }
          return r.bytes
        },
        close: () => {
          if (closed) return
          closed = true
          for (const c of cancels) c()
          cancels.clear()
          // Pieces already in hand go back to the pool rather than to the GC.
          for (const w of window) void w.then((r) => r.ok && r.bytes.release())
          window.length = 0
        }
      }
    }

    // Workers the client can place reads on (a fresh membership query: readiness asks rarely).
    const workers = client.members(true).pipe(
      Effect.map((m) => m.length),
      Effect.orElseSucceed(() => 0)
    )
    const remote: RemotePlacement | undefined = client.options.dataTls
      ? undefined
      : {
          // The workers answer a GetPinnedRange with bytes of exactly that version or refuse it.
          place: (object, stat, offset) => client.placeBlock(object, stat.version, offset),
          blockSize: client.options.blockSize,
          tenant: client.options.tenant,
          workerTimeoutMs
        }
    return {
      name: "cache",
      counters,
      open,
      readAhead: client.readAhead,
      zones: client.zones,
      workers,
      ...(remote === undefined ? {} : { remote })
    } satisfies RouteShape
  })

export const CacheRoute = (options: Partial<CacheRouteOptions> = {}): Layer.Layer<Route, never, TalonClient | BackendStore> =>
  Layer.effect(Route, makeCacheRoute(options))
