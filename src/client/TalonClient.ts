/**
 * Reads objects through a Talon cluster.
 *
 * The coordinator is consulted only for membership (cached for a TTL) and object
 * metadata (size + version, cached briefly); placement is computed locally with
 * Maglev, and bytes come straight from workers. A read is planned into per-block
 * segments (split further into bounded GetRange requests); each goes to the
 * block's replicas in rank order, and when every replica fails the membership is
 * refreshed and the request retried once before the read fails.
 */
import {
  Cause,
  Context,
  Deferred,
  Effect,
  Either,
  Exit,
  FiberId,
  Layer,
  ManagedRuntime,
  Option,
  Stream,
  type ConfigError,
  type Scope
} from "effect"
import { NodeRole, type BlockId, type NodeInfo, type ObjectId } from "../core/ids.js"
import { objectIdFromPath, objectIdFromUri, objectIdToPath, objectIdToUri } from "../core/objectId.js"
import { planRead } from "../core/geometry.js"
import { Maglev } from "../placement/index.js"
import type { ControlMessage } from "../protocol/index.js"
import { ControlChannel, type ControlError } from "./ControlChannel.js"
import { resolveClientOptions, type TalonClientOptions } from "./config.js"
import {
  CoordinatorUnavailable,
  InvalidRequest,
  NoWorkers,
  ObjectNotFound,
  ReadFailed,
  type FailedAttempt,
  type TalonClientError
} from "./errors.js"
import { WorkerPool } from "./WorkerPool.js"

export interface ObjectInfo {
  readonly object: ObjectId
  readonly size: number
  readonly version: string
}

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

