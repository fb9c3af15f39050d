/**
 * Turns a range request into file segments of resident blocks, filling what
 * is missing first. The hit path (version fresh, every page resident, fds
 * open) is synchronous: Map lookups and pins, no promise, no Effect.
 *
 * Range semantics follow Talon's ceiling server: `offset + len` past the
 * object's end is an error ("range out of bounds: …"), not a short reply; a
 * zero-length range inside the object is an empty success; a range spanning
 * several blocks is one reply of exactly `len` bytes.
 *
 * `read` serves the version the worker believes current; `readVersion` (GetPinnedRange) serves
 * only the version the request names: from resident blocks of it, else filled from the origin
 * under If-Match, else a VersionMismatch failure. `readCached` (Talon's GetCachedRange) serves
 * resident bytes of the version named or a CacheMiss, and never reaches the origin. Blocks are
 * keyed by version, so one reply never holds bytes of two versions.
 */
import { Context, Effect, Layer } from "effect"
import type { ObjectStat } from "../backend/BackendStore.js"
import { blockLength, blockStart, pageSpan, planRead, type Segment } from "../core/geometry.js"
import type { BlockId, ObjectId } from "../core/ids.js"
import type { FileSegment } from "./plane/DataPlane.js"
import { WorkerConfig } from "./config.js"
import { DataErrorCode } from "../protocol/dataError.js"
import { MAX_PAYLOAD_LEN } from "../protocol/frame.js"
import { cacheMiss, describeUnknown, outOfBounds, ReadFailed, tooLong, versionMismatch } from "./errors.js"
import { WorkerMetrics, type WorkerStats } from "./metrics.js"
import { MissPath, type MissPathShape } from "./miss/MissPath.js"
import { ReadAhead } from "./miss/ReadAhead.js"
import { objectKey } from "./miss/VersionCache.js"
import { BlockStore } from "./store/BlockStore.js"
import type { DiskStore } from "./store/DiskStore.js"
import type { Unit } from "./store/entry.js"
import { blockKey } from "./store/layout.js"

/** A successful read: `length` bytes in `segments`, readable until `release`. */
export interface RangeReply {
  readonly _tag: "RangeReply"
  readonly length: number
  readonly segments: ReadonlyArray<FileSegment>
  /** Pinned units; hand the reply back to `release` once the bytes are sent (or the send failed). */
  readonly units: ReadonlyArray<Unit>
}

export type ReadOutcome = RangeReply | ReadFailed

/** What the read path needs of a store: the DiskStore itself, or a serving loop's leased view of its owner's store. */
export type ServeStore = Pick<DiskStore, "lookup" | "pin" | "ensureOpen" | "release" | "missingRuns">

const EMPTY: RangeReply = { _tag: "RangeReply", length: 0, segments: [], units: [] }
const MAX_FRAME = 0xffffffff
/** Fill-then-pin attempts before giving up (only a cache far smaller than the request needs more). */
const ATTEMPTS = 4
/** Sizes of pinned versions remembered (a version's size never changes). */
const MAX_PINNED = 4096

export class ReadPathImpl {
  readonly #store: ServeStore
  readonly #miss: MissPathShape
  readonly #stats: WorkerStats
  readonly #blockSize: number
  readonly #pageSize: number
  readonly #capacity: number
  /** Read-ahead of sequential readers (off: undefined). */
  readonly #ahead: ReadAhead | undefined

  constructor(
    store: ServeStore,
    miss: MissPathShape,
    stats: WorkerStats,
    blockSize: number,
    pageSize: number,
    capacity: number,
    readAhead?: { readonly budget: number; readonly fetchSize: number }
  ) {
    const fillAhead = miss.fillAhead
    this.#ahead =
      readAhead !== undefined && readAhead.budget > 0 && pageSize > 0 && fillAhead !== undefined
        ? new ReadAhead({ missingRuns: (k, f, e) => store.missingRuns(k, f, e), fill: fillAhead, blockKey }, stats, {
            blockSize,
            pageSize,
            budget: readAhead.budget,
            fetchSize: readAhead.fetchSize
          })
        : undefined
    this.#store = store
    this.#miss = miss
    this.#stats = stats
    this.#blockSize = blockSize
    this.#pageSize = pageSize
    this.#capacity = capacity
  }

