/**
 * Where a gateway GET gets its bytes. Two implementations, chosen per deployment:
 * `Route.Cache` (blocks through the Talon cluster, origin fallback per piece) and
 * `Route.Origin` (straight from the origin). Both are pull-based: the server asks
 * for the next chunk only after the client's socket took the previous one, which
 * is what bounds memory for a slow consumer.
 */
import { Context, Data, type Effect } from "effect"
import type { ObjectStat } from "../backend/BackendStore.js"
import type { ReadAheadStats } from "../client/ReadAheadCache.js"
import type { ZoneStats } from "../client/zones.js"
import type { Payload } from "../client/SlabPool.js"
import type { ObjectId } from "../core/ids.js"

export interface RouteRead {
  readonly object: ObjectId
  /** The version (and size) the response head promised; every byte must come from it. */
  readonly stat: ObjectStat
  readonly offset: number
  readonly length: number
  /** False when the object must not be read through the cache (recent write, key outside Talon's namespace). */
  readonly cacheable: boolean
}

/**
 * Why a read stopped. `not-found`, `changed` (the object is no longer the promised
 * version), `range` and `denied` are terminal answers from the origin; `unavailable`
 * means neither the cache nor the origin could deliver.
 */
export class RouteError extends Data.TaggedError("RouteError")<{
  readonly kind: "not-found" | "changed" | "range" | "denied" | "unavailable"
  readonly detail: string
}> {
  override get message() {
    return `${this.kind}: ${this.detail}`
  }
}

/**
 * Runs of bytes of one read, in order. `next` resolves `undefined` at the end and
 * rejects with `RouteError`. Each run may be views into the cluster client's pooled
 * read buffers: the writer releases it once the bytes are out (or drops it).
 */
export interface ByteReader {
  readonly next: () => Promise<Payload | undefined>
  /** Stops any work in flight; safe to call more than once. */
  readonly close: () => void
}

export interface RouteCounters {
  /** Pieces served by the cache cluster. */
  cachePieces: number
  /** Pieces the cache could not serve that were read from the origin instead. */
  fallbackPieces: number
  /** Reads sent to the origin whole (origin route, or not cacheable). */
  originReads: number
}

/**
 * The cache route's placement, for a body path that asks workers itself (the splice relay,
 * remoteBody.ts): the data addresses holding the block of `offset` of exactly `stat`'s version,
 * in read order; undefined when that is not known without a round trip (the route serves it).
 */
export interface RemotePlacement {
  readonly place: (object: ObjectId, stat: ObjectStat, offset: number) => ReadonlyArray<string> | undefined
  readonly blockSize: number
  /** The tenant the cluster client's reads are charged to ("" or undefined: none). */
  readonly tenant: string | undefined
  /** A worker that does not answer a piece's header within this time: the piece takes the route. */
  readonly workerTimeoutMs: number
}

export interface RouteShape {
  readonly name: "cache" | "origin"
  readonly open: (read: RouteRead) => ByteReader
  readonly counters: RouteCounters
  /** The cache route's client read-ahead (its pieces of one response are a sequential run). */
  readonly readAhead?: () => ReadAheadStats
  /** The cache route's client reads by zone. */
  readonly zones?: () => ZoneStats
  /** Cache route: workers in the cluster's membership now (0 when the coordinator does not answer). */
  readonly workers?: Effect.Effect<number>
  /** Cache route over plain TCP data connections: where pieces live (absent with data TLS). */
  readonly remote?: RemotePlacement
}

export class Route extends Context.Tag("talon/gateway/Route")<Route, RouteShape>() {}

export const newCounters = (): RouteCounters => ({ cachePieces: 0, fallbackPieces: 0, originReads: 0 })
