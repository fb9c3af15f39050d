/**
 * Reads objects through a Talon cluster.
 *
 * The coordinator is consulted only for membership (cached for a TTL) and object
 * metadata (size + version, cached briefly); placement is computed locally with
 * Maglev, and bytes come straight from workers. A read is planned into per-block
 * segments (split further into bounded GetRange requests); each goes to the
 * block's replicas in rank order, and when every replica fails the membership is
 * refreshed and the request retried once before the read fails. While the
 * coordinator does not answer, reads go on with the last membership and stats
 * come from workers (CoordinatorView.ts).
 *
 * One read, one version: every request of a read is a GetCachedRange naming the version the
 * read's stat returned, so workers whose views of the object differ still answer with bytes of
 * that one version, or with VersionMismatch when the origin no longer has it. `read` then
 * stats the object again and reads it whole again (at most `VERSION_ATTEMPTS` times) and
 * fails with the typed `VersionChanged` after that; `readStream` and `readRaw` fail with it
 * at once (bytes of the old version may already be with the caller).
 */
import {
  Cause,
  Context,
  Effect,
  Either,
  Exit,
  Layer,
  ManagedRuntime,
  Runtime,
  Stream,
  type ConfigError,
  type Scope
} from "effect"
import type { BlockId, NodeInfo, ObjectId } from "../core/ids.js"
import { objectIdFromPath, objectIdFromUri, objectIdToPath, objectIdToUri } from "../core/objectId.js"
import { planRead } from "../core/geometry.js"
import { DataErrorCode, type ControlMessage } from "../protocol/index.js"
import { ControlChannel } from "../transport/ControlChannel.js"
import { CoordinatorView, type ControlPlaneStats, type Membership, type ObjectInfo } from "./CoordinatorView.js"
import { resolveClientOptions, type TalonClientOptions } from "./config.js"
import {
  CoordinatorUnavailable,
  InvalidRequest,
  NoWorkers,
  ReadFailed,
  VersionChanged,
  type FailedAttempt,
  type TalonClientError
} from "./errors.js"
import type { Payload } from "./SlabPool.js"
import { type CancelFetch, WorkerPool } from "./WorkerPool.js"

export type { ControlPlaneStats, ObjectInfo } from "./CoordinatorView.js"

export interface ListEntry {
  /** Namespace path form, e.g. `/s3/bucket/key`. */
  readonly path: string
  readonly size: number
}

/** An object given as a URI (`s3://bucket/key`), a path (`/s3/bucket/key`) or an ObjectId. */
export type ObjectTarget = string | ObjectId

export interface ReadRequestPiece {
  readonly block: BlockId
  /** Absolute offset within the object. */
  readonly offset: number
  readonly length: number
  /** Where these bytes land in the caller's result. */
  readonly resultOffset: number
}

export type RawRead =
  | { readonly ok: true; readonly payloads: ReadonlyArray<Payload> }
  | { readonly ok: false; readonly error: TalonClientError }

export interface TalonClientShape {
  readonly options: TalonClientOptions
  readonly stat: (target: ObjectTarget) => Effect.Effect<ObjectInfo, TalonClientError>
  /** The stat `stat` would answer from its cache right now, without a runtime call; `undefined` when it would ask. */
  readonly cachedStat: (object: ObjectId) => ObjectInfo | undefined
  /**
   * The relay hot path: `[offset, offset+length)` (clamped at the end) of exactly the
   * version `info` names, as the workers' reply bytes themselves — views into the
   * client's pooled read buffers, in order, no copy and no fiber. Replica order,
   * fallback and the one refresh-and-retry are those of `read`. `done` is called once
   * unless the returned function cancels first. The caller must `release()` every
   * payload once it has consumed the bytes (or may drop them unreleased: that is safe,
   * only slower). At most `parallelism` requests are in flight.
   */
  readonly readRaw: (info: ObjectInfo, offset: number, length: number, done: (result: RawRead) => void) => CancelFetch
  /** `[offset, offset+length)` clamped at the object's end, in one buffer. */
  readonly read: (target: ObjectTarget, offset: number, length: number) => Effect.Effect<Uint8Array, TalonClientError>
  /** The same bytes as `read`, in order, in pieces of at most `maxRequestBytes`, at most `parallelism` in flight. */
  readonly readStream: (target: ObjectTarget, offset: number, length: number) => Stream.Stream<Uint8Array, TalonClientError>
  /** Objects under a prefix (`/s3/bucket/prefix` or `s3://bucket/prefix`). */
  readonly list: (prefix: string) => Effect.Effect<ReadonlyArray<ListEntry>, TalonClientError>
  /** Healthy members (cached for the membership TTL unless `refresh`, which reports a coordinator outage instead of the last list). */
  readonly members: (refresh?: boolean) => Effect.Effect<ReadonlyArray<NodeInfo>, TalonClientError>
  /** Whether the coordinator answers, the membership's age, and how often stale or worker-sourced metadata was used. */
  readonly controlPlane: () => ControlPlaneStats
}

