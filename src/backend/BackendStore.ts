import type { PushSink } from "./rangePush.js"
import type { Readable } from "node:stream"
import { Context, Data, Effect, type Stream } from "effect"
import type { Backend, ObjectId } from "../core/ids.js"
import type { UserMetadata } from "../core/userMetadata.js"

/** What the origin says about an object. `version` is the normalised ETag (quotes stripped). */
export interface ObjectStat {
  readonly size: number
  readonly version: string
  readonly lastModified?: Date | undefined
  /** The object's user metadata (`x-amz-meta-*` / `x-ms-meta-*`, names lower-cased); absent when it has none. */
  readonly metadata?: UserMetadata | undefined
}

export interface ListedObject {
  /** Key within the bucket/container (no bucket prefix). */
  readonly key: string
  readonly size: number
  readonly version: string
  /** When the origin last wrote it (S3 `LastModified`, Azure `Last-Modified`); absent when the listing did not say. */
  readonly lastModified?: Date | undefined
}

export interface ListPage {
  readonly objects: ReadonlyArray<ListedObject>
  readonly commonPrefixes: ReadonlyArray<string>
  readonly nextToken?: string | undefined
}

export interface ListOptions {
  readonly prefix?: string
  readonly delimiter?: string
  readonly token?: string
  readonly maxKeys?: number
  /** Which provider to list when the store routes several (Router.ts); single-provider stores ignore it. */
  readonly backend?: Backend
}

export interface GetRangeOptions {
  /** Read only this version (sent as If-Match); a changed object fails with status 412. */
  readonly version?: string | undefined
}

/** The object does not exist at the origin (404). Terminal: never retried. */
export class BackendNotFound extends Data.TaggedError("BackendNotFound")<{
  readonly object: string
}> {
  override get message() {
    return `object ${this.object} does not exist at the origin`
  }
}

/** The origin refused or failed the request; `retryable` says whether a retry may help. */
export class BackendRequestError extends Data.TaggedError("BackendRequestError")<{
  readonly object: string
  readonly operation: string
  readonly status?: number | undefined
  readonly retryable: boolean
  readonly detail: string
}> {
  override get message() {
    return `${this.operation} ${this.object} failed${this.status === undefined ? "" : ` with HTTP ${this.status}`}: ${this.detail}`
  }
}

/** The requested range lies outside the object. Terminal. */
export class BackendRangeError extends Data.TaggedError("BackendRangeError")<{
  readonly object: string
  readonly offset: number
  readonly length: number
  readonly size?: number | undefined
}> {
  override get message() {
    return `range ${this.offset}+${this.length} is outside ${this.object}${this.size === undefined ? "" : ` (size ${this.size})`}`
  }
}

export type BackendError = BackendNotFound | BackendRequestError | BackendRangeError

/**
 * The bytes of a range read, pulled a batch at a time (whatever arrived since the last
 * call). `next` resolves `undefined` after the last byte and rejects with a
 * `BackendError`; `close` stops the read and is safe to call more than once.
 */
export interface RangeReader {
  readonly next: () => Promise<ReadonlyArray<Uint8Array> | undefined>
  readonly close: () => void
}

/**
 * The origin as the worker, coordinator and gateway see it. One implementation per
 * provider (`BackendStore.S3`, `BackendStore.Azure` in ./S3.ts and ./Azure.ts).
 */
export interface BackendStoreShape {
  readonly stat: (object: ObjectId) => Effect.Effect<ObjectStat, BackendError>
  /** Exactly `length` bytes from `offset` (clamped by the origin at EOF), with backpressure. */
  readonly getRange: (
    object: ObjectId,
    offset: number,
    length: number,
    options?: GetRangeOptions
  ) => Stream.Stream<Uint8Array, BackendError>
  /**
   * The same bytes and guarantees as `getRange` for relays: no fiber per chunk. Optional;
   * `rangeReader` (ranged.ts) falls back to pulling `getRange`.
   */
  readonly openRange?: (object: ObjectId, offset: number, length: number, options?: GetRangeOptions) => RangeReader
  /**
   * The same bytes and guarantees pushed into `sink` (each chunk valid only during the call;
   * a returned promise holds the read back): the worker's fill, received into reused buffers
   * where the origin is plain HTTP. Rejects with a BackendError, with what the sink threw, or
   * with the signal's reason. Optional.
   */
  readonly pushRange?: (
    object: ObjectId,
    offset: number,
    length: number,
    options: GetRangeOptions | undefined,
    sink: PushSink,
    signal?: AbortSignal
  ) => Promise<void>
  /** One page of a listing within `bucket`. */
  readonly list: (bucket: string, options?: ListOptions) => Effect.Effect<ListPage, BackendError>
  readonly put: (object: ObjectId, body: Uint8Array) => Effect.Effect<ObjectStat, BackendError>
  /**
   * Uploads exactly `length` bytes read from `body` as they come, never holding them whole.
   * One attempt (a stream cannot be replayed); `body` erroring or ending short aborts the
   * upload, and the origin keeps no partial object. Optional: stores without it take `put`.
   */
  readonly putStream?: (object: ObjectId, length: number, body: Readable) => Effect.Effect<ObjectStat, BackendError>
  readonly delete: (object: ObjectId) => Effect.Effect<void, BackendError>
}

export class BackendStore extends Context.Tag("talon/BackendStore")<BackendStore, BackendStoreShape>() {}

/**
 * `putStream` of a store, or, for a store without one, the body collected and sent with `put`
 * (stores that hold objects in memory anyway: test doubles).
 */
export const uploadStream = (
  store: BackendStoreShape,
  object: ObjectId,
  length: number,
  body: Readable
): Effect.Effect<ObjectStat, BackendError> => {
  if (store.putStream !== undefined) return store.putStream(object, length, body)
  const where = `${object.bucket}/${object.objectPath}`
  return Effect.tryPromise({
    try: async () => {
      const parts: Array<Buffer> = []
      for await (const chunk of body) parts.push(chunk as Buffer)
      return Buffer.concat(parts)
    },
    catch: (e) =>
      new BackendRequestError({ object: where, operation: "PutObject", retryable: false, detail: `the body failed: ${String(e)}` })
  }).pipe(Effect.flatMap((bytes) => store.put(object, bytes)))
}
