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
 * No copy: a chunk is the workers' reply bytes as they landed in the client's pooled
 * read buffers, and each view handed out holds its own references on them (see
 * `Payload.slice`), so it stays valid after its chunk is evicted and the buffers are
 * reused only once every holder has released them.
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
  /** Bytes fetched ahead of sequential readers into the cache. */
  readonly fetchedBytes: number
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

type ChunkResult = { readonly ok: true; readonly payload: Payload } | { readonly ok: false; readonly error: TalonClientError }

interface Chunk {
  readonly id: string
  readonly start: number
  readonly length: number
  /** The bytes once fetched (the cache's reference on them). */
  payload: Payload | undefined
  /** Waiters being handed the bytes: a drop meanwhile releases them only afterwards. */
  pins: number
  dropped: boolean
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
      const target = Math.min(info.size, end + window)
      // From the chunk holding the read's end (the next read starts there); chunks already held are only touched.
      for (let at = Math.floor(end / chunk) * chunk; at < target; at += chunk) if (!this.ensure(info, key, at)) break
    } else this.counters.randomReads++
    return this.serve(info, key, offset, end, done)
  }

  /** Drops every chunk and stops every fetch (the client is closing). */
  close(): void {
    this.closed = true
    for (const c of [...this.chunks.values()]) {
      c.cancel()
      this.drop(c)
      const waiters = c.waiters ?? []
      c.waiters = undefined
      const error = new ReadFailed({ object: "", offset: c.start, length: c.length, detail: "the client closed while the read was in flight", attempts: [] })
      for (const w of waiters) w({ ok: false, error })
    }
  }

  /** The chunk at `start` is held or in flight (fetched now if the cache has room); false when it could not be. */
  private ensure(info: ObjectInfo, key: string, start: number): boolean {
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
    const chunk: Chunk = { id, start, length, payload: undefined, pins: 0, dropped: false, waiters: [], cancel: noop, lo: 0, hi: 0 }
    this.chunks.set(id, chunk)
    this.resident += length
    this.counters.fetchedBytes += length
    let settled = false
    const cancel = this.direct(info, start, length, (r) => {
      settled = true
      chunk.cancel = noop
      const waiters = chunk.waiters ?? []
      chunk.waiters = undefined
      let result: ChunkResult
      if (!r.ok) {
        // A failed fetch is not kept: the next read of this range asks the workers again.
        this.drop(chunk)
        if (r.error._tag === "VersionChanged") this.runs.forget(key)
        result = r
      } else {
        const payload = r.payloads.length === 1 ? r.payloads[0]! : Payload.concat(r.payloads)
        if (payload.length !== length || chunk.dropped) {
          payload.release()
          this.drop(chunk)
          const detail = `the workers answered ${payload.length} of ${length} bytes`
          result = { ok: false, error: new ReadFailed({ object: objectIdToUri(info.object), offset: start, length, detail, attempts: [] }) }
        } else {
          chunk.payload = payload
          result = { ok: true, payload }
        }
      }
      // Pinned while the waiters take their views: one of them may drop the chunk (read to
      // its end) before the next has taken its own references.
      chunk.pins++
      for (const w of waiters) w(result)
      if (--chunk.pins === 0 && chunk.dropped) chunk.payload?.release()
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
        if (c.payload === undefined) continue
        if (pass && c.hi < c.length) continue
        this.counters.evictions++
        this.drop(c)
      }
    }
    return this.resident + length <= this.limits.capacityBytes
  }

  private drop(c: Chunk): void {
    if (c.dropped) return
    c.dropped = true
    this.chunks.delete(c.id)
    this.resident -= c.length
    this.counters.unreadBytes += c.length - Math.max(0, c.hi - c.lo)
    if (c.pins === 0) c.payload?.release()
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
    const payloads: Array<Payload | undefined> = new Array(parts.length)
    let remaining = parts.length
    let over = false
    let current: CancelFetch = noop
    const releaseAll = () => {
      for (const p of payloads) p?.release()
    }
    // Taken the moment the chunk's bytes are there: views holding their own references
    // outlive the chunk's eviction by another read's read-ahead.
    const take = (i: number, c: Chunk, payload: Payload) => {
      const a = Math.max(offset, c.start) - c.start
      const b = Math.min(end, c.start + c.length) - c.start
      payloads[i] = payload.slice(a, b)
      if (c.lo >= c.hi) {
        c.lo = a
        c.hi = b
      } else {
        c.lo = Math.min(c.lo, a)
        c.hi = Math.max(c.hi, b)
      }
      // Read to its end: the run has moved past it, so it makes room at once.
      if (c.hi >= c.length) this.drop(c)
      if (--remaining > 0) return
      over = true
      this.counters.servedBytes += end - offset
      done({ ok: true, payloads: payloads as Array<Payload> })
    }
    const waiters = parts.map((c, i) => (r: ChunkResult) => {
      if (over) return
      if (r.ok) return take(i, c, r.payload)
      over = true
      releaseAll()
      // Only a version the origin dropped is final; any other failure of a shared
      // fetch (a worker lost while it ran) gets this read's own attempt.
      if (r.error._tag === "VersionChanged") return done(r)
      current = this.direct(info, offset, end - offset, done)
    })
    for (let i = 0; i < parts.length && !over; i++) {
      const c = parts[i]!
      if (c.payload !== undefined) take(i, c, c.payload)
      else c.waiters!.push(waiters[i]!)
    }
    return () => {
      if (!over) {
        over = true
        releaseAll()
      }
      parts.forEach((c, i) => {
        const at = c.waiters?.indexOf(waiters[i]!) ?? -1
        if (at >= 0) c.waiters!.splice(at, 1)
      })
      current()
    }
  }
}
