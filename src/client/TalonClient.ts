/**
 * Reads objects through a Talon cluster.
 *
 * The coordinators are consulted only for membership and object metadata;
 * placement is computed locally with Maglev, and bytes come straight from
 * workers. The client is the composition of its parts, each a service with a
 * layer, all in the scope `TalonClient.layer` is built in:
 *
 *   Coordinators    the `coordinator` list, failing over between its entries
 *   Workers         data-plane pool and worker control channels
 *   MembershipCache membership with the last-good / stale-limit rule, refreshed in the background
 *   StatCache       size and version per object: coordinators, then workers, then the last stat
 *   Reader          placement, version-pinned requests, replica fallback
 *   CachedReads     cache-only reads of a named version (Talon's GetCachedRange), never the origin
 *   ZoneAffinity    in-zone owners tried first, and reads counted by zone (zones.ts)
 *
 * Every fiber the client starts (background refreshes, shared fetches) belongs
 * to that scope: closing it stops them, and they log through the logger the
 * layer was built with.
 */
import { Cause, Context, Effect, Exit, Layer, ManagedRuntime, Stream, type ConfigError, type Scope } from "effect"
import type { NodeInfo, ObjectId } from "../core/ids.js"
import { ClientConfig } from "./ClientConfig.js"
import type { TalonClientOptions } from "./config.js"
import { type CoordinatorCounters, Coordinators } from "./Coordinators.js"
import { InvalidRequest, type TalonClientError } from "./errors.js"
import { MembershipCache, type MembershipCounters } from "./MembershipCache.js"
import type { ReadAheadStats } from "./ReadAheadCache.js"
import { type RawRead, Reader } from "./Reader.js"
import { type ObjectInfo, StatCache, type StatCounters } from "./StatCache.js"
import { type ObjectTarget, parseTarget, toListPrefix } from "./target.js"
import type { CancelFetch } from "./WorkerPool.js"
import { Workers } from "./Workers.js"
import { type PutBody, type PutResult, type WriteFailed, Writer } from "./Writer.js"
import { type CachedReadError, CachedReads } from "./cachedReads.js"
import { ZoneAffinity, type ZoneStats } from "./zones.js"

export type { ObjectInfo } from "./StatCache.js"
export type { RawRead } from "./Reader.js"
export type { ReadAheadStats } from "./ReadAheadCache.js"
export type { ReadRequestPiece } from "./plan.js"
export { type ObjectTarget, parseTarget, toListPrefix } from "./target.js"
export { type PutBody, type PutResult, WriteFailed } from "./Writer.js"
export type { ZoneStats } from "./zones.js"

export interface ListEntry {
  /** Namespace path form, e.g. `/s3/bucket/key`. */
  readonly path: string
  readonly size: number
}

