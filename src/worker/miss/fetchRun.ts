/**
 * One origin GET for units `[s, e)` of a block (pages, or unit 0 of a whole block), streamed
 * into the DiskStore. Network chunks are copied into a staging buffer (stagePool.ts) as they
 * arrive, with no promise, write or hash per chunk: a unit that fits one buffer (a page) is
 * hashed in one pass and written with one positioned write once complete; a larger unit (a
 * whole block) is hashed and written a buffer at a time. Each unit is then fdatasynced, renamed
 * into place with its checksum and reported through `settle` as soon as it is committed. A full
 * disk makes the store evict and retry the write (DiskStore.writeTemp). Who asked for which
 * unit is the fill scheduler's business (FillScheduler.ts); this is only the byte pipeline.
 */
import type { PushDirect } from "../../backend/rangePush.js"
import type { BlockId, ObjectId } from "../../core/ids.js"
import { ReadFailed } from "../errors.js"
import type { DiskStore } from "../store/DiskStore.js"
import { hasher, newUnitHash, type UnitHash } from "../store/checksum.js"
import { StagePool, stageSize } from "./stagePool.js"

/** Units of one run being written, fdatasynced and committed at once, at most. */
const FINISHING = 4

/**
 * Takes the next chunk of the range, valid only during the call (it may be a view into a
 * socket's reused buffer). Returns a promise only when the fetch must wait before the next
 * chunk (a disk write holding the stream back); most chunks are a copy and return. `direct`
 * lends the staging buffers to the native receive, which fills (and hashes) them in place.
 */
export type RangeSink = {
  (chunk: Uint8Array): Promise<void> | void
  readonly direct: PushDirect
}

export type RangeFetch = (
  object: ObjectId,
  /** Pinned with If-Match: bytes of another version must never land under this version's key. */
  version: string,
  offset: number,
  length: number,
  sink: RangeSink,
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
  /** Staging buffers shared by the runs (FillScheduler makes one per worker); unset = unpooled. */
  readonly stages?: StagePool
}

/** A unit larger than one staging buffer, partly written: its temp file and running hash. */
interface Spill {
  readonly path: string
  readonly fd: number
  readonly hash: UnitHash
}

/**
 * Fetches units `[s, e)` of block `id` (store key `key`). Every unit is settled exactly once:
 * without an error once committed, with the run's error otherwise. Rejects with that error.
 */
