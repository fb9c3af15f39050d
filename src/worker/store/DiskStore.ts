/**
 * The block store proper, as plain TypeScript: the serve loop calls `pin` and
 * `release` per request, so they are synchronous Map/Set operations with no
 * Effect or Promise in the common case.
 *
 * Invariants:
 * - A unit is in the index only after its file was written, fdatasynced and
 *   renamed into place (a temp file never looks present, before or after a
 *   crash), with the XXH64 of its bytes (recorded in the block's `sums` file).
 * - A unit found on disk at start-up is served only once its bytes matched
 *   that checksum; one that fails any check (size, checksum, a later scrub)
 *   is dropped: unpublished (onUnitGone), unlinked, refetched on the next read.
 * - ENOSPC is the real capacity: the dir's capacity drops to what fitted,
 *   LRU units are evicted and the write retried (DiskStore.#reclaim).
 * - A pinned unit (refs > 0) is never evicted and its fd never closed.
 * - Each cache dir accounts its committed bytes against its own capacity;
 *   eviction is LRU over units (pages or whole blocks). Pinned units can push
 *   a dir past capacity for as long as they are pinned; the excess is evicted
 *   when they are released.
 */
import { randomBytes } from "node:crypto"
import { fstatSync } from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import type { BlockId } from "../../core/ids.js"
import { PresentBitmap } from "../../core/bitmap.js"
import { Entry, Unit } from "./entry.js"
import { checkFile, encodeSums, loadHasher } from "./checksum.js"
import { closeFd, closeQuietly, fdatasync, isNotFound, openFd, writeAll } from "./fsx.js"
import { type CorruptReason, isNoSpace, StoreHealth } from "./health.js"
import { BITMAP_FILE, blockDirName, blockDirPath, blockKey, type BlockMeta, encodeMeta, META_FILE, SUMS_FILE, TMP_DIR } from "./layout.js"
import { scanCacheDir } from "./rebuild.js"

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
  /** Non-fatal background failures (unlink, bitmap write) and what the store dropped or evicted on its own. */
  readonly onWarning?: (message: string) => void
  /** fdatasync each filled unit before its rename (default true; off only to measure what it costs). */
  readonly fsync?: boolean
}

/** ENOSPC retries of one write, each after evicting: more only when other fills race for the freed room. */
const NOSPACE_ATTEMPTS = 8

interface DirState {
  readonly root: string
  readonly tmp: string
  /** The configured capacity, lowered to what actually fitted when the filesystem ran out of space. */
  capacity: number
  /** In a disk-full episode: ENOSPC seen, no fill committed since (the warning is logged once per episode). */
  full: boolean
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
  /** XXH64 of the bytes written (checksum.ts). */
  readonly sum: bigint
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
  readonly #fsync: boolean
  /** Corrupt units dropped, verifies, disk-full episodes (the worker's /metrics). */
  readonly health = new StoreHealth()
  /** Told of every unit leaving the index (evicted or found missing), before its file goes. */
  onUnitGone: ((unit: Unit) => void) | undefined = undefined

