/**
 * Read-ahead for callers that read an object piece by piece (a FUSE mount's
 * kernel-sized reads, a relay's ranged GETs, a data loader's chunks).
 *
 * Each read is recorded in a small table of sequential runs (sequential.ts). Once
 * a run is established (its third read) the range is read in aligned chunks, and
 * the chunks after it, up to a window that doubles with each further read of the
 * run (to `windowBytes`), are fetched ahead into this cache and served to the
 * reads that follow. A read that continues no run is not read ahead for and goes
 * to the workers as it is, so random access costs nothing extra.
 *
 * Pinned: a chunk is keyed by object path *and version*, fetched as pinned
 * requests of that version, and serves only reads of that same version.
 *
 * Bounded: the chunks held and in flight never exceed `capacityBytes`; the ones
 * already read past go first, then the least recently used. A chunk that cannot
 * be admitted is not fetched ahead, and a read it would have served goes direct.
 * Chunk bytes are copies the cache owns (never pooled read buffers a socket could
 * reuse), so a view handed out stays valid after its chunk is evicted.
 *
 * Plain callbacks like the rest of the piece path: no fiber per read.
 */
import { objectIdToPath, objectIdToUri } from "../core/objectId.js"
import { ReadFailed, type TalonClientError } from "./errors.js"
import { Payload } from "./SlabPool.js"
import { DEFAULT_SEQUENTIAL_LIMITS, SequentialTable } from "./sequential.js"
import type { ObjectInfo } from "./StatCache.js"
import type { CancelFetch } from "./WorkerPool.js"

export type RawRead =
  | { readonly ok: true; readonly payloads: ReadonlyArray<Payload> }
  | { readonly ok: false; readonly error: TalonClientError }

/** The direct path: `[offset, offset+length)` of exactly `info.version` from the workers. */
export type FetchRange = (info: ObjectInfo, offset: number, length: number, done: (r: RawRead) => void) => CancelFetch

export interface ReadAheadLimits {
  /** Chunk size (reads ahead are fetched in chunks aligned to it). */
  readonly chunkBytes: number
  /** How far ahead of a sequential run at most. */
  readonly windowBytes: number
  /** Bytes held and in flight at most, over every object. */
  readonly capacityBytes: number
}

/** What read-ahead did, for logs, metrics and tests. All byte counts since the client started, except `residentBytes`. */
export interface ReadAheadStats {
  /** Bytes fetched into the cache (ahead of the reader, or the chunk-aligned rest of a sequential read). */
  readonly fetchedBytes: number
  /** Of those, bytes fetched strictly ahead of any read asking for them. */
  readonly prefetchedBytes: number
  /** Bytes of reads answered from the cache. */
  readonly servedBytes: number
  /** Fetched bytes that left the cache (evicted, or their fetch failed) without any read asking for them. */
  readonly unreadBytes: number
  /** Bytes held and in flight now. */
  readonly residentBytes: number
  readonly evictions: number
  /** Reads recognised as continuing a sequential run. */
  readonly sequentialReads: number
  /** Reads that continued no run (went direct). */
  readonly randomReads: number
}

type ChunkResult = { readonly ok: true; readonly bytes: Uint8Array } | { readonly ok: false; readonly error: TalonClientError }

interface Chunk {
  readonly id: string
  readonly start: number
  readonly length: number
  readonly ahead: boolean
  bytes: Uint8Array | undefined
  waiters: Array<(r: ChunkResult) => void> | undefined
  cancel: CancelFetch
  /** The part of the chunk some read asked for: `[lo, hi)` (empty while lo >= hi). */
  lo: number
  hi: number
}

const noop: CancelFetch = () => {}

export const versionKey = (info: ObjectInfo): string => `${objectIdToPath(info.object)}\0${info.version}`

export class ReadAheadCache {
  private readonly chunks = new Map<string, Chunk>()
  private readonly runs = new SequentialTable(DEFAULT_SEQUENTIAL_LIMITS)
  private resident = 0
  private closed = false
  private readonly counters = {
    fetchedBytes: 0,
    prefetchedBytes: 0,
    servedBytes: 0,
    unreadBytes: 0,
    evictions: 0,
    sequentialReads: 0,
    randomReads: 0
  }

  constructor(
    private readonly limits: ReadAheadLimits,
    private readonly direct: FetchRange
  ) {}

  stats(): ReadAheadStats {
    return { ...this.counters, residentBytes: this.resident }
  }

  /** `readRaw` with read-ahead: the same contract as `direct`. */
  read(info: ObjectInfo, offset: number, length: number, done: (r: RawRead) => void): CancelFetch {
    const end = Math.min(offset + length, info.size)
    if (this.closed || end <= offset || this.limits.windowBytes <= 0) return this.direct(info, offset, length, done)
    const key = versionKey(info)
    const run = this.runs.observe(key, offset, end - offset)
    if (run.streak >= 2) {
      this.counters.sequentialReads++
      const chunk = this.limits.chunkBytes
      // The window doubles with each read that continues the run: a short run costs little.
      const window = Math.min(this.limits.windowBytes, chunk * 2 ** Math.min(run.streak - 2, 30))
      const from = Math.floor(offset / chunk) * chunk
      const target = Math.min(info.size, end + window)
      const scheduled = Math.max(from, Math.min(run.ahead, target))
      // The read's own chunks first (its bytes are wanted now), then the window after it.
      for (let at = from; at < end; at += chunk) this.ensure(info, key, at, false)
      for (let at = Math.floor(scheduled / chunk) * chunk; at < target; at += chunk) if (!this.ensure(info, key, at, true)) break
      if (target > run.ahead) run.ahead = target
    } else this.counters.randomReads++
    return this.serve(info, key, offset, end, done)
  }

