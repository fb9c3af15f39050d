/**
 * The block store proper, as plain TypeScript: the serve loop calls `pin` and
 * `release` per request, so they are synchronous Map/Set operations with no
 * Effect or Promise in the common case.
 *
 * Invariants:
 * - A unit is in the index only after its file was renamed into place (a
 *   temp file never looks present, before or after a crash).
 * - A pinned unit (refs > 0) is never evicted and its fd never closed.
 * - Each cache dir accounts its committed bytes against its own capacity;
 *   eviction is LRU over units (pages or whole blocks). Pinned units can push
 *   a dir past capacity for as long as they are pinned; the excess is evicted
 *   when they are released.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import type { BlockId } from "../../core/ids.js"
import { PresentBitmap } from "../../core/bitmap.js"
import { Entry, Unit } from "./entry.js"
import { closeFd, closeQuietly, isNotFound, openFd } from "./fsx.js"
import {
  BITMAP_FILE,
  BLOCK_FILE,
  blockDirName,
  blockDirPath,
  blockKey,
  type BlockMeta,
  decodeMeta,
  encodeMeta,
  LAYOUT_VERSION,
  META_FILE,
  parsePageFileName,
  TMP_DIR
} from "./layout.js"

export interface DiskStoreOptions {
  /** Cache directories; each gets its own capacity and LRU. */
  readonly dirs: ReadonlyArray<string>
  /** Capacity in bytes of each cache dir. */
  readonly capacity: number
  /** 0 = whole blocks (one file each); otherwise pages of this size. */
  readonly pageSize: number
  /** Cap on fds kept open for serving (unpinned ones beyond it are closed, least recently used first). */
  readonly maxOpenFiles?: number
  /** Called for every unit evicted (metrics). */
  readonly onEvict?: (bytes: number) => void
  /** Non-fatal background failures (unlink, bitmap write). */
  readonly onWarning?: (message: string) => void
}

interface DirState {
  readonly root: string
  readonly tmp: string
  readonly capacity: number
  resident: number
  /** Committed units, least recently used first (Set keeps insertion order; touch = delete + add). */
  readonly lru: Set<Unit>
  /** Moves to the back of `lru` so far (see Unit.lruStamp). */
  moves: number
  /** Block directories being removed, so a new fill of the same block waits for the rm. */
  readonly removing: Map<string, Promise<void>>
}

/** Moves a unit to the back of its dir's LRU, unless it is among the most recently moved quarter (see Unit.lruStamp). */
const touchLru = (dir: DirState, u: Unit): void => {
  if (dir.moves - u.lruStamp > dir.lru.size >> 2) {
    dir.lru.delete(u)
    dir.lru.add(u)
    u.lruStamp = ++dir.moves
  }
}

/** A file written to a temp name, ready to be renamed into place as unit `index` of a block. */
export interface FilledUnit {
  readonly tmpPath: string
  /** Read/write fd of the temp file; after the rename it becomes the serving fd. */
  readonly fd: number
  readonly index: number
}

/** The newest object version found on disk at start-up, per object. */
export interface KnownVersion {
  readonly object: BlockId["object"]
  readonly version: string
  readonly size: number
}

export interface StoreStats {
  readonly blocks: number
  readonly units: number
  readonly residentBytes: number
  readonly perDir: ReadonlyArray<{ readonly root: string; readonly residentBytes: number; readonly capacity: number }>
  readonly openFiles: number
}

export class DiskStore {
  readonly pageSize: number
  readonly #dirs: ReadonlyArray<DirState>
  readonly #index = new Map<string, Entry>()
  /** Units with an open fd, least recently used first. */
  readonly #open = new Set<Unit>()
  /** Moves to the back of `#open` so far (see Unit.fdStamp). */
  #fdMoves = 0
  readonly #maxOpen: number
  readonly #onEvict: (bytes: number) => void
  readonly #warn: (message: string) => void
  #blocks = 0
  #closed = false
  readonly #known = new Map<string, KnownVersion & { mtimeMs: number }>()
  /** Told of every unit leaving the index (evicted or found missing), before its file goes. */
  onUnitGone: ((unit: Unit) => void) | undefined = undefined