  private constructor(options: DiskStoreOptions) {
    if (options.dirs.length === 0) throw new Error("the block store needs at least one cache dir")
    this.pageSize = options.pageSize
    this.#dirs = options.dirs.map((root) => ({
      root: path.resolve(root),
      tmp: path.join(path.resolve(root), TMP_DIR),
      capacity: options.capacity,
      full: false,
      resident: 0,
      lru: new Set<Unit>(),
      moves: 0,
      removing: new Map()
    }))
    this.#maxOpen = options.maxOpenFiles ?? 4096
    this.#onEvict = options.onEvict ?? (() => {})
    this.#warn = options.onWarning ?? (() => {})
    this.#fsync = options.fsync ?? true
  }

  /** Opens the store: creates the dirs, clears stale temp files, rebuilds the index from disk. */
  static async open(options: DiskStoreOptions): Promise<DiskStore> {
    await loadHasher()
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
   * opened; a unit whose file vanished is dropped from the index (false), and
   * so is one found at start-up whose bytes do not match its checksum.
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
    const dirIndex = this.dirFor(key)
    const dir = this.#dirs[dirIndex]!
    const p = path.join(dir.tmp, randomBytes(12).toString("hex"))
    const fd = await this.#withRoom(dirIndex, 0, () => openFd(p, "w+", 0o644))
    return { path: p, fd }
  }

  /**
   * Writes `buf` at `position` of a temp file of block `key`. On ENOSPC it evicts (the
   * filesystem's space is the real capacity) and writes again; it fails only when nothing
   * evictable is left.
   */
  writeTemp(key: string, fd: number, buf: Uint8Array, position: number): Promise<void> {
    return this.#withRoom(this.dirFor(key), buf.length, () => writeAll(fd, buf, position))
  }

  /** Makes a finished temp file durable before its rename (a renamed unit must never be torn by a crash). */
  async syncTemp(key: string, fd: number): Promise<void> {
    if (!this.#fsync) return
    const started = performance.now()
    await this.#withRoom(this.dirFor(key), 0, () => fdatasync(fd))
    this.health.fsyncs++
    this.health.fsyncSeconds += (performance.now() - started) / 1000
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
      await (target.ready ??= this.#withRoom(target.dirIndex, 0, () => this.#prepareDir(target)).catch((e) => {
        target.ready = undefined
        throw e
      }))
      // A dropped copy of this unit still being unlinked must not take the new file with it.
      const unlinking = target.unlinking.get(filled.index)
      if (unlinking !== undefined) await unlinking
      // Checksum first, then the rename: a unit on disk without its checksum would be dropped at start-up.
      target.pendingSums.set(filled.index, filled.sum)
      await this.#persistIndex(target)
      await fs.rename(filled.tmpPath, target.unitPath(filled.index))
      target.pendingSums.delete(filled.index)
    } catch (e) {
      target.pendingSums.delete(filled.index)
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
    const unit = new Unit(target, filled.index, target.unitBytes(filled.index), filled.sum)
    unit.fd = filled.fd
    this.#register(unit)
    this.#trackOpen(unit)
    const dir = this.#dirs[target.dirIndex]!
    if (dir.full) {
      dir.full = false
      this.#warn(`cache dir ${dir.root} has room again: fills commit within its capacity of ${dir.capacity} bytes (lowered after ENOSPC)`)
    }
    this.#makeRoom(dir, 0)
    this.#persistIndex(target)
  }

  // ------------------------------------------------------------------ integrity

  /** Units currently indexed, in LRU order per dir (the scrubber walks them). */
  *units(): Iterable<Unit> {
    for (const d of this.#dirs) yield* d.lru
  }

  /**
   * Hashes a unit's bytes against its recorded checksum (through a fd of its own); a unit
   * that fails is dropped. Resolves whether it is still indexed and good.
   */
  async verify(u: Unit, scratch?: Uint8Array): Promise<boolean> {
    if (u.gone) return false
    let fd: number
    try {
      fd = await openFd(u.path, "r")
    } catch (e) {
      if (!u.gone) this.#drop(u, "short", isNotFound(e) ? "its file is gone" : `cannot open it: ${String(e)}`)
      return false
    }
    try {
      return await this.#check(u, fd, scratch)
    } finally {
      closeQuietly(fd)
    }
  }

  /**
   * Drops every open unit whose file no longer has its size (a truncation: sendfile would come
   * up short and cut the reply). fstat of the serving fd, on the event loop (about a microsecond
   * each, no thread-pool hop to compete with fills), yielding every `batch` units.
   */
  async checkSizes(batch = 256): Promise<number> {
    const open = [...this.#open]
    let dropped = 0
    for (let i = 0; i < open.length; i++) {
      if (i > 0 && i % batch === 0) await new Promise<void>((r) => setImmediate(r))
      const u = open[i]!
      if (u.gone || u.fd < 0) continue
      let size: number
      try {
        size = fstatSync(u.fd).size
      } catch {
        continue
      }
      if (size === u.bytes) continue
      this.#drop(u, size < u.bytes ? "short" : "long", `${size} of ${u.bytes} bytes on disk`)
      dropped++
    }
    return dropped
  }

  async #check(u: Unit, fd: number, scratch?: Uint8Array): Promise<boolean> {
    let result
    try {
      result = await checkFile(fd, u.bytes, u.sum, scratch)
    } catch (e) {
      result = { ok: false as const, reason: "short" as const, detail: `cannot read it: ${String(e)}` }
    }
    if (u.gone) return false
    if (!result.ok) {
      this.#drop(u, result.reason, result.detail)
      return false
    }
    u.verified = true
    this.health.verifiedUnits++
    return true
  }

  /** Takes a unit whose bytes cannot be trusted out of service for good: unpublished, unlinked, counted. */
  #drop(u: Unit, reason: CorruptReason, detail: string): void {
    this.health.corrupt[reason]++
    this.#warn(`dropped ${u.path} (${reason}: ${detail}); it will be refetched from the origin on the next read`)
    this.#unindex(u, true)
  }

  /**
   * Runs a filesystem write, evicting and retrying on ENOSPC: the dir's capacity drops to what
   * is resident less `need` (what the write still wants), so the LRU makes the room.
   */
  async #withRoom<A>(dirIndex: number, need: number, write: () => Promise<A>): Promise<A> {
    const dir = this.#dirs[dirIndex]!
    for (let attempt = 1; ; attempt++) {
      try {
        return await write()
      } catch (e) {
        if (!isNoSpace(e) || this.#closed) throw e
        this.health.diskFullErrors++
        const freed = await this.#reclaim(dir, Math.max(need, this.pageSize, 4096))
        if (freed === 0 || attempt >= NOSPACE_ATTEMPTS) {
          throw new Error(
            `cache dir ${dir.root} is out of space (ENOSPC) with ${dir.resident} bytes resident and nothing more to evict ` +
              `(${attempt} attempts); free space on that filesystem or lower --capacity`,
            { cause: e }
          )
        }
      }
    }
  }

  /** After ENOSPC: lowers the dir's capacity to what fits, evicts to it, waits for the unlinks. Returns bytes freed. */
  async #reclaim(dir: DirState, need: number): Promise<number> {
    const capacity = Math.max(0, Math.min(dir.capacity, dir.resident - need))
    if (!dir.full) {
      dir.full = true
      this.health.diskFullEpisodes++
      this.#warn(
        `cache dir ${dir.root} is full (ENOSPC) at ${dir.resident} resident bytes: capacity lowered from ${dir.capacity} ` +
          `to ${capacity} bytes until restart, evicting least recently used units to make room`
      )
    }
    dir.capacity = capacity
    const before = dir.resident
    this.#makeRoom(dir, 0)
    const freed = before - dir.resident
    this.health.diskFullEvictedBytes += freed
    await this.flush()
    return freed
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
      // Found on disk at start-up: hashed before its first byte is served.
      if (!u.verified && !(await this.#check(u, fd))) {
        u.opening = undefined
        closeQuietly(fd)
        return false
      }
      u.opening = undefined
      if (this.#closed || u.gone) {
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
      const index = u.index
      const removal = entry.io.then(() => fs.rm(file, { force: true })).catch((e) => this.#warn(`cannot remove ${file}: ${String(e)}`))
      entry.io = removal
      entry.unlinking.set(index, removal)
      void removal.then(() => {
        if (entry.unlinking.get(index) === removal) entry.unlinking.delete(index)
      })
    }
    this.#persistIndex(entry)
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
    await this.#replaceFile(dir, path.join(entry.path, META_FILE), encodeMeta(entry.meta))
  }

  /** Writes a small file through a temp name; a failed write (ENOSPC) leaves no partial temp file behind. */
  async #replaceFile(dir: DirState, target: string, data: string | Uint8Array, stillWanted?: () => boolean): Promise<void> {
    const tmp = path.join(dir.tmp, randomBytes(12).toString("hex"))
    try {
      await fs.writeFile(tmp, data)
      if (stillWanted !== undefined && !stillWanted()) {
        await fs.rm(tmp, { force: true })
        return
      }
      await fs.rename(tmp, target)
    } catch (e) {
      await fs.rm(tmp, { force: true }).catch(() => {})
      throw e
    }
  }

  /**
   * Coalescing write of a block's checksums (and bitmap, paged): at most one in flight per
   * block, the last state always lands. A unit renamed before its checksum landed is dropped
   * at the next start-up (refetched), never trusted.
   */
  #persistIndex(entry: Entry): Promise<void> {
    if (entry.removed) return Promise.resolve()
    // A write queued and not yet started reads the state when it starts: it covers this call too.
    if (entry.bitmapDirty) return entry.io
    entry.bitmapDirty = true
    const dir = this.#dirs[entry.dirIndex]!
    entry.io = entry.io
      .then(async () => {
        entry.bitmapDirty = false
        if (entry.removed) return
        const alive = () => !entry.removed
        const sums = entry.units.map((u, i) => u?.sum ?? entry.pendingSums.get(i))
        await this.#replaceFile(dir, path.join(entry.path, SUMS_FILE), encodeSums(sums), alive)
        if (entry.bitmap !== undefined) await this.#replaceFile(dir, path.join(entry.path, BITMAP_FILE), entry.bitmap.toBytes(), alive)
      })
      .catch((e) => {
        if (isNoSpace(e)) this.health.diskFullErrors++
        this.#warn(`cannot write the checksums of ${entry.path}: ${String(e)}`)
      })
    return entry.io
  }

  // ------------------------------------------------------------------- rebuild

  async #rebuild(dirIndex: number): Promise<void> {
    const dir = this.#dirs[dirIndex]!
    await fs.rm(dir.tmp, { recursive: true, force: true })
    await fs.mkdir(dir.tmp, { recursive: true })
    const { entries, found } = await scanCacheDir(dir.root, dirIndex, this.pageSize, {
      has: (key) => this.#index.has(key),
      dropped: (file, reason, detail) => {
        this.health.corrupt[reason]++
        this.#warn(`dropped ${file} at start-up (${reason}: ${detail}); it will be refetched from the origin on the next read`)
      }
    })
    const newest = new Map<Entry, number>()
    for (const f of found) newest.set(f.unit.entry, Math.max(newest.get(f.unit.entry) ?? 0, f.mtimeMs))
    for (const entry of entries) {
      this.#index.set(entry.key, entry)
      this.#noteKnown(entry, newest.get(entry) ?? 0)
    }
    found.sort((a, b) => a.mtimeMs - b.mtimeMs)
    for (const { unit } of found) this.#register(unit)
    this.#makeRoom(dir, 0)
    for (const e of entries) if (e.present > 0) this.#persistIndex(e)
  }

  #noteKnown(entry: Entry, newest: number): void {
    const o = entry.meta.id.object
    const objectKey = `${o.backend}\0${o.bucket}\0${o.objectPath}`
    const prior = this.#known.get(objectKey)
    if (prior === undefined || prior.mtimeMs < newest) {
      this.#known.set(objectKey, { object: o, version: entry.meta.id.version, size: entry.meta.objectSize, mtimeMs: newest })
    }
  }
}

/** Reads the persisted bitmap of a paged block directory (diagnostics and tests). */
export const readBitmap = async (blockPath: string): Promise<PresentBitmap | undefined> => {
  const bytes = await fs.readFile(path.join(blockPath, BITMAP_FILE)).catch(() => undefined)
  return bytes === undefined ? undefined : PresentBitmap.fromBytes(bytes)
}

export { closeFd }
