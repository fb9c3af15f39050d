/**
 * Reads: placement, pinned requests, replica fallback.
 *
 * A read is planned into per-block pieces (plan.ts). Each piece goes to its
 * block's replicas in Maglev rank order over the membership in hand; when every
 * replica fails the membership is refreshed and the piece tried once more before
 * the read fails with every attempt listed.
 *
 * One read, one version: every request is a GetPinnedRange naming the version
 * the read's stat returned, so workers whose views of the object differ still
 * answer with bytes of that one version, or with VersionMismatch when the origin
 * no longer has it. `read` then stats the object again and reads it whole again
 * (at most `VERSION_ATTEMPTS` times) and fails with the typed `VersionChanged`
 * after that; `readStream` and `readRaw` fail with it at once (bytes of the old
 * version may already be with the caller).
 *
 * Read-ahead: `readStream` keeps a byte-bounded window of pieces requested ahead of
 * its consumer (PieceWindow.ts); `read` and `readRaw` go through the read-ahead cache
 * (ReadAheadCache.ts), which serves runs of sequential calls from chunks fetched ahead
 * and passes every other call straight to the pieces below.
 *
 * The piece path is plain callbacks (the gateway's relay runs on it); the only
 * fibers it starts — a membership fetch when none is usable — run in the
 * client's scope.
 */
import { Cause, Chunk, Effect, Exit, FiberSet, Option, Stream } from "effect"
import type { BlockId, ObjectId } from "../core/ids.js"
import { objectIdToPath, objectIdToUri } from "../core/objectId.js"
import { DataErrorCode, retryAfterMs } from "../protocol/index.js"
import { ClientConfig } from "./ClientConfig.js"
import { CoordinatorUnavailable, InvalidRequest, NoWorkers, RateLimited, ReadFailed, VersionChanged, type FailedAttempt, type TalonClientError } from "./errors.js"
import { type WorkerMembership, MembershipCache } from "./MembershipCache.js"
import { PieceWindow } from "./PieceWindow.js"
import { planPieces, type ReadRequestPiece } from "./plan.js"
import { type RawRead, ReadAheadCache } from "./ReadAheadCache.js"
import type { Payload } from "./SlabPool.js"
import { type ObjectInfo, StatCache } from "./StatCache.js"
import { type ObjectTarget, parseTarget } from "./target.js"
import type { CancelFetch } from "./WorkerPool.js"
import { Workers } from "./Workers.js"
import { ZoneAffinity } from "./zones.js"

export type { RawRead } from "./ReadAheadCache.js"

type PieceResult = { readonly ok: true; readonly payload: Payload } | { readonly ok: false; readonly error: TalonClientError }

/** Whole-read attempts, each pinned to a freshly stat'ed version, before VersionChanged. */
const VERSION_ATTEMPTS = 3
const MAX_RANK_ENTRIES = 16_384
const noop: CancelFetch = () => {}

/** Plain Uint8Array views (the read buffers are Buffers): callers get what `read` gives them. */
const plainViews = (views: ReadonlyArray<Uint8Array>): Array<Uint8Array> => {
  const out = new Array<Uint8Array>(views.length)
  for (let i = 0; i < views.length; i++) {
    const v = views[i]!
    out[i] = new Uint8Array(v.buffer, v.byteOffset, v.byteLength)
  }
  return out
}

const badRange = (offset: number, length: number): InvalidRequest | undefined =>
  !Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(length) || length < 0
    ? new InvalidRequest({ detail: `offset and length must be non-negative integers (got ${offset}, ${length})` })
    : undefined

