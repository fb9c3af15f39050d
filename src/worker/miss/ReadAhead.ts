/**
 * Worker read-ahead: a small table of objects being read, each with where its reader is and how
 * far ahead pages were asked of the origin. A read that lands near the end of the last one
 * (within a few of its own lengths: a client reads one range as several concurrent pieces, which
 * may arrive out of order), or inside what was read ahead for it, counts as sequential; after SEQUENTIAL such reads in a row, the pages
 * up to `budget` bytes past the reader are filled through the miss path under its read-ahead
 * share of origin connections, while at most `budget` bytes of read-ahead are in flight worker-wide.
 * A read anywhere else is random access: the stream starts over and nothing more is read ahead
 * until it is sequential again (fetches already in flight finish; they are bounded by `budget`).
 *
 * Read-ahead stays inside the block being read: placement is per block, and a worker only learns
 * of other workers through the coordinator, so it cannot tell whether it owns the next block.
 * The client reads ahead across blocks (to each block's owner).
 *
 * Unused bytes: each stream remembers its read-ahead pieces past the reader; a piece the reader
 * passes is used. When a stream is dropped (random access, a new version, the table full), the
 * bytes of its pieces still ahead of the reader are counted as never served.
 *
 * Plain TS on the request path: one Map lookup per read; fills are promises of the miss path.
 */
import type { ObjectStat } from "../../backend/BackendStore.js"
import type { BlockId, ObjectId } from "../../core/ids.js"
import type { WorkerStats } from "../metrics.js"

/** Sequential reads in a row before read-ahead starts. */
const SEQUENTIAL = 2
/** A read this many of its lengths around the last end still counts as sequential (reordered concurrent pieces). */
const REORDER = 4
/** Objects tracked at once; the least recently read is dropped for a new one. */
const STREAMS = 128

/** What read-ahead needs of the worker: which pages are missing, and a fill at read-ahead priority. */
export interface AheadTarget {
  readonly missingRuns: (key: string, first: number, end: number) => ReadonlyArray<readonly [number, number]>
  readonly fill: (id: BlockId, blockLength: number, objectSize: number, first: number, end: number) => Promise<void>
  readonly blockKey: (id: BlockId) => string
}

/** Pages `[start, end)` of the object (bytes) asked for ahead, `bytes` of them missing then. */
interface Piece {
  readonly start: number
  readonly end: number
  readonly bytes: number
}

interface Stream {
  version: string
  /** Where the reader is: the furthest end of its sequential reads. */
  next: number
  /** Sequential reads in a row. */
  run: number
  /** Read-ahead asked for up to here (bytes of the object). */
  ahead: number
  /** Read-ahead pieces the reader has not passed yet, in order. */
  pieces: Array<Piece>
  touched: number
}

export interface ReadAheadSettings {
  readonly blockSize: number
  /** > 0: read-ahead works in whole pages. */
  readonly pageSize: number
  /** Bytes ahead of a reader, and bytes of read-ahead in flight worker-wide, at most. */
  readonly budget: number
  /** Bytes of one read-ahead fill (the origin fetch size, in whole pages). */
  readonly fetchSize: number
}

export class ReadAhead {
  readonly #streams = new Map<string, Stream>()
  readonly #target: AheadTarget
  readonly #stats: WorkerStats
  readonly #bs: number
  readonly #ps: number
  readonly #budget: number
  readonly #piece: number
  #tick = 0
  #inflight = 0

  constructor(target: AheadTarget, stats: WorkerStats, s: ReadAheadSettings) {
    this.#target = target
    this.#stats = stats
    this.#bs = s.blockSize
    this.#ps = s.pageSize
    this.#budget = s.budget
    // Whole pages, rounded up as the fill scheduler cuts its GETs: one read-ahead fill, one GET.
    this.#piece = Math.max(1, Math.ceil(s.fetchSize / s.pageSize)) * s.pageSize
  }

  /** Bytes of read-ahead fills in flight now. */
  get inflight(): number {
    return this.#inflight
  }

  /** Streams tracked now. */
  get streams(): number {
    return this.#streams.size
  }

