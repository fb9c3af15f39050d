/**
 * What the worker believes an object's current version is, for at most `ttlMs`.
 * Within the TTL a read needs no origin round trip; after it the next read
 * re-asks the origin (a HEAD), and a changed ETag makes every block key new, so
 * a changed object is served new once the TTL has passed — never stale beyond it.
 * Concurrent lookups of one object share one HEAD.
 *
 * Past half its TTL, a read of a resolved entry still answers from the cache but
 * starts that HEAD in the background, so a hot object's entry is renewed before it
 * expires and no read waits on the origin for it (an expiry used to stall every
 * read of the object for one origin round trip: the gateway bench's p99). Staleness
 * is still bounded by the TTL: nothing is served from an entry past `expiresAt`.
 */
import type { ObjectStat } from "../../backend/BackendStore.js"
import type { ObjectId } from "../../core/ids.js"

export const objectKey = (o: ObjectId): string => `${o.backend}\0${o.bucket}\0${o.objectPath}`

export interface Cached {
  readonly stat: ObjectStat
  readonly expiresAt: number
  /** From here on a read renews the entry in the background (resolved entries only). */
  readonly refreshAt: number
  readonly head: (() => Promise<ObjectStat>) | undefined
}

const ignore = () => {}

export class VersionCache {
  readonly #ttlMs: number
  readonly #now: () => number
  readonly #entries = new Map<string, Cached>()
  readonly #inflight = new Map<string, Promise<ObjectStat>>()
  /** Told of every entry dropped before its time or at expiry (not of renewals that replace it). */
  onDrop: ((key: string) => void) | undefined = undefined

  constructor(ttlMs: number, now: () => number = Date.now) {
    this.#ttlMs = ttlMs
    this.#now = now
  }

  /** The cached stat when still fresh (the hit path: no allocation, no promise). */
  fresh(key: string): ObjectStat | undefined {
    const c = this.#entries.get(key)
    if (c === undefined) return undefined
    const now = this.#now()
    if (c.expiresAt > now) {
      if (c.refreshAt <= now && c.head !== undefined && !this.#inflight.has(key)) {
        this.resolve(key, c.head).catch(ignore) // a failed renewal leaves the entry to expire as before
      }
      return c.stat
    }
    this.#entries.delete(key)
    this.onDrop?.(key)
    return undefined
  }

  /** The cached entry of `key` while fresh, without renewing it. */
  entry(key: string): Cached | undefined {
    const c = this.#entries.get(key)
    return c !== undefined && c.expiresAt > this.#now() ? c : undefined
  }

  /** Resolves through `head` (single-flight per object) and caches the answer. Failures are not cached. */
  resolve(key: string, head: () => Promise<ObjectStat>): Promise<ObjectStat> {
    const pending = this.#inflight.get(key)
    if (pending !== undefined) return pending
    const p = head().then(
      (stat) => {
        this.#inflight.delete(key)
        const now = this.#now()
        this.#set(key, { stat, expiresAt: now + this.#ttlMs, refreshAt: now + this.#ttlMs / 2, head })
        return stat
      },
      (e) => {
        this.#inflight.delete(key)
        throw e
      }
    )
    this.#inflight.set(key, p)
    return p
  }

  /** Caches `stat` until `expiresAt` (default: the TTL from now); a serving loop uses its owner's expiry. */
  seed(key: string, stat: ObjectStat, expiresAt: number = this.#now() + this.#ttlMs): void {
    // A seeded entry belongs to its owner (a loop asks the primary), so it is never renewed here.
    this.#set(key, { stat, expiresAt, refreshAt: Infinity, head: undefined })
  }

  /** Caches an entry; one replacing another of a different version counts as a drop. */
  #set(key: string, entry: Cached): void {
    const prev = this.#entries.get(key)
    this.#entries.set(key, entry)
    if (prev !== undefined && prev.stat.version !== entry.stat.version) this.onDrop?.(key)
  }

  /** When the cached stat of `key` stops being fresh (ms, same clock as `now`), if one is cached. */
  expiresAt(key: string): number | undefined {
    return this.#entries.get(key)?.expiresAt
  }

  invalidate(key: string, version?: string): void {
    const c = this.#entries.get(key)
    if (c !== undefined && (version === undefined || c.stat.version === version)) {
      this.#entries.delete(key)
      this.onDrop?.(key)
    }
  }

  get size(): number {
    return this.#entries.size
  }
}