/** How the client's view of the control plane is doing, for logs, metrics and tests. */
export interface ControlPlaneStats extends CoordinatorCounters, MembershipCounters, StatCounters {}

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
   * only slower). At most `parallelism` requests are in flight for the range itself;
   * a caller reading an object sequentially in pieces (a relay, a FUSE mount) is read
   * ahead of (`readAheadBytes`, see ReadAheadCache.ts) and served from what was fetched.
   */
  readonly readRaw: (info: ObjectInfo, offset: number, length: number, done: (result: RawRead) => void) => CancelFetch
  /**
   * Data addresses of the replicas of the block of `version` holding `offset`, in the order
   * reads try them, from the membership in hand (undefined when it would have to be fetched):
   * for a caller that sends its own GetPinnedRange (the gateway's socket-to-socket relay).
   */
  readonly placeBlock: (object: ObjectId, version: string, offset: number) => ReadonlyArray<string> | undefined
  /** `[offset, offset+length)` clamped at the object's end, in one buffer; runs of sequential calls are read ahead of like `readRaw`'s. */
  readonly read: (target: ObjectTarget, offset: number, length: number) => Effect.Effect<Uint8Array, TalonClientError>
  /**
   * `read` of `dest.length` bytes from `offset` into `dest` (fewer at the object's end; the bytes
   * written are the returned view of `dest`). A reader that reuses `dest` allocates nothing per
   * byte read, so the GC has no fresh memory to collect (what limits `read` and `readStream`
   * of warm bytes). `dest` is written only once every byte of one version is in.
   */
  readonly readInto: (target: ObjectTarget, offset: number, dest: Uint8Array) => Effect.Effect<Uint8Array, TalonClientError>
  /**
   * The same bytes as `read`, in order, in pieces of at most `maxRequestBytes`, fetched up to
   * `readAheadBytes` (at least `parallelism` pieces) ahead of the consumer.
   */
  readonly readStream: (target: ObjectTarget, offset: number, length: number) => Stream.Stream<Uint8Array, TalonClientError>
  /** Objects under a prefix (`/s3/bucket/prefix` or `s3://bucket/prefix`). */
  readonly list: (prefix: string) => Effect.Effect<ReadonlyArray<ListEntry>, TalonClientError>
  /** Healthy members (cached for the membership TTL unless `refresh`, which reports a coordinator outage instead of the last list). */
  readonly members: (refresh?: boolean) => Effect.Effect<ReadonlyArray<NodeInfo>, TalonClientError>
  /** Which coordinator answers, the membership's age, and how often stale or worker-sourced metadata was used. */
  readonly controlPlane: () => ControlPlaneStats
  /** What read-ahead fetched, served and fetched for nothing (`unreadBytes`). */
  readonly readAhead: () => ReadAheadStats
  /**
   * Writes the whole object through a worker to the origin (Talon's Put), streamed; resolves
   * with the committed version once the origin has it. Reads after it see the new bytes.
   */
  readonly put: (target: ObjectTarget, body: PutBody) => Effect.Effect<PutResult, TalonClientError | WriteFailed>
  /** Deletes the object at the origin through a worker (Talon's Delete); deleting what is gone succeeds. */
  readonly delete: (target: ObjectTarget) => Effect.Effect<void, TalonClientError | WriteFailed>
  /**
   * `[offset, offset+length)` of exactly `version`, only from what workers already hold
   * (Talon's GetCachedRange): the bytes, or a typed `CacheMiss`. No stat, no fill: the origin
   * is never asked. A range past that version's end is a miss too.
   */
  readonly readCached: (target: ObjectTarget, offset: number, length: number, version: string) => Effect.Effect<Uint8Array, CachedReadError>
  /**
   * Stores block `blockIndex` of `version` (all of it: `blockSize` bytes, or the object's tail)
   * on a worker without the origin (Talon's AdmitCachedBlock), to the first reachable owner in
   * read order; `objectSize` is the object's whole length, which the worker checks the block's
   * geometry against. `readCached` and `read` of that version then serve it.
   */
  readonly admit: (
    target: ObjectTarget,
    blockIndex: number,
    version: string,
    bytes: Uint8Array,
    objectSize: number
  ) => Effect.Effect<void, TalonClientError | WriteFailed>
  /** The client's zone and its reads counted same-zone, cross-zone (with bytes) and unknown. */
  readonly zones: () => ZoneStats
}

const facade = Effect.gen(function* () {
  const [options, coordinators, membership, stats, reader] = yield* Effect.all([ClientConfig, Coordinators, MembershipCache, StatCache, Reader])
  const writer = yield* Writer
  const cached = yield* CachedReads
  const zones = yield* ZoneAffinity
  const list = (prefix: string): Effect.Effect<ReadonlyArray<ListEntry>, TalonClientError> =>
    coordinators.ask({ _tag: "ListObjects", prefix: toListPrefix(prefix) }).pipe(
      Effect.flatMap((reply): Effect.Effect<ReadonlyArray<ListEntry>, TalonClientError> =>
        reply._tag === "ObjectList"
          ? Effect.succeed(reply.entries as ReadonlyArray<ListEntry>)
          : reply._tag === "Ack" && !reply.ok
            ? Effect.fail(new InvalidRequest({ detail: `listing ${prefix}: ${reply.detail ?? "refused"}` }))
            : Effect.fail(coordinators.unexpected("ListObjects", reply))
      )
    )
  return {
    options,
    stat: (target) => Effect.flatMap(parseTarget(target), stats.stat),
    cachedStat: stats.freshStat,
    readRaw: reader.readRaw,
    placeBlock: reader.placeBlock,
    read: reader.read,
    readInto: reader.readInto,
    readStream: reader.readStream,
    list,
    members: (refresh = false) => Effect.map(membership.get(refresh, refresh), (m) => m.nodes),
    controlPlane: () => ({ ...coordinators.counters(), ...membership.counters(), ...stats.counters() }),
    readAhead: reader.readAhead,
    put: writer.put,
    delete: writer.delete,
    readCached: cached.readCached,
    admit: writer.admit,
    zones: zones.stats
  } satisfies TalonClientShape
})

