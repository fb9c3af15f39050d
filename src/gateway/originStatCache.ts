/**
 * Object size and version as the origin last said, trusted for a short TTL, one
 * origin HEAD in flight per object. Past half the TTL a read still gets the cached
 * answer while one HEAD refreshes it in the background, so steady traffic never waits
 * for the origin's latency just because an entry aged out. A write through the gateway invalidates the
 * entry (and any HEAD already in flight cannot put the old answer back), and marks
 * the object "recently written" so reads bypass caches that may still hold the old
 * version downstream.
 */
import { Effect, Either, Runtime } from "effect"
import type { BackendError, BackendStoreShape, ObjectStat } from "../backend/BackendStore.js"
import type { ObjectId } from "../core/ids.js"

const MAX_ENTRIES = 10_000

export const objectKey = (o: ObjectId): string => `${o.backend}\0${o.bucket}\0${o.objectPath}`

export class OriginStatCache {
  readonly #entries = new Map<string, { readonly stat: ObjectStat; readonly expiresAt: number; readonly refreshAt: number }>()
  readonly #inflight = new Map<string, Promise<Either.Either<ObjectStat, BackendError>>>()
  readonly #generation = new Map<string, number>()
  readonly #written = new Map<string, number>()
  readonly #run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>

  constructor(
    private readonly backend: BackendStoreShape,
    runtime: Runtime.Runtime<never>,
    private readonly ttlMs: number,
    private readonly writeFreshMs: number,
    /** The gateway's Clock (the cache is read synchronously on the request path). */
    private readonly now: () => number
  ) {
    this.#run = Runtime.runPromise(runtime)
  }

  /** The cached stat when it is still trusted (refreshing ahead as `stat` does); no Effect, for the hot path. */
  peek(object: ObjectId): ObjectStat | undefined {
    const key = objectKey(object)
    const hit = this.#entries.get(key)
    if (hit === undefined) return undefined
    const now = this.now()
    if (hit.expiresAt <= now) return undefined
    if (hit.refreshAt <= now && !this.#inflight.has(key)) this.#load(object, key, true)
    return hit.stat
  }

  /** The cached stat, or one HEAD shared by every concurrent caller. `fresh` skips the cache. */
  stat(object: ObjectId, fresh = false): Effect.Effect<ObjectStat, BackendError> {
    return Effect.suspend(() => {
      const key = objectKey(object)
      if (!fresh) {
        const hit = this.#entries.get(key)
        const now = this.now()
        if (hit !== undefined && hit.expiresAt > now) {
          if (hit.refreshAt <= now && !this.#inflight.has(key)) this.#load(object, key, true)
          return Effect.succeed(hit.stat)
        }
      }
      const pending = (fresh ? undefined : this.#inflight.get(key)) ?? this.#load(object, key, !fresh)
      return Effect.flatMap(Effect.promise(() => pending), (r) => r)
    })
  }

  /** One origin HEAD; its answer is remembered unless the object was invalidated meanwhile. */
  #load(object: ObjectId, key: string, shared: boolean): Promise<Either.Either<ObjectStat, BackendError>> {
    const generation = this.#generation.get(key) ?? 0
    const started: Promise<Either.Either<ObjectStat, BackendError>> = this.#run(Effect.either(this.backend.stat(object))).then((r) => {
      if (this.#inflight.get(key) === started) this.#inflight.delete(key)
      if (Either.isRight(r) && this.ttlMs > 0 && (this.#generation.get(key) ?? 0) === generation) this.#remember(key, r.right)
      return r
    })
    if (shared) this.#inflight.set(key, started)
    return started
  }

  /** Forget what is known about `object` (after a write or a read that found it changed). */
  invalidate(object: ObjectId): void {
    const key = objectKey(object)
    this.#entries.delete(key)
    this.#inflight.delete(key)
    this.#generation.set(key, (this.#generation.get(key) ?? 0) + 1)
    if (this.#generation.size > MAX_ENTRIES) this.#generation.clear()
  }

  /** Invalidate, and keep reads of `object` off the cache for the fresh window. */
  written(object: ObjectId): void {
    this.invalidate(object)
    if (this.writeFreshMs <= 0) return
    const now = this.now()
    if (this.#written.size >= MAX_ENTRIES) for (const [k, until] of this.#written) if (until <= now) this.#written.delete(k)
    this.#written.set(objectKey(object), now + this.writeFreshMs)
  }

  recentlyWritten(object: ObjectId): boolean {
    const key = objectKey(object)
    const until = this.#written.get(key)
    if (until === undefined) return false
    if (until > this.now()) return true
    this.#written.delete(key)
    return false
  }

  #remember(key: string, stat: ObjectStat): void {
    if (this.#entries.size >= MAX_ENTRIES) {
      const now = this.now()
      for (const [k, v] of this.#entries) if (v.expiresAt <= now) this.#entries.delete(k)
      if (this.#entries.size >= MAX_ENTRIES) this.#entries.clear()
    }
    const now = this.now()
    this.#entries.set(key, { stat, expiresAt: now + this.ttlMs, refreshAt: now + this.ttlMs / 2 })
  }
}