  /**
   * Reads `[offset, offset+len)` of `object`: synchronously on a hit, else a promise. Never rejects.
   * `okey` is `objectKey(object)`, when the caller already holds it (the serve loop caches it).
   */
  read(object: ObjectId, offset: number, len: number, okey: string = objectKey(object)): ReadOutcome | Promise<ReadOutcome> {
    const st = this.#miss.versions.fresh(okey)
    if (st !== undefined) {
      const fast = this.#tryHit(object, st, offset, len)
      if (fast !== undefined) {
        if (this.#ahead !== undefined && fast._tag === "RangeReply") this.#ahead.observe(object, okey, st, offset, len)
        return fast
      }
      return this.#readSlow(object, okey, st, offset, len, true)
    }
    return this.#readSlow(object, okey, undefined, offset, len, false)
  }

  /** `[offset, offset+len)` of exactly `version` (GetPinnedRange), filled if need be; never rejects (a gone version: VersionMismatch). */
  readVersion(object: ObjectId, version: string, offset: number, len: number, okey: string = objectKey(object)): ReadOutcome | Promise<ReadOutcome> {
    const current = this.#miss.versions.fresh(okey)
    const st = current !== undefined && current.version === version ? current : this.#pinnedStat(object, okey, version, offset)
    if (st !== undefined) {
      const fast = this.#tryHit(object, st, offset, len)
      if (fast !== undefined) {
        if (this.#ahead !== undefined && fast._tag === "RangeReply") this.#ahead.observe(object, okey, st, offset, len)
        return fast
      }
    }
    return this.#readPinned(object, okey, st, version, offset, len)
  }

  /**
   * Talon's cache-only read (GetCachedRange): exactly `len` resident bytes of `version`, else CacheMiss; no stat, fill or
   * read-ahead, so nothing here reaches the origin. Partly resident or past the version's end is a miss as a whole (as Talon).
   */
  readCached(object: ObjectId, version: string, offset: number, len: number, okey: string = objectKey(object)): ReadOutcome | Promise<ReadOutcome> {
    if (len === 0) return EMPTY
    if (len > MAX_PAYLOAD_LEN) return new ReadFailed({ reason: `cache-only range length ${len} exceeds response frame limit ${MAX_PAYLOAD_LEN}`, code: DataErrorCode.Internal })
    const st = this.#pinnedStat(object, okey, version, offset)
    if (st === undefined || offset >= st.size || len > st.size - offset) return cacheMiss(object, version, offset, len)
    return this.#tryHit(object, st, offset, len) ?? this.#readResident(object, st, offset, len)
  }

  /** `readCached` when a file of the range must be opened first: pinned and opened, or a miss. */
  async #readResident(object: ObjectId, st: ObjectStat, offset: number, len: number): Promise<ReadOutcome> {
    const segs = planRead(offset, len, st.size, this.#blockSize)
    const units: Array<Unit> = []
    const opened = this.#pinAll(object, st, segs, units) ? this.#store.ensureOpen(units) : false
    if (opened === undefined || (opened !== false && (await opened))) {
      this.#stats.hits++
      return this.#reply(segs, units, len)
    }
    this.#store.release(units)
    return cacheMiss(object, st.version, offset, len)
  }

  /** Pinned stats by object and version: what a resident block or the origin said that version's size is. */
  readonly #pinned = new Map<string, ObjectStat>()

  #pinnedStat(object: ObjectId, okey: string, version: string, offset: number): ObjectStat | undefined {
    const k = `${okey}\0${version}`
    const memo = this.#pinned.get(k)
    if (memo !== undefined) return memo
    const bs = this.#blockSize
    const entry = this.#store.lookup(blockKey({ object, offset: blockStart(offset, bs), blockSize: bs, version }))
    if (entry === undefined) return undefined
    return this.#pin(k, { size: entry.meta.objectSize, version })
  }

  #pin(k: string, st: ObjectStat): ObjectStat {
    if (this.#pinned.size >= MAX_PINNED) this.#pinned.clear()
    this.#pinned.set(k, st)
    return st
  }

  async #readPinned(object: ObjectId, okey: string, known: ObjectStat | undefined, version: string, offset: number, len: number): Promise<ReadOutcome> {
    let st = known
    if (st === undefined) {
      // Neither current here nor resident: only the origin can say whether it still has this version.
      let current: ObjectStat
      try {
        current = await this.#miss.revalidate(object, okey)
      } catch (e) {
        return asFailure(e)
      }
      if (current.version !== version) return versionMismatch(object, version, current.version)
      st = this.#pin(`${okey}\0${version}`, current)
    }
    return this.#readSlow(object, okey, st, offset, len, false, version)
  }