  /** A read of `[offset, offset+len)` of `object` at `st` (`okey` = objectKey(object)) is being served. */
  observe(object: ObjectId, okey: string, st: ObjectStat, offset: number, len: number): void {
    if (len === 0) return
    const end = offset + len
    let s = this.#streams.get(okey)
    if (s === undefined) {
      this.#streams.set(okey, this.#fresh(st.version, end))
      if (this.#streams.size > STREAMS) this.#dropOldest()
      return
    }
    s.touched = ++this.#tick
    const slack = REORDER * len
    // Landing inside what was read ahead is sequential too: the native plane answers hits of idle
    // connections itself, so the reads between the last one seen here and this one were not seen.
    if (s.version !== st.version || offset < s.next - slack || offset > Math.max(s.next, s.ahead) + slack) {
      this.#retire(s)
      s.version = st.version
      s.next = end
      s.run = 0
      s.ahead = 0
      return
    }
    s.run++
    // A piece behind the frontier (reordered) counts, but moves nothing.
    if (end <= s.next) return
    s.next = end
    while (s.pieces.length > 0 && s.pieces[0]!.end <= end) s.pieces.shift()
    if (s.run >= SEQUENTIAL) this.#topUp(object, st, s)
  }

  #fresh(version: string, next: number): Stream {
    return { version, next, run: 0, ahead: 0, pieces: [], touched: ++this.#tick }
  }

  /** Fills whole pieces from the frontier up to `budget` past the reader, within its block, while the worker-wide budget allows. */
  #topUp(object: ObjectId, st: ObjectStat, s: Stream): void {
    const bs = this.#bs
    const blockOffset = Math.floor((s.next - 1) / bs) * bs
    const limit = Math.min(st.size, blockOffset + bs, s.next + this.#budget)
    // Refill once half the window is used, in whole pieces: fewer, larger fetches.
    if (s.ahead - s.next > this.#budget / 2) return
    let at = Math.max(s.ahead, Math.ceil(s.next / this.#ps) * this.#ps)
    const blockLength = Math.min(bs, st.size - blockOffset)
    const id: BlockId = { object, offset: blockOffset, blockSize: bs, version: st.version }
    const key = this.#target.blockKey(id)
    while (at < limit && this.#inflight < this.#budget) {
      // On the fill scheduler's grid of GETs (multiples of a piece from the block's start).
      const to = Math.min(limit, blockOffset + (Math.floor((at - blockOffset) / this.#piece) + 1) * this.#piece)
      const first = Math.floor((at - blockOffset) / this.#ps)
      const end = Math.ceil((to - blockOffset) / this.#ps)
      let bytes = 0
      for (const [a, b] of this.#target.missingRuns(key, first, end)) {
        bytes += Math.min(b * this.#ps, blockLength) - a * this.#ps
      }
      const pieceEnd = Math.min(blockOffset + end * this.#ps, blockOffset + blockLength)
      s.ahead = pieceEnd
      at = pieceEnd
      if (bytes === 0) continue
      s.pieces.push({ start: blockOffset + first * this.#ps, end: pieceEnd, bytes })
      this.#inflight += bytes
      this.#stats.readAheadBytes += bytes
      this.#stats.readAheadFills++
      const done = () => {
        this.#inflight -= bytes
      }
      // A failed read-ahead costs nothing but the bytes: the reader's own miss fetches again.
      this.#target.fill(id, blockLength, st.size, first, end).then(done, done)
    }
  }

  /** The stream's read-ahead pieces the reader never reached are unused. */
  #retire(s: Stream): void {
    for (const p of s.pieces) {
      const unread = p.end - Math.max(p.start, s.next)
      if (unread > 0) this.#stats.readAheadUnusedBytes += Math.round((p.bytes * unread) / (p.end - p.start))
    }
    s.pieces.length = 0
  }

  #dropOldest(): void {
    let oldest: string | undefined
    let at = Infinity
    for (const [k, s] of this.#streams) {
      if (s.touched < at) {
        at = s.touched
        oldest = k
      }
    }
    if (oldest === undefined) return
    this.#retire(this.#streams.get(oldest)!)
    this.#streams.delete(oldest)
  }
}