export interface TalonClientShape {
  readonly options: TalonClientOptions
  readonly stat: (target: ObjectTarget) => Effect.Effect<ObjectInfo, TalonClientError>
  /** `[offset, offset+length)` clamped at the object's end, in one buffer. */
  readonly read: (target: ObjectTarget, offset: number, length: number) => Effect.Effect<Uint8Array, TalonClientError>
  /** The same bytes as `read`, in order, in pieces of at most `maxRequestBytes`, at most `parallelism` in flight. */
  readonly readStream: (target: ObjectTarget, offset: number, length: number) => Stream.Stream<Uint8Array, TalonClientError>
  /** Objects under a prefix (`/s3/bucket/prefix` or `s3://bucket/prefix`). */
  readonly list: (prefix: string) => Effect.Effect<ReadonlyArray<ListEntry>, TalonClientError>
  /** Healthy members (cached for the membership TTL unless `refresh`). */
  readonly members: (refresh?: boolean) => Effect.Effect<ReadonlyArray<NodeInfo>, TalonClientError>
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

const MAX_STAT_ENTRIES = 10_000

interface Membership {
  readonly nodes: ReadonlyArray<NodeInfo>
  readonly placement: Maglev
  /** Worker id → dialable address. */
  readonly addresses: ReadonlyMap<string, string>
  readonly fetchedAt: number
}

export const makeTalonClient = (
  explicit: Partial<TalonClientOptions> = {}
): Effect.Effect<TalonClientShape, ConfigError.ConfigError, Scope.Scope> =>
  Effect.gen(function* () {
    const options = yield* resolveClientOptions(explicit)
    const control = yield* ControlChannel.make(options.coordinator, {
      requestTimeout: `${options.requestTimeoutMs} millis`,
      connectTimeout: `${options.connectTimeoutMs} millis`
    })
    const pool = new WorkerPool({
      connectionsPerWorker: options.connectionsPerWorker,
      requestTimeout: `${options.requestTimeoutMs} millis`,
      connectTimeout: `${options.connectTimeoutMs} millis`,
      maxRequestBytes: options.maxRequestBytes
    })
    yield* Effect.addFinalizer(() => Effect.sync(() => pool.close()))

    const coordinatorError = (e: ControlError) =>
      new CoordinatorUnavailable({ coordinator: options.coordinator, detail: e.message, cause: e })
    const ask = (message: ControlMessage) => Effect.mapError(control.request(message), coordinatorError)
    const unexpected = (what: string, reply: ControlMessage) =>
      new CoordinatorUnavailable({
        coordinator: options.coordinator,
        detail: `unexpected reply to ${what}: ${reply._tag === "Ack" ? `Ack(${reply.ok}${reply.detail === null ? "" : `, ${reply.detail}`})` : reply._tag}`
      })

    // ---- membership (TTL cache, one refresh in flight at a time) ----
    let membership: Membership | undefined
    let refreshing: Deferred.Deferred<Membership, TalonClientError> | undefined
    const fetchMembership = Effect.gen(function* () {
      const reply = yield* ask({ _tag: "MembershipQuery" })
      if (reply._tag !== "MembershipList") return yield* Effect.fail(unexpected("MembershipQuery", reply))
      const previous = membership
      const workers = reply.nodes.filter((n) => n.role === NodeRole.Worker)
      const next: Membership = {
        nodes: reply.nodes,
        placement: Maglev.build(workers),
        addresses: new Map(workers.map((n) => [n.id, n.address])),
        fetchedAt: Date.now()
      }
      // Connections to workers that left are closed, so a dead worker's sockets do not linger.
      if (previous !== undefined) {
        const live = new Set(reply.nodes.map((n) => n.address))
        for (const n of previous.nodes) if (!live.has(n.address)) pool.forget(n.address)
      }
      membership = next
      return next
    })
    /**
     * Cached membership, refreshed after the TTL (or on demand). One refresh runs at a time,
     * detached from its callers so an interrupted caller cannot fail the others waiting on it.
     * When a TTL refresh fails but a membership is cached, the stale one is used: the
     * coordinator is not on the read path, and a short outage of it must not stop reads.
     * A forced refresh (every replica failed) reports the failure instead.
     */
    const getMembership = (refresh: boolean): Effect.Effect<Membership, TalonClientError> =>
      Effect.suspend(() => {
        const cached = membership
        if (!refresh && cached !== undefined && Date.now() - cached.fetchedAt < options.membershipTtlMs) {
          return Effect.succeed(cached)
        }
        let pending = refreshing
        if (pending === undefined) {
          const created = Deferred.unsafeMake<Membership, TalonClientError>(FiberId.none)
          pending = created
          refreshing = created
          Effect.runFork(
            fetchMembership.pipe(
              Effect.exit,
              Effect.flatMap((exit) => {
                refreshing = undefined
                return Deferred.done(created, exit)
              })
            )
          )
        }
        const fresh = Deferred.await(pending)
        return refresh || cached === undefined
          ? fresh
          : Effect.catchTag(fresh, "CoordinatorUnavailable", (e) =>
              Effect.as(Effect.logWarning(`using cached membership: ${e.message}`), cached)
            )
      })

    // ---- stat (short TTL cache) ----
    const statCache = new Map<string, { info: ObjectInfo; at: number }>()
    const remember = (key: string, info: ObjectInfo) => {
      // Bounded: a client reading millions of objects must not keep every stat forever.
      if (statCache.size >= MAX_STAT_ENTRIES) {
        const now = Date.now()
        for (const [k, v] of statCache) if (now - v.at >= options.statTtlMs) statCache.delete(k)
        if (statCache.size >= MAX_STAT_ENTRIES) statCache.clear()
      }
      statCache.set(key, { info, at: Date.now() })
    }
    const statObject = (object: ObjectId): Effect.Effect<ObjectInfo, TalonClientError> =>
      Effect.suspend(() => {
        const key = objectIdToPath(object)
        const hit = statCache.get(key)
        if (hit !== undefined && Date.now() - hit.at < options.statTtlMs) return Effect.succeed(hit.info)
        return ask({ _tag: "StatObject", object }).pipe(
          Effect.flatMap((reply): Effect.Effect<ObjectInfo, TalonClientError> => {
            if (reply._tag === "ObjectStat") {
              const info = { object, size: reply.size, version: reply.version }
              remember(key, info)
              return Effect.succeed(info)
            }
            if (reply._tag === "Ack" && !reply.ok && (reply.detail ?? "").startsWith("not found")) {
              return Effect.fail(new ObjectNotFound({ object: objectIdToUri(object), detail: reply.detail ?? "" }))
            }
            return Effect.fail(unexpected("StatObject", reply))
          })
        )
      })

    // ---- one GetRange piece, with replica fallback and one refresh-and-retry ----
    const fetchPiece = (piece: ReadRequestPiece): Effect.Effect<Uint8Array, TalonClientError> => {
      const attempts: Array<FailedAttempt> = []
      const tryOwners = (m: Membership): Effect.Effect<Option.Option<Uint8Array>, TalonClientError> => {
        const owners = m.placement.rank(piece.block, options.replicas)
        if (owners.length === 0) return Effect.fail(new NoWorkers({ coordinator: options.coordinator }))
        const attempt = (i: number): Effect.Effect<Option.Option<Uint8Array>> =>
          i >= owners.length
            ? Effect.succeed(Option.none())
            : pool.getRange(m.addresses.get(owners[i]!) ?? owners[i]!, piece.block.object, piece.offset, piece.length).pipe(
                Effect.map(Option.some),
                Effect.catchAll((e) => {
                  attempts.push({ address: e.address, detail: e.detail })
                  return attempt(i + 1)
                })
              )
        return attempt(0)
      }
      return getMembership(false).pipe(
        Effect.flatMap(tryOwners),
        Effect.flatMap((first) =>
          Option.isSome(first) ? Effect.succeed(first) : Effect.flatMap(getMembership(true), tryOwners)
        ),
        Effect.flatMap((result) =>
          Option.isSome(result)
            ? Effect.succeed(result.value)
            : Effect.fail(
                new ReadFailed({
                  object: objectIdToUri(piece.block.object),
                  offset: piece.offset,
                  length: piece.length,
                  detail: attempts[attempts.length - 1]?.detail ?? "no replica answered",
                  attempts
                })
              )
        )
      )
    }

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
        const info = yield* validate(target, offset, length)
        const pieces = plan(info, offset, length)
        const total = Math.max(0, Math.min(offset + length, info.size) - offset)
        const out = new Uint8Array(total)
        yield* Effect.forEach(
          pieces,
          (piece) => Effect.map(fetchPiece(piece), (bytes) => out.set(bytes, piece.resultOffset)),
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
            Stream.mapEffect(fetchPiece, { concurrency: options.parallelism }),
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
              : Effect.fail(unexpected("ListObjects", reply))
        )
      )

    return {
      options,
      stat: (target) => Effect.flatMap(parseTarget(target), statObject),
      read,
      readStream,
      list,
      members: (refresh = false) => Effect.map(getMembership(refresh), (m) => m.nodes)
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
