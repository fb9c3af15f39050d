/**
 * One origin GET for units `[s, e)` of a block (pages, or unit 0 of a whole block), streamed
 * into the DiskStore: each unit is hashed as it arrives, fdatasynced, renamed into place with
 * its checksum and reported through `settle` as soon as it is complete. A full disk makes the
 * store evict and retry the write (DiskStore.writeTemp). Who asked for which unit is the fill
 * scheduler's business (FillScheduler.ts); this is only the byte pipeline.
 */
import type { BlockId, ObjectId } from "../../core/ids.js"
import { ReadFailed } from "../errors.js"
import type { DiskStore } from "../store/DiskStore.js"
import { newUnitHash, type UnitHash } from "../store/checksum.js"

/** Units of one run being fdatasynced and committed at once, at most. */
const FINISHING = 4

export type RangeFetch = (
  object: ObjectId,
  /** Pinned with If-Match: bytes of another version must never land under this version's key. */
  version: string,
  offset: number,
  length: number,
  sink: (chunk: Uint8Array) => Promise<void>,
  /** Read-ahead rather than a reader's miss: it waits for the read-ahead share of origin connections. */
  ahead: boolean
) => Promise<void>

export interface RunTarget {
  readonly store: DiskStore
  /** 0 = whole blocks. */
  readonly pageSize: number
  readonly fetchRange: RangeFetch
  /** Units one origin GET fetches at most (a run longer than that is several GETs); unset = a whole run. */
  readonly fetchUnits?: number
}

/**
 * Fetches units `[s, e)` of block `id` (store key `key`). Every unit is settled exactly once:
 * without an error once committed, with the run's error otherwise. Rejects with that error.
 */
export const fetchRun = (
  { store, pageSize: ps, fetchRange }: RunTarget,
  id: BlockId,
  key: string,
  blockLength: number,
  objectSize: number,
  s: number,
  e: number,
  settle: (unit: number, error?: unknown) => void,
  ahead = false
): Promise<void> => {
  const unitStart = (i: number) => (ps > 0 ? i * ps : 0)
  const unitBytes = (i: number) => (ps > 0 ? Math.min(ps, blockLength - i * ps) : blockLength)
  const runStart = unitStart(s)
  const runBytes = unitStart(e - 1) + unitBytes(e - 1) - runStart
  let current = s
  let written = 0
  let tmp: { readonly path: string; readonly fd: number; readonly hash: UnitHash } | undefined
  /**
   * Finished units being fdatasynced and committed. The stream goes on into the next unit
   * meanwhile, so the fsync's latency overlaps the origin's instead of adding to it; at most
   * FINISHING wait at once (a slow disk then holds the stream back).
   */
  const finishing = new Set<Promise<void>>()
  let finishError: unknown = undefined
  const finish = async (done: NonNullable<typeof tmp>, index: number): Promise<void> => {
    try {
      try {
        await store.syncTemp(key, done.fd)
      } catch (e) {
        await store.discardTemp(done.path, done.fd)
        throw e
      }
      await store.commit(id, blockLength, objectSize, { tmpPath: done.path, fd: done.fd, index, sum: done.hash.digest() })
      settle(index)
    } catch (e) {
      finishError ??= e
      settle(index, e)
    }
  }
  const finished = async () => {
    while (finishing.size > 0) await Promise.all(finishing)
    if (finishError !== undefined) throw finishError
  }
  const sink = async (chunk: Uint8Array): Promise<void> => {
    if (finishError !== undefined) throw finishError
    let at = 0
    while (at < chunk.length) {
      if (current >= e) {
        throw new ReadFailed({
          reason: `origin sent more than the ${runBytes} bytes asked for at offset ${id.offset + runStart} of the object; it may have changed`,
          staleVersion: true
        })
      }
      tmp ??= { ...(await store.createTemp(key)), hash: newUnitHash() }
      const want = unitBytes(current) - written
      const piece = chunk.length - at <= want ? (at === 0 ? chunk : chunk.subarray(at)) : chunk.subarray(at, at + want)
      tmp.hash.update(piece)
      await store.writeTemp(key, tmp.fd, piece, written)
      written += piece.length
      at += piece.length
      if (written === unitBytes(current)) {
        const done = tmp
        tmp = undefined
        written = 0
        const p: Promise<void> = finish(done, current).finally(() => finishing.delete(p))
        finishing.add(p)
        current++
        if (finishing.size >= FINISHING) await Promise.race(finishing)
      }
    }
  }
  const objectOffset = id.offset + runStart
  return fetchRange(id.object, id.version, objectOffset, runBytes, sink, ahead)
    .then(async () => {
      await finished()
      if (current < e) {
        const got = unitStart(current) + written - runStart
        throw new ReadFailed({
          reason: `origin returned ${got} of ${runBytes} bytes at offset ${objectOffset}; the object may have changed`,
          staleVersion: true
        })
      }
    })
    .catch(async (error: unknown) => {
      if (tmp !== undefined) await store.discardTemp(tmp.path, tmp.fd)
      await finished().catch(() => {})
      for (let i = current; i < e; i++) settle(i, error)
      throw error
    })
}