export const parseTarget = (target: ObjectTarget): Either.Either<ObjectId, InvalidRequest> => {
  if (typeof target !== "string") return Either.right(target)
  const parsed = target.includes("://") ? objectIdFromUri(target) : objectIdFromPath(target)
  return Either.mapLeft(parsed, (e) => new InvalidRequest({ detail: e.message }))
}

/** `s3://bucket/prefix` → `/s3/bucket/prefix`; path forms pass through. */
export const toListPrefix = (prefix: string): string => {
  const sep = prefix.indexOf("://")
  if (sep <= 0) return prefix
  const scheme = prefix.slice(0, sep)
  const name = scheme === "gs" ? "gcs" : scheme === "azure" ? "az" : scheme
  return `/${name}/${prefix.slice(sep + 3)}`
}

/** Whole-read attempts, each pinned to a freshly stat'ed version, before VersionChanged. */
const VERSION_ATTEMPTS = 3
const MAX_RANK_ENTRIES = 16_384
const noop: CancelFetch = () => {}

export const makeTalonClient = (
  explicit: Partial<TalonClientOptions> = {}
): Effect.Effect<TalonClientShape, ConfigError.ConfigError, Scope.Scope> =>
  Effect.gen(function* () {
    const options = yield* resolveClientOptions(explicit)
    const control = yield* ControlChannel.make(options.coordinator, {
      requestTimeout: `${options.controlTimeoutMs} millis`,
      connectTimeout: `${options.connectTimeoutMs} millis`
    })
    const pool = new WorkerPool({
      connectionsPerWorker: options.connectionsPerWorker,
      requestTimeout: `${options.requestTimeoutMs} millis`,
      connectTimeout: `${options.connectTimeoutMs} millis`,
      maxRequestBytes: options.maxRequestBytes
    })
    const view = new CoordinatorView(options, control, pool)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        view.close()
        pool.close()
      })
    )
    const ask = (message: ControlMessage) => view.ask(message)
    const getMembership = (refresh: boolean) => view.get(refresh)
    const statObject = (object: ObjectId): Effect.Effect<ObjectInfo, TalonClientError> => view.stat(object, objectIdToPath(object))
    /** The stat asked again (a worker said the cached version is gone at the origin). */
    const restat = (object: ObjectId): Effect.Effect<ObjectInfo, TalonClientError> => view.restat(object, objectIdToPath(object))

    // ---- one GetRange piece, with replica fallback and one refresh-and-retry ----
    const runtime = yield* Effect.runtime<never>()
    const runCallback = Runtime.runCallback(runtime)
    /** The membership without a runtime call while it is fresh. */
    const withMembership = (refresh: boolean, onError: (e: TalonClientError) => void, k: (m: Membership) => void): void => {
      const m = refresh ? undefined : view.fresh()
      if (m !== undefined) return k(m)
      runCallback(getMembership(refresh), {
        onExit: (exit) => {
          if (Exit.isSuccess(exit)) return k(exit.value)
          const failure = Cause.failureOption(exit.cause)
          onError(
            failure._tag === "Some"
              ? failure.value
              : new CoordinatorUnavailable({ coordinator: options.coordinator, detail: `membership lookup interrupted: ${Cause.pretty(exit.cause)}` })
          )
        }
      })
    }
    // Replica order per block, remembered per membership (hashing a block id is most of a small read's CPU).
    const owners = (m: Membership, block: BlockId): ReadonlyArray<string> => {
      const key = `${objectIdToPath(block.object)}\0${block.offset}\0${block.blockSize}\0${block.version}`
      const hit = m.ranks.get(key)
      if (hit !== undefined) return hit
      if (m.ranks.size >= MAX_RANK_ENTRIES) m.ranks.clear()
      const ranked = m.placement.rank(block, options.replicas)
      m.ranks.set(key, ranked)
      return ranked
    }
    type PieceResult = { readonly ok: true; readonly payload: Payload } | { readonly ok: false; readonly error: TalonClientError }
    const fetchPieceRaw = (piece: ReadRequestPiece, done: (r: PieceResult) => void): CancelFetch => {
      const attempts: Array<FailedAttempt> = []
      let cancelled = false
      let current: CancelFetch = noop
      const fail = (error: TalonClientError) => {
        if (!cancelled) done({ ok: false, error })
      }
      const tryOwners = (m: Membership, retried: boolean): void => {
        if (cancelled) return
        const ranked = owners(m, piece.block)
        if (ranked.length === 0) return fail(new NoWorkers({ coordinator: options.coordinator }))
        const attempt = (i: number): void => {
          if (cancelled) return
          if (i >= ranked.length) {
            if (!retried) return withMembership(true, fail, (fresh) => tryOwners(fresh, true))
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
            if (r.ok) return done(r)
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

    const fetchPiece = (piece: ReadRequestPiece): Effect.Effect<Payload, TalonClientError> =>
      Effect.async<Payload, TalonClientError>((resume) => {
        const cancel = fetchPieceRaw(piece, (r) => resume(r.ok ? Effect.succeed(r.payload) : Effect.fail(r.error)))
        return Effect.sync(cancel)
      })

    const plan = (info: ObjectInfo, offset: number, length: number): Array<ReadRequestPiece> => {
      const pieces: Array<ReadRequestPiece> = []
      for (const segment of planRead(offset, length, info.size, options.blockSize)) {
        const block: BlockId = {
          object: info.object,
          offset: segment.blockOffset,
          blockSize: options.blockSize,
          version: info.version
        }
        for (let done = 0; done < segment.length; done += options.maxRequestBytes) {
          pieces.push({
            block,
            offset: segment.objectOffset + done,
            length: Math.min(options.maxRequestBytes, segment.length - done),
            resultOffset: segment.objectOffset + done - offset
          })
        }
      }
      return pieces
    }

    const validate = (target: ObjectTarget, offset: number, length: number): Effect.Effect<ObjectInfo, TalonClientError> =>
      Effect.gen(function* () {
        if (!Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(length) || length < 0) {
          return yield* Effect.fail(
            new InvalidRequest({ detail: `offset and length must be non-negative integers (got ${offset}, ${length})` })
          )
        }
        const object = yield* parseTarget(target)
        return yield* statObject(object)
      })

    const read = (target: ObjectTarget, offset: number, length: number): Effect.Effect<Uint8Array, TalonClientError> =>
      Effect.gen(function* () {
        let info = yield* validate(target, offset, length)
        for (let attempt = 1; ; attempt++) {
          const r = yield* Effect.either(readVersion(info, offset, length))
          if (r._tag === "Right") return r.right
          if (r.left._tag !== "VersionChanged") return yield* Effect.fail(r.left)
          if (attempt >= VERSION_ATTEMPTS) return yield* Effect.fail(new VersionChanged({ ...r.left, attempts: attempt }))
          info = yield* restat(info.object)
        }
      })

    /** One attempt of `read`: every piece of exactly `info.version`. */
    const readVersion = (info: ObjectInfo, offset: number, length: number): Effect.Effect<Uint8Array, TalonClientError> =>
      Effect.gen(function* () {
        const pieces = plan(info, offset, length)
        const total = Math.max(0, Math.min(offset + length, info.size) - offset)
        const out = new Uint8Array(total)
        yield* Effect.forEach(
          pieces,
          (piece) =>
            Effect.map(fetchPiece(piece), (payload) => {
              let at = piece.resultOffset
              for (const v of payload.views) {
                out.set(v, at)
                at += v.length
              }
              payload.release()
            }),
          { concurrency: options.parallelism, discard: true }
        )
        return out
      })

    const readStream = (
      target: ObjectTarget,
      offset: number,
      length: number
    ): Stream.Stream<Uint8Array, TalonClientError> =>
      Stream.unwrap(
        Effect.map(validate(target, offset, length), (info) =>
          Stream.fromIterable(plan(info, offset, length)).pipe(
            Stream.mapEffect((piece) => Effect.map(fetchPiece(piece), (p) => new Uint8Array(p.copyOut())), {
              concurrency: options.parallelism
            }),
            Stream.rechunk(1)
          )
        )
      )

    const list = (prefix: string): Effect.Effect<ReadonlyArray<ListEntry>, TalonClientError> =>
      ask({ _tag: "ListObjects", prefix: toListPrefix(prefix) }).pipe(
        Effect.flatMap((reply): Effect.Effect<ReadonlyArray<ListEntry>, TalonClientError> =>
          reply._tag === "ObjectList"
            ? Effect.succeed(reply.entries as ReadonlyArray<ListEntry>)
            : reply._tag === "Ack" && !reply.ok
              ? Effect.fail(new InvalidRequest({ detail: `listing ${prefix}: ${reply.detail ?? "refused"}` }))
              : Effect.fail(view.unexpected("ListObjects", reply))
        )
      )

    const cachedStat = (object: ObjectId): ObjectInfo | undefined => view.freshStat(object, objectIdToPath(object))

    const readRaw = (info: ObjectInfo, offset: number, length: number, done: (result: RawRead) => void): CancelFetch => {
      if (!Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(length) || length < 0) {
        done({ ok: false, error: new InvalidRequest({ detail: `offset and length must be non-negative integers (got ${offset}, ${length})` }) })
        return noop
      }
      const pieces = plan(info, offset, length)
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
      if (pieces.length === 0) {
        done({ ok: true, payloads: [] })
        return noop
      }
      for (let k = 0; k < options.parallelism; k++) launch()
      return () => {
        if (finished) return
        finished = true
        for (const c of cancels) c()
        for (const p of payloads) p?.release()
      }
    }

    return {
      options,
      stat: (target) => Effect.flatMap(parseTarget(target), statObject),
      cachedStat,
      readRaw,
      read,
      readStream,
      list,
      members: (refresh = false) => Effect.map(view.get(refresh, refresh), (m) => m.nodes),
      controlPlane: () => view.stats()
    } satisfies TalonClientShape
  })

export class TalonClient extends Context.Tag("talon/TalonClient")<TalonClient, TalonClientShape>() {
  static readonly layer = (options: Partial<TalonClientOptions> = {}) =>
    Layer.scoped(TalonClient, makeTalonClient(options))
}

/** Promise facade for code that does not use Effect. Call `close()` when done. */
export interface TalonClientPromise {
  readonly stat: (target: ObjectTarget) => Promise<ObjectInfo>
  readonly read: (target: ObjectTarget, offset: number, length: number) => Promise<Uint8Array>
  /** Async iteration over `readStream`. */
  readonly readStream: (target: ObjectTarget, offset: number, length: number) => AsyncIterable<Uint8Array>
  readonly list: (prefix: string) => Promise<ReadonlyArray<ListEntry>>
  readonly close: () => Promise<void>
}

export const createTalonClient = (options: Partial<TalonClientOptions> = {}): TalonClientPromise => {
  const runtime = ManagedRuntime.make(TalonClient.layer(options))
  // Rejects with the typed error itself (e.g. an ObjectNotFound with its `_tag`), not a FiberFailure wrapper.
  const run = async <A>(f: (client: TalonClientShape) => Effect.Effect<A, TalonClientError>): Promise<A> => {
    const exit = await runtime.runPromiseExit(Effect.flatMap(TalonClient, f))
    if (Exit.isSuccess(exit)) return exit.value
    throw Cause.squash(exit.cause)
  }
  return {
    stat: (target) => run((c) => c.stat(target)),
    read: (target, offset, length) => run((c) => c.read(target, offset, length)),
    readStream: (target, offset, length) => ({
      async *[Symbol.asyncIterator]() {
        const rt = await runtime.runtime()
        yield* Stream.toAsyncIterableRuntime(
          Stream.unwrap(Effect.map(TalonClient, (c) => c.readStream(target, offset, length))),
          rt
        )
      }
    }),
    list: (prefix) => run((c) => c.list(prefix)),
    close: () => runtime.dispose()
  }
}