  /** Drops every chunk and stops every fetch (the client is closing). */
  close(): void {
    this.closed = true
    for (const c of this.chunks.values()) c.cancel()
    this.chunks.clear()
    this.resident = 0
  }

  /** The chunk at `start` is held or in flight (fetched now if the cache has room); false when it could not be. */
  private ensure(info: ObjectInfo, key: string, start: number, ahead: boolean): boolean {
    const id = `${key}\0${start}`
    const held = this.chunks.get(id)
    if (held !== undefined) {
      // Touched: most recently used.
      this.chunks.delete(id)
      this.chunks.set(id, held)
      return true
    }
    const length = Math.min(this.limits.chunkBytes, info.size - start)
    if (length <= 0 || !this.admit(length)) return false
    const chunk: Chunk = { id, start, length, ahead, bytes: undefined, waiters: [], cancel: noop, lo: 0, hi: 0 }
    this.chunks.set(id, chunk)
    this.resident += length
    this.counters.fetchedBytes += length
    if (ahead) this.counters.prefetchedBytes += length
    let settled = false
    const cancel = this.direct(info, start, length, (r) => {
      settled = true
      chunk.cancel = noop
      const waiters = chunk.waiters ?? []
      chunk.waiters = undefined
      let result: ChunkResult
      if (r.ok) {
        // One copy the cache owns; the pooled read buffers go straight back.
        const bytes = new Uint8Array(length)
        let at = 0
        for (const p of r.payloads) {
          for (const v of p.views) {
            bytes.set(v.subarray(0, Math.max(0, length - at)), at)
            at += v.length
          }
          p.release()
        }
        if (at === length) {
          chunk.bytes = bytes
          result = { ok: true, bytes }
        } else {
          this.drop(chunk)
          const detail = `the workers answered ${at} of ${length} bytes`
          result = { ok: false, error: new ReadFailed({ object: objectIdToUri(info.object), offset: start, length, detail, attempts: [] }) }
        }
      } else {
        // A failed fetch is not kept: the next read of this range asks the workers again.
        this.drop(chunk)
        if (r.error._tag === "VersionChanged") this.runs.forget(key)
        result = r
      }
      for (const w of waiters) w(result)
    })
    if (!settled) chunk.cancel = cancel
    return true
  }

  /** Frees room for `length` more bytes, evicting held chunks (read-past ones first, then the oldest). */
  private admit(length: number): boolean {
    if (length > this.limits.capacityBytes) return false
    if (this.resident + length <= this.limits.capacityBytes) return true
    for (const pass of [true, false]) {
      for (const c of this.chunks.values()) {
        if (this.resident + length <= this.limits.capacityBytes) return true
        if (c.bytes === undefined) continue
        if (pass && c.hi < c.length) continue
        this.counters.evictions++
        this.drop(c)
      }
    }
    return this.resident + length <= this.limits.capacityBytes
  }

  private drop(c: Chunk): void {
    if (this.chunks.get(c.id) !== c) return
    this.chunks.delete(c.id)
    this.resident -= c.length
    this.counters.unreadBytes += c.length - Math.max(0, c.hi - c.lo)
  }

  /** `[offset, end)` from held or in-flight chunks when they cover it all, else direct. */
  private serve(info: ObjectInfo, key: string, offset: number, end: number, done: (r: RawRead) => void): CancelFetch {
    const chunkBytes = this.limits.chunkBytes
    const parts: Array<Chunk> = []
    for (let at = Math.floor(offset / chunkBytes) * chunkBytes; at < end; at += chunkBytes) {
      const c = this.chunks.get(`${key}\0${at}`)
      if (c === undefined) return this.direct(info, offset, end - offset, done)
      parts.push(c)
    }
    let cancelled = false
    let current: CancelFetch = noop
    let remaining = parts.length
    let failed = false
    const finish = () => {
      const payloads: Array<Payload> = []
      for (const c of parts) {
        const a = Math.max(offset, c.start) - c.start
        const b = Math.min(end, c.start + c.length) - c.start
        // Views into the chunk: never reused, so they outlive an eviction safely.
        payloads.push(Payload.of(c.bytes!.subarray(a, b)))
        if (c.lo >= c.hi) {
          c.lo = a
          c.hi = b
        } else {
          c.lo = Math.min(c.lo, a)
          c.hi = Math.max(c.hi, b)
        }
      }
      this.counters.servedBytes += end - offset
      done({ ok: true, payloads })
    }
    const settle = (r: ChunkResult) => {
      if (cancelled || failed) return
      if (!r.ok) {
        failed = true
        // Only a version the origin dropped is final; any other failure of a shared
        // fetch (a worker lost while it ran) gets this read's own attempt.
        if (r.error._tag === "VersionChanged") return done(r)
        current = this.direct(info, offset, end - offset, done)
        return
      }
      if (--remaining === 0) finish()
    }
    for (const c of parts) {
      if (c.bytes !== undefined) settle({ ok: true, bytes: c.bytes })
      else c.waiters!.push(settle)
    }
    return () => {
      cancelled = true
      for (const c of parts) {
        if (c.waiters !== undefined) {
          const i = c.waiters.indexOf(settle)
          if (i >= 0) c.waiters.splice(i, 1)
        }
      }
      current()
    }
  }
}
