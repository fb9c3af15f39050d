/**
 * In-memory index records. A `Unit` is what the LRU moves and evicts: a whole
 * block in whole mode, one page in paged mode. Units carry their open fd and a
 * reference count so eviction never closes or unlinks a file a response is
 * still being sent from.
 */
import * as path from "node:path"
import { PresentBitmap } from "../../core/bitmap.js"
import type { BlockMeta } from "./layout.js"
import { BLOCK_FILE, pageFileName } from "./layout.js"

export class Unit {
  /** Open read fd, or -1 when closed (after a restart, or closed by the fd cap). */
  fd = -1
  /** In-flight responses reading this unit. */
  refs = 0
  /** Shared open in progress, so concurrent readers open the file once. */
  opening: Promise<boolean> | undefined = undefined
  /** Removed from the index (evicted or found missing): never handed out again. */
  gone = false
  /**
   * The dir's LRU move count when this unit last moved to its back (and the open-fd LRU's).
   * A unit still among the most recently moved quarter is not moved again on a hit: the order
   * of the oldest three quarters, where eviction looks, stays exact, and a hot unit costs no
   * Set operations.
   */
  lruStamp = 0
  fdStamp = 0
  /** The hit-table object this unit is published under (0 = not published), and its tag there. */
  hit = 0
  hitTag = -1
  /**
   * Checked against `sum` since it was indexed: true for a unit this process filled, false for
   * one found on disk at start-up until its bytes were hashed (it is not served before).
   */
  verified = true

  constructor(
    readonly entry: Entry,
    /** Page index (0 in whole mode). */
    readonly index: number,
    readonly bytes: number,
    /**
     * XXH64 of the unit's bytes, recorded when it was filled (checksum.ts). A serving loop's
     * leased view of its owner's unit leaves it 0n: the owner verifies, the view never does.
     */
    readonly sum: bigint = 0n
  ) {}

  get path(): string {
    return this.entry.unitPath(this.index)
  }
}

export class Entry {
  readonly units: Array<Unit | undefined>
  readonly bitmap: PresentBitmap | undefined
  /** Units currently present. */
  present = 0
  /** Commits past the point of no return (file written, rename pending): the directory must survive them. */
  pendingCommits = 0
  /** Set once the entry has left the index; its directory is being (or has been) removed. */
  removed = false
  /** mkdir + meta write, done once before the first rename into the directory. */
  ready: Promise<void> | undefined = undefined
  /** Serialises bitmap writes and the final removal of the directory. */
  io: Promise<void> = Promise.resolve()
  bitmapDirty = false
  /** Checksums of units about to be renamed into place: recorded in `sums` before the rename, so a crash never strands a whole unit unrecorded. */
  readonly pendingSums = new Map<number, bigint>()
  /** Unlinks of dropped units still queued, by unit index: a refill renames into place only after them. */
  readonly unlinking = new Map<number, Promise<void>>()

  constructor(
    readonly key: string,
    readonly meta: BlockMeta,
    /** Block directory (absolute). */
    readonly path: string,
    /** Index of the cache dir holding the block. */
    readonly dirIndex: number
  ) {
    const n = Entry.unitCount(meta)
    this.units = new Array<Unit | undefined>(n).fill(undefined)
    this.bitmap = meta.pageSize > 0 ? new PresentBitmap(n) : undefined
  }

  static unitCount(meta: BlockMeta): number {
    return meta.pageSize > 0 ? Math.ceil(meta.length / meta.pageSize) : 1
  }

  get paged(): boolean {
    return this.meta.pageSize > 0
  }

  /** Bytes held by unit `i` (the last page of a block is short). */
  unitBytes(i: number): number {
    const ps = this.meta.pageSize
    return ps > 0 ? Math.min(ps, this.meta.length - i * ps) : this.meta.length
  }

  unitPath(i: number): string {
    return path.join(this.path, this.meta.pageSize > 0 ? pageFileName(i) : BLOCK_FILE)
  }
}

/** Absent units of `entry` in `[first, end)` as maximal runs (everything, when the block is not indexed). */
export const missingRunsOf = (entry: Entry | undefined, first: number, end: number): Array<[number, number]> => {
  if (entry === undefined) return first < end ? [[first, end]] : []
  const runs: Array<[number, number]> = []
  let i = first
  while (i < end) {
    while (i < end && entry.units[i] !== undefined) i++
    if (i >= end) break
    const s = i
    while (i < end && entry.units[i] === undefined) i++
    runs.push([s, i])
  }
  return runs
}
