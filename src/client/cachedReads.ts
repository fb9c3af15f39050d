/**
 * Talon's cache-only reads from the client side: `readCached` asks each block's replicas, in
 * placement order, with GetCachedRange (type 6) for resident bytes of one named version, and
 * fails with a typed `CacheMiss` when no replica holds a piece. No stat is made (a stat may
 * reach the origin through a coordinator or worker) and no worker fills: the origin hears
 * nothing. The bytes are exactly those of the version named, since workers key blocks by it.
 */
import { Effect } from "effect"
import type { BlockId, ObjectId } from "../core/ids.js"
import { objectIdToUri } from "../core/objectId.js"
import { DataErrorCode } from "../protocol/index.js"
import { ClientConfig } from "./ClientConfig.js"
import { CacheMiss, InvalidRequest, ReadFailed, type FailedAttempt, type TalonClientError } from "./errors.js"
import { MembershipCache } from "./MembershipCache.js"
import { type ObjectTarget, parseTarget } from "./target.js"
import { type WorkerRequestError } from "./WorkerPool.js"
import { Workers } from "./Workers.js"
import { ZoneAffinity } from "./zones.js"

export type CachedReadError = TalonClientError | CacheMiss

/** `[offset, offset+length)` cut at block boundaries and at `max` bytes: the requests a cached read makes. */
export const cachedPieces = (offset: number, length: number, blockSize: number, max: number): Array<readonly [number, number]> => {
  const out: Array<readonly [number, number]> = []
  const end = offset + length
  for (let at = offset; at < end; ) {
    const blockEnd = (Math.floor(at / blockSize) + 1) * blockSize
    const take = Math.min(end, blockEnd, at + max) - at
    out.push([at, take])
    at += take
  }
  return out
}

export class CachedReads extends Effect.Service<CachedReads>()("talon/client/CachedReads", {
  effect: Effect.gen(function* () {
    const options = yield* ClientConfig
    const membership = yield* MembershipCache
    const { pool } = yield* Workers
    const zones = yield* ZoneAffinity

    /** One piece from the first replica that holds it; CacheMiss when none does, ReadFailed when none answered. */
    const piece = (object: ObjectId, version: string, offset: number, length: number) =>
      Effect.gen(function* () {
        const m = yield* membership.get(false)
        const blockSize = options.blockSize
        const block: BlockId = { object, offset: Math.floor(offset / blockSize) * blockSize, blockSize, version }
        const ranked = zones.order(m.placement.rank(block, options.replicas), (id) => m.zones.get(id))
        const attempts: Array<FailedAttempt> = []
        let misses = 0
        for (const id of ranked) {
          const address = m.addresses.get(id) ?? id
          const got = yield* Effect.either(fetchCached(address, object, version, offset, length))
          if (got._tag === "Right") {
            zones.served(m.zones.get(id), got.right.length)
            return got.right
          }
          const e = got.left
          attempts.push({ address, detail: e.message })
          if (e._tag === "WorkerRejected" && e.code === DataErrorCode.CacheMiss) misses++
        }
        const uri = objectIdToUri(object)
        if (misses > 0 || ranked.length === 0) return yield* new CacheMiss({ object: uri, version, offset, length, attempts })
        return yield* new ReadFailed({ object: uri, offset, length, detail: attempts[attempts.length - 1]?.detail ?? "no replica answered", attempts })
      })

    const fetchCached = (address: string, object: ObjectId, version: string, offset: number, length: number) =>
      Effect.async<Uint8Array, WorkerRequestError>((resume) => {
        const cancel = pool.fetch(
          address,
          object,
          offset,
          length,
          (r) => {
            if (!r.ok) return resume(Effect.fail(r.error))
            const bytes = r.payload.copyOut()
            resume(Effect.succeed(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)))
          },
          version,
          true
        )
        return Effect.sync(cancel)
      })

    /**
     * `[offset, offset+length)` of exactly `version`, from what the workers hold: the bytes, or a
     * typed CacheMiss naming the replicas asked. A range past that version's end is a miss too
     * (workers cannot tell without the origin).
     */
    const readCached = (target: ObjectTarget, offset: number, length: number, version: string): Effect.Effect<Uint8Array, CachedReadError> =>
      Effect.gen(function* () {
        const object = yield* parseTarget(target)
        if (!Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(length) || length < 0) {
          return yield* new InvalidRequest({ detail: `offset and length must be non-negative integers (got ${offset}, ${length})` })
        }
        if (version.length === 0) return yield* new InvalidRequest({ detail: "readCached needs the version (ETag) whose bytes to read; stat the object for it" })
        if (length === 0) return new Uint8Array(0)
        const parts = yield* Effect.forEach(
          cachedPieces(offset, length, options.blockSize, options.maxRequestBytes),
          ([at, n]) => piece(object, version, at, n),
          { concurrency: options.parallelism }
        )
        if (parts.length === 1) return parts[0]!
        const out = new Uint8Array(length)
        let at = 0
        for (const p of parts) {
          out.set(p, at)
          at += p.length
        }
        return out
      })

    return { readCached } as const
  })
}) {}