  /** Block size and page size (0 = whole blocks) this path plans with; a Load plans the same way. */
  get geometry(): { readonly blockSize: number; readonly pageSize: number } {
    return { blockSize: this.#blockSize, pageSize: this.#pageSize }
  }

  /** Units of `[first, end)` of block `key` not resident now, as maximal runs (what a Load must fill). */
  missingRuns(key: string, first: number, end: number): Array<[number, number]> {
    return this.#store.missingRuns(key, first, end)
  }

  release(reply: RangeReply): void {
    if (reply.units.length > 0) this.#store.release(reply.units)
  }

  /** The whole reply when it is a pure hit (or a request error); undefined when anything must be filled or opened. */
  #tryHit(object: ObjectId, st: ObjectStat, offset: number, len: number): ReadOutcome | undefined {
    const bad = this.#check(st, offset, len)
    if (bad !== undefined) return bad
    if (len === 0) return EMPTY
    const bs = this.#blockSize
    const blockOffset = blockStart(offset, bs)
    if (offset + len <= blockOffset + bs) return this.#hitInBlock(object, st, blockOffset, offset - blockOffset, len)
    const segs = planRead(offset, len, st.size, bs)
    const units: Array<Unit> = []
    if (!this.#pinAll(object, st, segs, units) || this.#store.ensureOpen(units) !== undefined) {
      this.#store.release(units)
      return undefined
    }
    this.#stats.hits++
    return this.#reply(segs, units, len)
  }

  /**
   * `#tryHit` of a range inside one block (nearly every request): the same pins and segments
   * without a read plan, segment objects or page-span tuples.
   */
  #hitInBlock(object: ObjectId, st: ObjectStat, blockOffset: number, start: number, len: number): ReadOutcome | undefined {
    const entry = this.#store.lookup(this.#keyOf(object, st, blockOffset))
    if (entry === undefined) return undefined
    const ps = this.#pageSize
    const end = start + len
    const p0 = ps > 0 ? Math.floor(start / ps) : 0
    const p1 = ps > 0 ? Math.ceil(end / ps) : 1
    const units: Array<Unit> = []
    if (!this.#store.pin(entry, p0, p1, units)) return undefined
    if (this.#store.ensureOpen(units) !== undefined) {
      this.#store.release(units)
      return undefined
    }
    this.#stats.hits++
    const out: Array<FileSegment> = []
    if (ps === 0) out.push({ fd: units[0]!.fd, offset: start, length: len })
    else {
      for (let p = p0, k = 0; p < p1; p++, k++) {
        const u = units[k]!
        const pageStart = p * ps
        const from = start > pageStart ? start : pageStart
        const to = end < pageStart + u.bytes ? end : pageStart + u.bytes
        out.push({ fd: u.fd, offset: from - pageStart, length: to - from })
      }
    }
    this.#stats.bytesServed += len
    return { _tag: "RangeReply", length: len, segments: out, units }
  }