export class Reader extends Effect.Service<Reader>()("talon/client/Reader", {
  scoped: Effect.gen(function* () {
    const options = yield* ClientConfig
    const membership = yield* MembershipCache
    const stats = yield* StatCache
    const { pool } = yield* Workers
    const zones = yield* ZoneAffinity
    const run = yield* FiberSet.makeRuntime<never>()

    /** The membership without a runtime call while it is usable; otherwise fetched on a fiber of the client's scope. */
    const withMembership = (refresh: boolean, onError: (e: TalonClientError) => void, k: (m: WorkerMembership) => void): void => {
      const m = refresh ? undefined : membership.fresh()
      if (m !== undefined) return k(m)
      run(Effect.exit(membership.get(refresh))).addObserver((exit) => {
        const result = Exit.flatten(exit)
        if (Exit.isSuccess(result)) return k(result.value)
        const failure = Cause.failureOption(result.cause)
        onError(
          failure._tag === "Some"
            ? failure.value
            : new CoordinatorUnavailable({ coordinator: options.coordinator, detail: `membership lookup interrupted: ${Cause.pretty(result.cause)}` })
        )
      })
    }

    // Replica order per block (in-zone owners first, zones.ts), remembered per membership (hashing a block id is most of a small read's CPU).
    const owners = (m: WorkerMembership, block: BlockId): ReadonlyArray<string> => {
      const key = `${objectIdToPath(block.object)}\0${block.offset}\0${block.blockSize}\0${block.version}`
      const hit = m.ranks.get(key)
      if (hit !== undefined) return hit
      if (m.ranks.size >= MAX_RANK_ENTRIES) m.ranks.clear()
      const ranked = zones.order(m.placement.rank(block, options.replicas), (id) => m.zones.get(id))
      m.ranks.set(key, ranked)
      return ranked
    }

    /** One piece, with replica fallback and one refresh-and-retry; `done` once unless cancelled. */
    const fetchPieceRaw = (piece: ReadRequestPiece, done: (r: PieceResult) => void): CancelFetch => {
      const attempts: Array<FailedAttempt> = []
      let cancelled = false
      let current: CancelFetch = noop
      const fail = (error: TalonClientError) => {
        if (!cancelled) done({ ok: false, error })
      }
      const tryOwners = (m: WorkerMembership, retried: boolean): void => {
        if (cancelled) return
        const ranked = owners(m, piece.block)
        if (ranked.length === 0) return fail(new NoWorkers({ coordinator: options.coordinator }))
        const attempt = (i: number): void => {
          if (cancelled) return
          if (i >= ranked.length) {
            if (!retried) return withMembership(true, fail, (next) => tryOwners(next, true))
            return fail(
              new ReadFailed({
                object: objectIdToUri(piece.block.object),
                offset: piece.offset,
                length: piece.length,
                detail: attempts[attempts.length - 1]?.detail ?? "no replica answered",
                attempts
              })
            )
          }
          const id = ranked[i]!
          current = pool.fetch(m.addresses.get(id) ?? id, piece.block.object, piece.offset, piece.length, (r) => {
            current = noop
            if (cancelled) {
              if (r.ok) r.payload.release()
              return
            }
            if (r.ok) {
              zones.served(m.zones.get(id), r.payload.length)
              return done(r)
            }
            if (r.error._tag === "WorkerRejected" && r.error.code === DataErrorCode.VersionMismatch) {
              // The worker asked the origin: another replica cannot have bytes of a version the origin dropped.
              return fail(
                new VersionChanged({
                  object: objectIdToUri(piece.block.object),
                  version: piece.block.version,
                  attempts: 1,
                  detail: `${r.error.address}: ${r.error.detail}`
                })
              )
            }
            // Over the tenant's limit: asking the next replica would spend the allowance again there.
            if (r.error._tag === "WorkerRejected" && r.error.code === DataErrorCode.RateLimited) {
              return fail(
                new RateLimited({ object: objectIdToUri(piece.block.object), address: r.error.address, detail: r.error.detail, retryAfterMs: retryAfterMs(r.error.detail) })
              )
            }
            attempts.push({ address: r.error.address, detail: r.error.detail })
            attempt(i + 1)
          }, piece.block.version)
        }
        attempt(0)
      }
      withMembership(false, fail, (m) => tryOwners(m, false))
      return () => {
        cancelled = true
        current()
      }
    }

    const plan = (info: ObjectInfo, offset: number, length: number) =>
      planPieces(info, offset, length, options.blockSize, options.maxRequestBytes)

    const validate = (target: ObjectTarget, offset: number, length: number): Effect.Effect<ObjectInfo, TalonClientError> =>
      Effect.suspend(() => {
        const bad = badRange(offset, length)
        return bad !== undefined ? Effect.fail(bad) : Effect.flatMap(parseTarget(target), stats.stat)
      })

    /**
     * One attempt of `read`: every byte of exactly `info.version`, through the read-ahead, copied
     * into `into` (or a new buffer) once all of them are in, so a failed attempt writes nothing.
     */
    const readVersion = (info: ObjectInfo, offset: number, length: number, into?: Uint8Array): Effect.Effect<Uint8Array, TalonClientError> =>
      Effect.async<Uint8Array, TalonClientError>((resume) => {
        const cancel = readRaw(info, offset, length, (r) => {
          if (!r.ok) return resume(Effect.fail(r.error))
          const n = Math.max(0, Math.min(offset + length, info.size) - offset)
          const out = into === undefined ? new Uint8Array(n) : into.subarray(0, n)
          let at = 0
          for (const p of r.payloads) {
            for (const v of p.views) {
              out.set(v, at)
              at += v.length
            }
            p.release()
          }
          resume(Effect.succeed(out))
        })
        return Effect.sync(cancel)
      })

    const readOneVersion = (target: ObjectTarget, offset: number, length: number, into?: Uint8Array): Effect.Effect<Uint8Array, TalonClientError> =>
      Effect.gen(function* () {
        let info = yield* validate(target, offset, length)
        for (let attempt = 1; ; attempt++) {
          const r = yield* Effect.either(readVersion(info, offset, length, into))
          if (r._tag === "Right") return r.right
          if (r.left._tag !== "VersionChanged") return yield* Effect.fail(r.left)
          if (attempt >= VERSION_ATTEMPTS) return yield* Effect.fail(new VersionChanged({ ...r.left, attempts: attempt }))
          info = yield* stats.restat(info.object)
        }
      })

    /** `[offset, offset+length)` clamped at the object's end, in one buffer, all of one version. */
    const read = (target: ObjectTarget, offset: number, length: number): Effect.Effect<Uint8Array, TalonClientError> =>
      readOneVersion(target, offset, length)

    /**
     * `read` into the caller's buffer: `dest.length` bytes from `offset` (fewer at the object's
     * end), all of one version; the bytes written are the returned view of `dest`. A caller
     * reusing `dest` allocates nothing per byte: the replies land in the client's recycled read
     * buffers and are copied once, so no fresh memory is left for the GC.
     */
    const readInto = (target: ObjectTarget, offset: number, dest: Uint8Array): Effect.Effect<Uint8Array, TalonClientError> =>
      readOneVersion(target, offset, dest.length, dest)

    // The stream's window: `readAheadBytes` ahead of the consumer, at least `parallelism` pieces.
    // Pieces ahead of a sequential reader are an eighth of the window (at most `maxRequestBytes`):
    // more requests in flight for the same memory, so a cold read spreads over more blocks,
    // workers and origin connections.
    const aheadPiece = Math.max(1, Math.min(options.maxRequestBytes, Math.floor(options.readAheadBytes / 8)))
    const streamPiece = options.readAheadBytes > 0 ? aheadPiece : options.maxRequestBytes
    const streamPieces = Math.max(options.parallelism, Math.ceil(options.readAheadBytes / streamPiece))
    const streamBytes = Math.max(options.readAheadBytes, options.parallelism * streamPiece)

    const readStream = (target: ObjectTarget, offset: number, length: number): Stream.Stream<Uint8Array, TalonClientError> =>
      Stream.unwrapScoped(
        Effect.gen(function* () {
          const info = yield* validate(target, offset, length)
          const window = yield* Effect.acquireRelease(
            Effect.sync(
              () => new PieceWindow(planPieces(info, offset, length, options.blockSize, streamPiece), streamBytes, streamPieces, fetchPieceRaw)
            ),
            (w) => Effect.sync(() => w.close())
          )
          // A piece is one pull: its views, as they landed in the read buffers, become the
          // stream's chunks (the buffers are given to the consumer, not copied out of them).
          return Stream.repeatEffectChunkOption(
            Effect.async<Chunk.Chunk<Uint8Array>, Option.Option<TalonClientError>>((resume) => {
              window.next((r) => {
                if (!r.ok) return resume(Effect.fail(Option.some(r.error)))
                if (r.payload === undefined) return resume(Effect.fail(Option.none()))
                resume(Effect.succeed(Chunk.unsafeFromArray(plainViews(r.payload.disown()))))
              })
            })
          )
        })
      )

    /** The direct path: the range's pieces from the workers, `parallelism` at a time. */
    const fetchRange = (info: ObjectInfo, offset: number, length: number, done: (result: RawRead) => void): CancelFetch => {
      const bad = badRange(offset, length)
      if (bad !== undefined) {
        done({ ok: false, error: bad })
        return noop
      }
      const pieces = plan(info, offset, length)
      if (pieces.length === 0) {
        done({ ok: true, payloads: [] })
        return noop
      }
      const payloads: Array<Payload | undefined> = new Array(pieces.length)
      const cancels: Array<CancelFetch> = []
      let next = 0
      let remaining = pieces.length
      let finished = false
      const finish = (result: RawRead) => {
        if (finished) return
        finished = true
        for (const c of cancels) c()
        if (!result.ok) for (const p of payloads) p?.release()
        done(result)
      }
      const launch = (): void => {
        if (finished || next >= pieces.length) return
        const i = next++
        cancels.push(
          fetchPieceRaw(pieces[i]!, (r) => {
            if (!r.ok) return finish(r)
            if (finished) return r.payload.release()
            payloads[i] = r.payload
            if (--remaining === 0) return finish({ ok: true, payloads: payloads as Array<Payload> })
            launch()
          })
        )
      }
      for (let k = 0; k < options.parallelism; k++) launch()
      return () => {
        if (finished) return
        finished = true
        for (const c of cancels) c()
        for (const p of payloads) p?.release()
      }
    }

    const readAhead = yield* Effect.acquireRelease(
      Effect.sync(
        () =>
          new ReadAheadCache(
            {
              chunkBytes: aheadPiece,
              windowBytes: options.readAheadBytes,
              capacityBytes: options.readAheadCacheBytes
            },
            fetchRange
          )
      ),
      (cache) => Effect.sync(() => cache.close())
    )

    function readRaw(info: ObjectInfo, offset: number, length: number, done: (result: RawRead) => void): CancelFetch {
      const bad = badRange(offset, length)
      if (bad !== undefined) {
        done({ ok: false, error: bad })
        return noop
      }
      return readAhead.read(info, offset, length, done)
    }

    /**
     * Data addresses of the replicas of the block of `version` holding `offset`, in read order,
     * from the membership in hand; undefined when none is usable without asking the coordinator.
     */
    const placeBlock = (object: ObjectId, version: string, offset: number): ReadonlyArray<string> | undefined => {
      const m = membership.fresh()
      if (m === undefined) return undefined
      const blockOffset = Math.floor(offset / options.blockSize) * options.blockSize
      const ranked = owners(m, { object, offset: blockOffset, blockSize: options.blockSize, version })
      return ranked.map((id) => m.addresses.get(id) ?? id)
    }

    return { read, readInto, readStream, readRaw, readAhead: () => readAhead.stats(), placeBlock }
  })
}) {}
