/**
 * The block store's index: which units of which blocks are present, in which cache dir, and
 * each dir's resident bytes and LRU. Registering a unit accounts it; unindexing it (eviction,
 * a drop, a vanished file) unaccounts it, tells `gone` before its file goes and removes the
 * block's directory once nothing of it is left or being committed. Synchronous: the serve
 * loop and the fill path both call it without awaiting.
 */
import type { DirState } from "./dirs.js"
import { type Entry, missingRunsOf, type Unit } from "./entry.js"
import { removeBlockDir, unlinkUnit } from "./files.js"
import { blockDirName } from "./layout.js"

export interface IndexHooks {
  /** A unit leaves the index (before its file goes). */
  readonly gone: (unit: Unit) => void
  /** A unit was evicted to make room (metrics). */
  readonly evicted: (bytes: number) => void
  /** Closes an unpinned unit's serving fd. */
  readonly closeFd: (unit: Unit) => void
  /** Rewrites a block's checksums and bitmap (files.persistIndex). */
  readonly persist: (entry: Entry) => Promise<void>
  readonly warn: (message: string) => void
}

export class BlockIndex {
  readonly entries = new Map<string, Entry>()
  /** Blocks with at least one present unit. */
  blocks = 0

  constructor(
    readonly dirs: ReadonlyArray<DirState>,
    readonly pageSize: number,
    private readonly hooks: IndexHooks
  ) {}

  /** Absent units in `[first, end)` as maximal runs (everything, when the block is not indexed). */
  missingRuns(key: string, first: number, end: number): Array<[number, number]> {
    return missingRunsOf(this.entries.get(key), first, end)
  }

  /** Which cache dir a block belongs to: an existing entry keeps its dir, new ones hash. */
  dirFor(key: string): number {
    const existing = this.entries.get(key)
    if (existing !== undefined) return existing.dirIndex
    if (this.dirs.length === 1) return 0
    return parseInt(blockDirName(key, this.pageSize).slice(0, 8), 16) % this.dirs.length
  }

  register(unit: Unit): void {
    const entry = unit.entry
    const dir = this.dirs[entry.dirIndex]!
    entry.units[unit.index] = unit
    if (entry.present === 0) this.blocks++
    entry.present++
    entry.bitmap?.set(unit.index)
    dir.resident += unit.bytes
    dir.lru.add(unit)
    unit.lruStamp = ++dir.moves
  }

  /** Evicts least recently used, unpinned units until `extra` more bytes fit. */
  makeRoom(dir: DirState, extra: number): void {
    if (dir.resident + extra <= dir.capacity) return
    for (const u of dir.lru) {
      if (dir.resident + extra <= dir.capacity) break
      if (u.refs > 0) continue
      this.unindex(u, true)
      this.hooks.evicted(u.bytes)
    }
  }

  /** Removes a unit from the index; `unlink` also deletes its file (eviction). */
  unindex(u: Unit, unlink: boolean): void {
    this.hooks.gone(u)
    const entry = u.entry
    const dir = this.dirs[entry.dirIndex]!
    u.gone = true
    dir.lru.delete(u)
    dir.resident -= u.bytes
    entry.units[u.index] = undefined
    entry.bitmap?.clear(u.index)
    entry.present--
    if (entry.present === 0) this.blocks--
    if (u.refs === 0) this.hooks.closeFd(u)
    if (entry.present === 0 && entry.pendingCommits === 0) {
      this.removeEntry(entry)
      return
    }
    if (unlink) unlinkUnit(entry, u, this.hooks.warn)
    this.hooks.persist(entry)
  }

  dropIfEmpty(entry: Entry): void {
    if (!entry.removed && entry.present === 0 && entry.pendingCommits === 0) this.removeEntry(entry)
  }

  removeEntry(entry: Entry): void {
    entry.removed = true
    if (this.entries.get(entry.key) === entry) this.entries.delete(entry.key)
    removeBlockDir(this.dirs[entry.dirIndex]!, entry, this.hooks.warn)
  }
}