  private constructor(options: DiskStoreOptions) {
    if (options.dirs.length === 0) throw new Error("the block store needs at least one cache dir")
    this.pageSize = options.pageSize
    this.#dirs = options.dirs.map((root) => ({
      root: path.resolve(root),
      tmp: path.join(path.resolve(root), TMP_DIR),
      capacity: options.capacity,
      resident: 0,
      lru: new Set<Unit>(),
      moves: 0,
      removing: new Map()
    }))
    this.#maxOpen = options.maxOpenFiles ?? 4096
    this.#onEvict = options.onEvict ?? (() => {})
    this.#warn = options.onWarning ?? (() => {})
  }

  /** Opens the store: creates the dirs, clears stale temp files, rebuilds the index from disk. */
  static async open(options: DiskStoreOptions): Promise<DiskStore> {
    const store = new DiskStore(options)
    for (let i = 0; i < store.#dirs.length; i++) await store.#rebuild(i)
    return store
  }

  // ---------------------------------------------------------------- serve side

  lookup(key: string): Entry | undefined {
    return this.#index.get(key)
  }

  /**
   * Pins units `[first, end)` of `entry` when all are present: pushes them to
   * `out`, bumps their refs and marks them recently used. Returns false (and
   * pins nothing) when any is missing.
   */
  pin(entry: Entry, first: number, end: number, out: Array<Unit>): boolean {
    const units = entry.units
    for (let i = first; i < end; i++) if (units[i] === undefined) return false
    const dir = this.#dirs[entry.dirIndex]!
    const open = this.#open
    for (let i = first; i < end; i++) {
      const u = units[i]!
      u.refs++
      touchLru(dir, u)
      if (u.fd >= 0 && this.#fdMoves - u.fdStamp > open.size >> 2) {
        open.delete(u)
        open.add(u)
        u.fdStamp = ++this.#fdMoves
      }
      out.push(u)
    }
    return true
  }

  /** Marks a unit recently used without pinning it (hits answered outside `pin`). */
  touch(u: Unit): void {
    if (!u.gone) touchLru(this.#dirs[u.entry.dirIndex]!, u)
  }

  /**
   * Makes sure every pinned unit in `units[from..]` has an open fd. Returns
   * undefined when they all do (the hot path), else a promise of whether all
   * opened; a unit whose file vanished is dropped from the index (false).
   */
  ensureOpen(units: ReadonlyArray<Unit>, from = 0): Promise<boolean> | undefined {
    let pending: Array<Promise<boolean>> | undefined
    for (let i = from; i < units.length; i++) {
      const u = units[i]!
      if (u.fd >= 0) continue
      ;(pending ??= []).push(u.opening ?? (u.opening = this.#openUnit(u)))
    }
    if (pending === undefined) return undefined
    return Promise.all(pending).then((oks) => oks.every((ok) => ok))
  }

  /** Unpins units (once per pin). Runs deferred eviction when a dir is over capacity. */
  release(units: ReadonlyArray<Unit>, from = 0): void {
    let over = false
    for (let i = from; i < units.length; i++) {
      const u = units[i]!
      u.refs--
      if (u.refs === 0) {
        if (u.gone) this.#closeUnitFd(u)
        else if (!over) {
          const d = this.#dirs[u.entry.dirIndex]!
          over = d.resident > d.capacity
        }
      }
    }
    if (over) for (let i = 0; i < this.#dirs.length; i++) this.#makeRoom(this.#dirs[i]!, 0)
  }

  /** Absent units in `[first, end)` as maximal runs (everything, when the block is not indexed). */
  missingRuns(key: string, first: number, end: number): Array<[number, number]> {
    const entry = this.#index.get(key)
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

  // ----------------------------------------------------------------- fill side

  /** Which cache dir a block belongs to: an existing entry keeps its dir, new ones hash. */
  dirFor(key: string): number {
    const existing = this.#index.get(key)
    if (existing !== undefined) return existing.dirIndex
    if (this.#dirs.length === 1) return 0
    return parseInt(blockDirName(key, this.pageSize).slice(0, 8), 16) % this.#dirs.length
  }

  /** Creates a temp file (read/write) in the dir a block belongs to. */
  async createTemp(key: string): Promise<{ readonly path: string; readonly fd: number }> {
    const dir = this.#dirs[this.dirFor(key)]!
    const p = path.join(dir.tmp, randomBytes(12).toString("hex"))
    const fd = await openFd(p, "w+", 0o644)
    return { path: p, fd }
  }

  /** Discards a temp file whose fill failed. */
  async discardTemp(tmpPath: string, fd: number): Promise<void> {
    closeQuietly(fd)
    await fs.rm(tmpPath, { force: true }).catch(() => {})
  }

  /**
   * Renames a fully written temp file into place as unit `filled.index` of
   * block `id` (of `length` bytes), indexes it and evicts to capacity. The
   * temp fd becomes the serving fd. On failure the temp file is removed.
   */
  async commit(id: BlockId, length: number, objectSize: number, filled: FilledUnit): Promise<void> {
    if (this.#closed) {
      await this.discardTemp(filled.tmpPath, filled.fd)
      throw new Error("the block store is closed")
    }
    const key = blockKey(id)
    let entry = this.#index.get(key)
    if (entry === undefined) {
      const meta: BlockMeta = { id, length, pageSize: this.pageSize, objectSize }
      const dirIndex = this.dirFor(key)
      const dir = this.#dirs[dirIndex]!
      entry = new Entry(key, meta, blockDirPath(dir.root, blockDirName(key, this.pageSize)), dirIndex)
      this.#index.set(key, entry)
    }
    const target = entry
    target.pendingCommits++
    try {
      await (target.ready ??= this.#prepareDir(target))
      await fs.rename(filled.tmpPath, target.unitPath(filled.index))
    } catch (e) {
      target.pendingCommits--
      await this.discardTemp(filled.tmpPath, filled.fd)
      this.#dropIfEmpty(target)
      throw e
    }
    target.pendingCommits--
    if (this.#closed) {
      closeQuietly(filled.fd)
      return
    }
    if (target.units[filled.index] !== undefined) {
      // Already present (a racing fill): the old fd still reads identical bytes.
      closeQuietly(filled.fd)
      return
    }
    const unit = new Unit(target, filled.index, target.unitBytes(filled.index))
    unit.fd = filled.fd
    this.#register(unit)
    this.#trackOpen(unit)
    const dir = this.#dirs[target.dirIndex]!
    this.#makeRoom(dir, 0)
    if (target.paged) this.#persistBitmap(target)
  }

  /**
   * Per object, the version of its most recently written blocks found at
   * start-up. Seeding the version cache with these lets a restarted worker
   * serve warm blocks without a HEAD (still bounded by the version TTL).
   */
  knownVersions(): ReadonlyArray<KnownVersion> {
    return [...this.#known.values()].map(({ object, version, size }) => ({ object, version, size }))
  }

  // --------------------------------------------------------------------- stats

  /** Blocks with at least one present unit (what a heartbeat reports). */
  get blockCount(): number {
    return this.#blocks
  }

  get residentBytes(): number {
    let n = 0
    for (const d of this.#dirs) n += d.resident
    return n
  }

  stats(): StoreStats {
    let units = 0
    for (const d of this.#dirs) units += d.lru.size
    return {
      blocks: this.#blocks,
      units,
      residentBytes: this.residentBytes,
      perDir: this.#dirs.map((d) => ({ root: d.root, residentBytes: d.resident, capacity: d.capacity })),
      openFiles: this.#open.size
    }
  }

  /** Waits for queued background disk work (bitmap writes, unlinks of evicted units). */
  async flush(): Promise<void> {
    const pending: Array<Promise<void>> = []
    for (const e of this.#index.values()) pending.push(e.io)
    for (const d of this.#dirs) for (const p of d.removing.values()) pending.push(p)
    await Promise.allSettled(pending)
  }

  /** Closes every fd and waits for background disk work. Pinned units are closed too: call after serving stopped. */
  async close(): Promise<void> {
    this.#closed = true
    await this.flush()
    for (const u of this.#open) closeQuietly(u.fd)
    this.#open.clear()
  }

  // ------------------------------------------------------------------ internals

  #register(unit: Unit): void {
    const entry = unit.entry
    const dir = this.#dirs[entry.dirIndex]!
    entry.units[unit.index] = unit
    if (entry.present === 0) this.#blocks++
    entry.present++
    entry.bitmap?.set(unit.index)
    dir.resident += unit.bytes
    dir.lru.add(unit)
    unit.lruStamp = ++dir.moves
  }

  #trackOpen(unit: Unit): void {
    this.#open.add(unit)
    unit.fdStamp = ++this.#fdMoves
    if (this.#open.size <= this.#maxOpen) return
    for (const u of this.#open) {
      if (this.#open.size <= this.#maxOpen) break
      if (u.refs === 0 && u !== unit) this.#closeUnitFd(u)
    }
  }

  #closeUnitFd(u: Unit): void {
    if (u.fd >= 0) {
      closeQuietly(u.fd)
      u.fd = -1
    }
    this.#open.delete(u)
  }

  async #openUnit(u: Unit): Promise<boolean> {
    try {
      const fd = await openFd(u.path, "r")
      u.opening = undefined
      if (this.#closed) {
        closeQuietly(fd)
        return false
      }
      u.fd = fd
      this.#trackOpen(u)
      return true
    } catch (e) {
      u.opening = undefined
      if (!isNotFound(e)) this.#warn(`cannot open ${u.path}: ${String(e)}`)
      if (!u.gone) this.#unindex(u, false)
      return false
    }
  }

  /** Evicts least recently used, unpinned units until `extra` more bytes fit. */
  #makeRoom(dir: DirState, extra: number): void {
    if (dir.resident + extra <= dir.capacity) return
    for (const u of dir.lru) {
      if (dir.resident + extra <= dir.capacity) break
      if (u.refs > 0) continue
      this.#unindex(u, true)
      this.#onEvict(u.bytes)
    }
  }

  /** Removes a unit from the index; `unlink` also deletes its file (eviction). */
  #unindex(u: Unit, unlink: boolean): void {
    this.onUnitGone?.(u)
    const entry = u.entry
    const dir = this.#dirs[entry.dirIndex]!
    u.gone = true
    dir.lru.delete(u)
    dir.resident -= u.bytes
    entry.units[u.index] = undefined
    entry.bitmap?.clear(u.index)
    entry.present--
    if (entry.present === 0) this.#blocks--
    if (u.refs === 0) this.#closeUnitFd(u)
    if (entry.present === 0 && entry.pendingCommits === 0) {
      this.#removeEntry(entry)
      return
    }
    if (unlink) {
      const file = u.path
      entry.io = entry.io.then(() => fs.rm(file, { force: true })).catch((e) => this.#warn(`cannot remove ${file}: ${String(e)}`))
    }
    if (entry.paged) this.#persistBitmap(entry)
  }

  #dropIfEmpty(entry: Entry): void {
    if (!entry.removed && entry.present === 0 && entry.pendingCommits === 0) this.#removeEntry(entry)
  }

  #removeEntry(entry: Entry): void {
    entry.removed = true
    if (this.#index.get(entry.key) === entry) this.#index.delete(entry.key)
    const dir = this.#dirs[entry.dirIndex]!
    const p = entry.path
    const removal = entry.io
      .then(() => fs.rm(p, { recursive: true, force: true }))
      .catch((e) => this.#warn(`cannot remove ${p}: ${String(e)}`))
      .finally(() => {
        if (dir.removing.get(p) === removal) dir.removing.delete(p)
      })
    entry.io = removal
    dir.removing.set(p, removal)
  }

  /** mkdir + meta (temp + rename), after any pending removal of the same directory. */
  async #prepareDir(entry: Entry): Promise<void> {
    const dir = this.#dirs[entry.dirIndex]!
    const prior = dir.removing.get(entry.path)
    if (prior !== undefined) await prior
    await fs.mkdir(entry.path, { recursive: true })
    const tmp = path.join(dir.tmp, randomBytes(12).toString("hex"))
    await fs.writeFile(tmp, encodeMeta(entry.meta))
    await fs.rename(tmp, path.join(entry.path, META_FILE))
  }

  /** Coalescing bitmap write: at most one in flight per block, the last state always lands. */
  #persistBitmap(entry: Entry): void {
    if (entry.bitmapDirty) return
    entry.bitmapDirty = true
    const dir = this.#dirs[entry.dirIndex]!
    entry.io = entry.io
      .then(async () => {
        entry.bitmapDirty = false
        if (entry.removed) return
        const bytes = entry.bitmap!.toBytes()
        const tmp = path.join(dir.tmp, randomBytes(12).toString("hex"))
        await fs.writeFile(tmp, bytes)
        if (entry.removed) {
          await fs.rm(tmp, { force: true })
          return
        }
        await fs.rename(tmp, path.join(entry.path, BITMAP_FILE))
      })
      .catch((e) => this.#warn(`cannot write the bitmap of ${entry.path}: ${String(e)}`))
  }

  // ------------------------------------------------------------------- rebuild

  async #rebuild(dirIndex: number): Promise<void> {
    const dir = this.#dirs[dirIndex]!
    await fs.rm(dir.tmp, { recursive: true, force: true })
    await fs.mkdir(dir.tmp, { recursive: true })
    const top = path.join(dir.root, LAYOUT_VERSION)
    await fs.mkdir(top, { recursive: true })
    const found: Array<{ unit: Unit; mtimeMs: number }> = []
    for (const shard of await fs.readdir(top)) {
      const shardPath = path.join(top, shard)
      let names: Array<string>
      try {
        names = await fs.readdir(shardPath)
      } catch {
        continue
      }
      for (const name of names) await this.#rebuildBlock(dirIndex, path.join(shardPath, name), name, found)
    }
    found.sort((a, b) => a.mtimeMs - b.mtimeMs)
    for (const { unit } of found) this.#register(unit)
    this.#makeRoom(dir, 0)
    for (const e of this.#index.values()) if (e.dirIndex === dirIndex && e.paged && e.present > 0) this.#persistBitmap(e)
  }

  async #rebuildBlock(
    dirIndex: number,
    blockPath: string,
    name: string,
    found: Array<{ unit: Unit; mtimeMs: number }>
  ): Promise<void> {
    const discard = () => fs.rm(blockPath, { recursive: true, force: true })
    const metaText = await fs.readFile(path.join(blockPath, META_FILE), "utf8").catch(() => undefined)
    const meta = metaText === undefined ? undefined : decodeMeta(metaText)
    if (meta === undefined || meta.pageSize !== this.pageSize) return discard()
    const key = blockKey(meta.id)
    if (blockDirName(key, meta.pageSize) !== name || this.#index.has(key)) return discard()
    const entry = new Entry(key, meta, blockPath, dirIndex)
    entry.ready = Promise.resolve()
    const files = await fs.readdir(blockPath)
    const candidates: Array<[file: string, index: number]> = []
    for (const f of files) {
      if (f === META_FILE || f === BITMAP_FILE) continue
      const index = meta.pageSize > 0 ? parsePageFileName(f) : f === BLOCK_FILE ? 0 : undefined
      if (index === undefined || index >= entry.units.length) {
        await fs.rm(path.join(blockPath, f), { recursive: true, force: true })
        continue
      }
      candidates.push([f, index])
    }
    const stats = await Promise.all(candidates.map(([f]) => fs.stat(path.join(blockPath, f)).catch(() => undefined)))
    let kept = 0
    let newest = 0
    for (let i = 0; i < candidates.length; i++) {
      const [f, index] = candidates[i]!
      const st = stats[i]
      if (st === undefined || !st.isFile() || st.size !== entry.unitBytes(index)) {
        // A page of the wrong size cannot have come from a completed rename of this geometry.
        await fs.rm(path.join(blockPath, f), { force: true })
        continue
      }
      found.push({ unit: new Unit(entry, index, entry.unitBytes(index)), mtimeMs: st.mtimeMs })
      kept++
      newest = Math.max(newest, st.mtimeMs)
    }
    if (kept === 0) return discard()
    this.#index.set(key, entry)
    const o = meta.id.object
    const objectKey = `${o.backend}\0${o.bucket}\0${o.objectPath}`
    const prior = this.#known.get(objectKey)
    if (prior === undefined || prior.mtimeMs < newest) {
      this.#known.set(objectKey, { object: o, version: meta.id.version, size: meta.objectSize, mtimeMs: newest })
    }
  }
}

/** Reads the persisted bitmap of a paged block directory (diagnostics and tests). */
export const readBitmap = async (blockPath: string): Promise<PresentBitmap | undefined> => {
  const bytes = await fs.readFile(path.join(blockPath, BITMAP_FILE)).catch(() => undefined)
  return bytes === undefined ? undefined : PresentBitmap.fromBytes(bytes)
}

export { closeFd }