export const fetchRun = (
  { store, pageSize: ps, fetchRange, stages }: RunTarget,
  id: BlockId,
  key: string,
  blockLength: number,
  objectSize: number,
  s: number,
  e: number,
  settle: (unit: number, error?: unknown) => void,
  ahead = false
): Promise<void> => {
  const pool = stages ?? new StagePool(stageSize(ps > 0 ? ps : Infinity), 0)
  const unitStart = (i: number) => (ps > 0 ? i * ps : 0)
  const unitBytes = (i: number) => (ps > 0 ? Math.min(ps, blockLength - i * ps) : blockLength)
  const runStart = unitStart(s)
  const runBytes = unitStart(e - 1) + unitBytes(e - 1) - runStart
  // The unit being received: its size, bytes received, bytes already written to its temp file.
  let current = s
  let size = unitBytes(s)
  let received = 0
  let flushed = 0
  let stage: Uint8Array | undefined
  let spill: Spill | undefined
  /**
   * Finished units being written, fdatasynced and committed. The stream goes on into the next
   * unit meanwhile, so the disk's latency overlaps the origin's instead of adding to it; at most
   * FINISHING wait at once (a slow disk then holds the stream back).
   */
  const finishing = new Set<Promise<void>>()
  let finishError: unknown = undefined

  const commit = async (tmp: { readonly path: string; readonly fd: number }, index: number, sum: bigint): Promise<void> => {
    try {
      await store.syncTemp(key, tmp.fd)
    } catch (err) {
      await store.discardTemp(tmp.path, tmp.fd)
      throw err
    }
    await store.commit(id, blockLength, objectSize, { tmpPath: tmp.path, fd: tmp.fd, index, sum })
  }
  /** A whole unit staged in `buffer`: one temp file, one write, then the commit. */
  const finishStaged = async (buffer: Uint8Array, bytes: Uint8Array, index: number, sum: bigint): Promise<void> => {
    let tmp: { readonly path: string; readonly fd: number } | undefined
    try {
      tmp = await store.createTemp(key)
      await store.writeTemp(key, tmp.fd, bytes, 0)
    } catch (err) {
      if (tmp !== undefined) await store.discardTemp(tmp.path, tmp.fd)
      throw err
    } finally {
      pool.give(buffer)
    }
    await commit(tmp, index, sum)
  }
  const track = (work: Promise<void>, index: number): Promise<void> | undefined => {
    const p: Promise<void> = work.then(
      () => settle(index),
      (err: unknown) => {
        finishError ??= err
        settle(index, err)
      }
    ).finally(() => finishing.delete(p))
    finishing.add(p)
    return finishing.size >= FINISHING ? Promise.race(finishing) : undefined
  }
  const nextUnit = () => {
    current++
    received = 0
    flushed = 0
    if (current < e) size = unitBytes(current)
  }
  /**
   * The staging buffer is full or the unit complete: hand it on. A promise when the stream must
   * wait. `summed`: the unit's XXH64, when the native receive already hashed it.
   */
  const flush = (summed?: bigint): Promise<void> | undefined => {
    const buffer = stage!
    const bytes = buffer.subarray(0, received - flushed)
    if (flushed === 0 && received === size) {
      // The common case, a page: hashed in one pass, written once, off the stream's path.
      stage = undefined
      const index = current
      const sum = summed ?? hasher().h64Raw(bytes)
      nextUnit()
      return track(finishStaged(buffer, bytes, index, sum), index)
    }
    // A unit larger than a buffer: written a buffer at a time, the stream waiting for each write.
    const at = flushed
    const last = received === size
    return (async () => {
      if (spill === undefined) spill = { ...(await store.createTemp(key)), hash: newUnitHash() }
      spill.hash.update(bytes)
      await store.writeTemp(key, spill.fd, bytes, at)
      flushed = received
      if (!last) return
      const done = spill
      spill = undefined
      stage = undefined
      pool.give(buffer)
      const index = current
      nextUnit()
      await track(commit(done, index, done.hash.digest()), index)
    })()
  }
  const overrun = () =>
    new ReadFailed({
      reason: `origin sent more than the ${runBytes} bytes asked for at offset ${id.offset + runStart} of the object; it may have changed`,
      staleVersion: true
    })
  const sink = (chunk: Uint8Array): Promise<void> | undefined => {
    if (finishError !== undefined) throw finishError
    let at = 0
    while (at < chunk.length) {
      if (current >= e) throw overrun()
      stage ??= pool.take()
      const room = Math.min(size, flushed + pool.size) - received
      const n = Math.min(room, chunk.length - at)
      stage.set(n === chunk.length ? chunk : chunk.subarray(at, at + n), received - flushed)
      received += n
      at += n
      if (n === room) {
        const wait = flush()
        if (wait !== undefined) {
          // The chunk's buffer is reused once this call returns: what is left waits as a copy.
          const rest = at < chunk.length ? Buffer.from(chunk.subarray(at)) : chunk.subarray(at)
          return wait.then(() => (rest.length > 0 ? sink(rest) : undefined))
        }
      }
    }
    return undefined
  }
  /** The staging buffer's free room, lent to the native receive; `filled` is the copy loop above without the copy. */
  const direct: PushDirect = {
    target: (max) => {
      if (finishError !== undefined) throw finishError
      if (current >= e) throw overrun()
      stage ??= pool.take()
      const from = received - flushed
      const to = from + Math.min(Math.min(size, flushed + pool.size) - received, max)
      return { bytes: stage, from, to, unit: flushed === 0 && to === size }
    },
    filled: (n, sum) => {
      received += n
      return received === Math.min(size, flushed + pool.size) ? flush(sum) : undefined
    }
  }
  const finished = async () => {
    while (finishing.size > 0) await Promise.all(finishing)
    if (finishError !== undefined) throw finishError
  }
  const objectOffset = id.offset + runStart
  store.fills.begin()
  let fetching: Promise<void>
  try {
    fetching = fetchRange(id.object, id.version, objectOffset, runBytes, Object.assign(sink, { direct }), ahead)
  } catch (error) {
    // Settled like any failed fetch, so the fill count and every unit's waiters are released.
    fetching = Promise.reject(error)
  }
  return fetching
    .then(async () => {
      await finished()
      if (current < e) {
        const got = unitStart(current) + received - runStart
        throw new ReadFailed({
          reason: `origin returned ${got} of ${runBytes} bytes at offset ${objectOffset}; the object may have changed`,
          staleVersion: true
        })
      }
    })
    .catch(async (error: unknown) => {
      // A staging buffer a write may still be reading is left to the GC, never reused.
      stage = undefined
      if (spill !== undefined) await store.discardTemp(spill.path, spill.fd)
      await finished().catch(() => {})
      for (let i = current; i < e; i++) settle(i, error)
      throw error
    })
    .finally(() => {
      store.fills.end()
      if (!store.fills.busy) pool.trim()
    })
}