  async #readSlow(
    object: ObjectId,
    okey: string,
    cached: ObjectStat | undefined,
    offset: number,
    len: number,
    fromCache: boolean,
    /** The version a GetCachedRange named: never re-read as another version. */
    pinned?: string
  ): Promise<ReadOutcome> {
    let st = cached
    try {
      st ??= await this.#miss.stat(object, okey)
    } catch (e) {
      return asFailure(e)
    }
    const bad = this.#check(st, offset, len)
    if (bad !== undefined) return bad
    if (len === 0) return EMPTY
    // Before this read's own fill: the pages after it are asked for alongside.
    this.#ahead?.observe(object, okey, st, offset, len)
    const segs = planRead(offset, len, st.size, this.#blockSize)
    let filled = false
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const units: Array<Unit> = []
      if (this.#pinAll(object, st, segs, units)) {
        const opened = this.#store.ensureOpen(units)
        if (opened === undefined || (await opened)) {
          if (filled) this.#stats.misses++
          else this.#stats.hits++
          return this.#reply(segs, units, len)
        }
      }
      this.#store.release(units)
      try {
        filled = true
        await Promise.all(segs.map((seg) => this.#fillSegment(object, st!, seg)))
      } catch (e) {
        const failure = asFailure(e)
        if (pinned !== undefined) {
          return failure.staleVersion === true && failure.code !== DataErrorCode.NotFound
            ? versionMismatch(object, pinned, undefined, failure.reason)
            : failure
        }
        // A version taken from the cache may be what went stale: ask the origin once more.
        if (fromCache && failure.staleVersion === true) {
          this.#miss.versions.invalidate(okey)
          return this.#readSlow(object, okey, undefined, offset, len, false)
        }
        return failure
      }
    }
    return new ReadFailed({
      reason: `cannot keep ${len} bytes resident at once: the cache capacity (${this.#capacity} bytes per dir) is too small for this request`
    })
  }

  #check(st: ObjectStat, offset: number, len: number): ReadFailed | undefined {
    if (offset > st.size || len > st.size - offset) return outOfBounds(offset, len, st.size)
    if (len > MAX_FRAME) return tooLong(len)
    return undefined
  }

  /**
   * Block keys of one object version, built once: the cached stat is one object per version, so
   * a hit neither concatenates nor re-hashes a key string. Checked against the object, so a stat
   * object shared by two objects could only cost a rebuild, never a wrong block.
   */
  readonly #keys = new WeakMap<ObjectStat, { object: ObjectId; keys: Map<number, string> }>()

  #keyOf(object: ObjectId, st: ObjectStat, blockOffset: number): string {
    let memo = this.#keys.get(st)
    if (memo === undefined || (memo.object !== object && !sameObject(memo.object, object))) {
      memo = { object, keys: new Map() }
      this.#keys.set(st, memo)
    }
    let key = memo.keys.get(blockOffset)
    if (key === undefined) {
      key = blockKey({ object, offset: blockOffset, blockSize: this.#blockSize, version: st.version })
      memo.keys.set(blockOffset, key)
    }
    return key
  }

  #blockId(object: ObjectId, st: ObjectStat, seg: Segment): BlockId {
    return { object, offset: seg.blockOffset, blockSize: this.#blockSize, version: st.version }
  }

  #span(seg: Segment): readonly [number, number] {
    return this.#pageSize > 0 ? pageSpan(seg.offsetInBlock, seg.length, this.#pageSize) : [0, 1]
  }

  /** Pins every unit of every segment, in order; false at the first missing one (pins so far stay in `units`). */
  #pinAll(object: ObjectId, st: ObjectStat, segs: ReadonlyArray<Segment>, units: Array<Unit>): boolean {
    for (let i = 0; i < segs.length; i++) {
      const seg = segs[i]!
      const entry = this.#store.lookup(this.#keyOf(object, st, seg.blockOffset))
      if (entry === undefined) return false
      const [p0, p1] = this.#span(seg)
      if (!this.#store.pin(entry, p0, p1, units)) return false
    }
    return true
  }

  #fillSegment(object: ObjectId, st: ObjectStat, seg: Segment): Promise<void> {
    const id = this.#blockId(object, st, seg)
    const [p0, p1] = this.#span(seg)
    if (this.#store.missingRuns(blockKey(id), p0, p1).length === 0) return Promise.resolve()
    return this.#miss.fill(id, blockLength(seg.blockOffset, this.#blockSize, st.size), st.size, p0, p1)
  }

  #reply(segs: ReadonlyArray<Segment>, units: ReadonlyArray<Unit>, len: number): RangeReply {
    const out: Array<FileSegment> = []
    const ps = this.#pageSize
    let k = 0
    for (let i = 0; i < segs.length; i++) {
      const seg = segs[i]!
      if (ps === 0) {
        out.push({ fd: units[k++]!.fd, offset: seg.offsetInBlock, length: seg.length })
        continue
      }
      const start = seg.offsetInBlock
      const end = start + seg.length
      const [p0, p1] = pageSpan(start, seg.length, ps)
      for (let p = p0; p < p1; p++) {
        const u = units[k++]!
        const pageStart = p * ps
        const from = Math.max(start, pageStart)
        const to = Math.min(end, pageStart + u.bytes)
        out.push({ fd: u.fd, offset: from - pageStart, length: to - from })
      }
    }
    this.#stats.bytesServed += len
    return { _tag: "RangeReply", length: len, segments: out, units }
  }
}

const sameObject = (a: ObjectId, b: ObjectId): boolean => a.backend === b.backend && a.bucket === b.bucket && a.objectPath === b.objectPath
const asFailure = (e: unknown): ReadFailed => (e instanceof ReadFailed ? e : new ReadFailed({ reason: `internal error: ${describeUnknown(e)}` }))

export class ReadPath extends Context.Tag("talon/worker/ReadPath")<ReadPath, ReadPathImpl>() {
  static readonly layer = Layer.effect(
    ReadPath,
    Effect.gen(function* () {
      const cfg = yield* WorkerConfig
      // A small cache must keep room for what readers read now: read-ahead gets an eighth of it at most.
      const readAhead = { budget: Math.min(cfg.readAhead, Math.floor(cfg.capacity / 8)), fetchSize: cfg.originFetchSize }
      return new ReadPathImpl(yield* BlockStore, yield* MissPath, yield* WorkerMetrics, cfg.blockSize, cfg.pageSize, cfg.capacity, readAhead)
    })
  )
}