/** The client's parts over its settings, each built once and shared. */
const parts = (options: Partial<TalonClientOptions>) => {
  const config = ClientConfig.layer(options)
  const base = Layer.mergeAll(Coordinators.Default, Workers.Default, ZoneAffinity.Default).pipe(Layer.provideMerge(config))
  const members = MembershipCache.Default.pipe(Layer.provideMerge(base))
  const statCache = StatCache.Default.pipe(Layer.provideMerge(members))
  return Layer.mergeAll(Reader.Default, Writer.Default, CachedReads.Default).pipe(Layer.provideMerge(statCache))
}

export class TalonClient extends Context.Tag("talon/TalonClient")<TalonClient, TalonClientShape>() {
  static readonly layer = (options: Partial<TalonClientOptions> = {}): Layer.Layer<TalonClient, ConfigError.ConfigError> =>
    Layer.effect(TalonClient, facade).pipe(Layer.provide(parts(options)))
}

/** The client with its parts beside it in the context, for services built on them (Prefetch, ./prefetch.ts). */
export const clientWithParts = (options: Partial<TalonClientOptions> = {}) =>
  Layer.effect(TalonClient, facade).pipe(Layer.provideMerge(parts(options)))

/** The client as a value, its parts released (fibers stopped, connections closed) when the scope ends. */
export const makeTalonClient = (
  options: Partial<TalonClientOptions> = {}
): Effect.Effect<TalonClientShape, ConfigError.ConfigError, Scope.Scope> =>
  Effect.map(Layer.build(TalonClient.layer(options)), (context) => Context.get(context, TalonClient))

/** Promise facade for code that does not use Effect. Call `close()` when done. */
export interface TalonClientPromise {
  readonly stat: (target: ObjectTarget) => Promise<ObjectInfo>
  readonly read: (target: ObjectTarget, offset: number, length: number) => Promise<Uint8Array>
  /** `readInto`: resolves with the view of `dest` that was written. */
  readonly readInto: (target: ObjectTarget, offset: number, dest: Uint8Array) => Promise<Uint8Array>
  /** Async iteration over `readStream`. */
  readonly readStream: (target: ObjectTarget, offset: number, length: number) => AsyncIterable<Uint8Array>
  readonly list: (prefix: string) => Promise<ReadonlyArray<ListEntry>>
  readonly put: (target: ObjectTarget, body: PutBody) => Promise<PutResult>
  readonly delete: (target: ObjectTarget) => Promise<void>
  /** `readCached`: rejects with the typed `CacheMiss` when the range is not resident. */
  readonly readCached: (target: ObjectTarget, offset: number, length: number, version: string) => Promise<Uint8Array>
  /** `admit`: rejects with the typed `WriteFailed` (the worker's refusal) or `InvalidRequest`. */
  readonly admit: (target: ObjectTarget, blockIndex: number, version: string, bytes: Uint8Array, objectSize: number) => Promise<void>
  readonly zones: () => Promise<ZoneStats>
  readonly close: () => Promise<void>
}

export const createTalonClient = (options: Partial<TalonClientOptions> = {}): TalonClientPromise => {
  const runtime = ManagedRuntime.make(TalonClient.layer(options))
  // Rejects with the typed error itself (e.g. an ObjectNotFound with its `_tag`), not a FiberFailure wrapper.
  const run = async <A>(f: (client: TalonClientShape) => Effect.Effect<A, TalonClientError | WriteFailed | CachedReadError>): Promise<A> => {
    const exit = await runtime.runPromiseExit(Effect.flatMap(TalonClient, f))
    if (Exit.isSuccess(exit)) return exit.value
    throw Cause.squash(exit.cause)
  }
  return {
    stat: (target) => run((c) => c.stat(target)),
    read: (target, offset, length) => run((c) => c.read(target, offset, length)),
    readInto: (target, offset, dest) => run((c) => c.readInto(target, offset, dest)),
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
    put: (target, body) => run((c) => c.put(target, body)),
    delete: (target) => run((c) => c.delete(target)),
    readCached: (target, offset, length, version) => run((c) => c.readCached(target, offset, length, version)),
    admit: (target, blockIndex, version, bytes, objectSize) => run((c) => c.admit(target, blockIndex, version, bytes, objectSize)),
    zones: () => run((c) => Effect.sync(() => c.zones())),
    close: () => runtime.dispose()
  }
}
