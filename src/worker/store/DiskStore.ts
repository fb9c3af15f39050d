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
 *   LRU units are evicted and the write retried (space.ts).
 * - A pinned unit (refs > 0) is never evicted and its fd never closed.
 * - Each cache dir accounts its committed bytes against its own capacity;
 *   eviction is LRU over units (pages or whole blocks). Pinned units can push
 *   a dir past capacity for as long as they are pinned; the excess is evicted
 *   when they are released.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import type { BlockId, ObjectId } from "../../core/ids.js"
import { loadHasher } from "./checksum.js"
import { type DirState, type DiskStoreOptions, type FilledUnit, type KnownVersion, makeDirState, type StoreStats, touchLru } from "./dirs.js"
import { Entry, Unit } from "./entry.js"
import { persistIndex, prepareBlockDir } from "./files.js"
import { closeFd, closeQuietly, fdatasync, openFd, writeAll } from "./fsx.js"
import { FillActivity } from "./fillActivity.js"
import { type CorruptReason, StoreHealth } from "./health.js"
import { checkSizes, type Integrity, verifyUnit } from "./integrity.js"
import { blockDirName, blockDirPath, blockKey, type BlockMeta } from "./layout.js"
import { BlockIndex } from "./blockIndex.js"
import { KnownVersions, scanCacheDir } from "./rebuild.js"
import { type Opener, OpenFiles, openUnit } from "./openFiles.js"
import { type Space, withRoom } from "./space.js"

export class DiskStore {
  readonly pageSize: number
  readonly #dirs: ReadonlyArray<DirState>
  readonly #idx: BlockIndex
  readonly #files: OpenFiles
  readonly #onEvict: (bytes: number) => void
  readonly #warn: (message: string) => void
  #closed = false
  readonly #known = new KnownVersions()
  readonly #fsync: boolean
  /** Corrupt units dropped, verifies, disk-full episodes (the worker's /metrics). */
  readonly health = new StoreHealth()
  /** Origin fills streaming into the store (fetchRun); the scrub keeps out of their way. */
  readonly fills = new FillActivity()
  /** Told of every unit leaving the index (evicted or found missing), before its file goes. */
  onUnitGone: ((unit: Unit) => void) | undefined = undefined
  readonly #integrity: Integrity = { health: this.health, drop: (u, reason, detail) => this.#drop(u, reason, detail) }
  readonly #space: Space
  readonly #opener: Opener = {
    integrity: this.#integrity,
    closed: () => this.#closed,
    warn: (message) => this.#warn(message),
    track: (u) => this.#files.track(u),
    unindex: (u) => this.#idx.unindex(u, false)
  }

  private constructor(options: DiskStoreOptions) {
    if (options.dirs.length === 0) throw new Error("the block store needs at least one cache dir")
    this.pageSize = options.pageSize
    this.#dirs = options.dirs.map((root) => makeDirState(root, options.capacity))
    this.#files = new OpenFiles(options.maxOpenFiles ?? 4096)
    this.#onEvict = options.onEvict ?? (() => {})
    this.#warn = options.onWarning ?? (() => {})
    this.#fsync = options.fsync ?? true
    this.#idx = new BlockIndex(this.#dirs, this.pageSize, {
      gone: (u) => this.onUnitGone?.(u),
      evicted: (bytes) => this.#onEvict(bytes),
      closeFd: (u) => this.#files.close(u),
      persist: (entry) => this.#persistIndex(entry),
      warn: this.#warn
    })
    this.#space = {
      pageSize: this.pageSize,
      health: this.health,
      warn: this.#warn,
      closed: () => this.#closed,
      makeRoom: (dir) => this.#idx.makeRoom(dir, 0),
      flush: () => this.flush()
    }
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
    return this.#idx.entries.get(key)
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
    const files = this.#files
    for (let i = first; i < end; i++) {
      const u = units[i]!
      u.refs++
      touchLru(dir, u)
      files.touch(u)
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
      ;(pending ??= []).push(u.opening ?? (u.opening = openUnit(u, this.#opener)))
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
        if (u.gone) this.#files.close(u)
        else if (!over) {
          const d = this.#dirs[u.entry.dirIndex]!
          over = d.resident > d.capacity
        }
      }
    }
    if (over) for (let i = 0; i < this.#dirs.length; i++) this.#idx.makeRoom(this.#dirs[i]!, 0)
  }

  /** Absent units in `[first, end)` as maximal runs (everything, when the block is not indexed). */
  missingRuns(key: string, first: number, end: number): Array<[number, number]> {
    return this.#idx.missingRuns(key, first, end)
  }

  // ----------------------------------------------------------------- fill side

  /** Which cache dir a block belongs to: an existing entry keeps its dir, new ones hash. */
  dirFor(key: string): number {
    return this.#idx.dirFor(key)
  }

  /** Creates a temp file (read/write) in the dir a block belongs to. */
  async createTemp(key: string): Promise<{ readonly path: string; readonly fd: number }> {
    const dirIndex = this.#idx.dirFor(key)
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
    return this.#withRoom(this.#idx.dirFor(key), buf.length, () => writeAll(fd, buf, position))
  }

  /** Makes a finished temp file durable before its rename (a renamed unit must never be torn by a crash). */
  async syncTemp(key: string, fd: number): Promise<void> {
    if (!this.#fsync) return
    const started = performance.now()
    await this.#withRoom(this.#idx.dirFor(key), 0, () => fdatasync(fd))
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
    let entry = this.#idx.entries.get(key)
    if (entry === undefined) {
      const meta: BlockMeta = { id, length, pageSize: this.pageSize, objectSize }
      const dirIndex = this.#idx.dirFor(key)
      const dir = this.#dirs[dirIndex]!
      entry = new Entry(key, meta, blockDirPath(dir.root, blockDirName(key, this.pageSize)), dirIndex)
      this.#idx.entries.set(key, entry)
    }
    const target = entry
    target.pendingCommits++
    try {
      await (target.ready ??= this.#withRoom(target.dirIndex, 0, () => prepareBlockDir(this.#dirs[target.dirIndex]!, target)).catch((e) => {
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
      this.#idx.dropIfEmpty(target)
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
    this.#idx.register(unit)
    this.#files.track(unit)
    const dir = this.#dirs[target.dirIndex]!
    if (dir.full) {
      dir.full = false
      this.#warn(`cache dir ${dir.root} has room again: fills commit within its capacity of ${dir.capacity} bytes (lowered after ENOSPC)`)
    }
    this.#idx.makeRoom(dir, 0)
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
  verify(u: Unit, scratch?: Uint8Array): Promise<boolean> {
    return verifyUnit(this.#integrity, u, scratch)
  }

  /**
   * Drops every open unit whose file no longer has its size (a truncation: sendfile would come
   * up short and cut the reply). fstat of the serving fd, on the event loop (about a microsecond
   * each, no thread-pool hop to compete with fills), yielding every `batch` units.
   */
  checkSizes(batch = 256): Promise<number> {
    return checkSizes(this.#integrity, this.#files.units(), batch)
  }

  /**
   * Takes every block of `object` (any version) out of the cache and unlinks its files: the
   * object was overwritten or deleted through this worker. A unit being sent keeps its open fd
   * until the reply is done. Returns the bytes dropped.
   */
  dropObject(object: ObjectId): number {
    let bytes = 0
    for (const entry of [...this.#idx.entries.values()]) {
      const o = entry.meta.id.object
      if (o.backend !== object.backend || o.bucket !== object.bucket || o.objectPath !== object.objectPath) continue
      for (const u of entry.units) {
        if (u === undefined) continue
        bytes += u.bytes
        this.#idx.unindex(u, true)
      }
    }
    return bytes
  }

  /** Takes a unit whose bytes cannot be trusted out of service for good: unpublished, unlinked, counted. */
  #drop(u: Unit, reason: CorruptReason, detail: string): void {
    this.health.corrupt[reason]++
    this.#warn(`dropped ${u.path} (${reason}: ${detail}); it will be refetched from the origin on the next read`)
    this.#idx.unindex(u, true)
  }

  #withRoom<A>(dirIndex: number, need: number, write: () => Promise<A>): Promise<A> {
    return withRoom(this.#space, this.#dirs[dirIndex]!, need, write)
  }

  /**
   * Per object, the version of its most recently written blocks found at
   * start-up. Seeding the version cache with these lets a restarted worker
   * serve warm blocks without a HEAD (still bounded by the version TTL).
   */
  knownVersions(): ReadonlyArray<KnownVersion> {
    return this.#known.list()
  }

  // --------------------------------------------------------------------- stats

  /** Blocks with at least one present unit (what a heartbeat reports). */
  get blockCount(): number {
    return this.#idx.blocks
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
      blocks: this.#idx.blocks,
      units,
      residentBytes: this.residentBytes,
      perDir: this.#dirs.map((d) => ({ root: d.root, residentBytes: d.resident, capacity: d.capacity })),
      openFiles: this.#files.size
    }
  }

  /** Waits for queued background disk work (bitmap writes, unlinks of evicted units). */
  async flush(): Promise<void> {
    const pending: Array<Promise<void>> = []
    for (const e of this.#idx.entries.values()) pending.push(e.io)
    for (const d of this.#dirs) for (const p of d.removing.values()) pending.push(p)
    await Promise.allSettled(pending)
  }

  /** Closes every fd and waits for background disk work. Pinned units are closed too: call after serving stopped. */
  async close(): Promise<void> {
    this.#closed = true
    await this.flush()
    this.#files.closeAll()
  }

  // ------------------------------------------------------------------ internals

  #persistIndex(entry: Entry): Promise<void> {
    return persistIndex(this.#dirs[entry.dirIndex]!, entry, this.health, this.#warn)
  }

  // ------------------------------------------------------------------- rebuild

  async #rebuild(dirIndex: number): Promise<void> {
    const dir = this.#dirs[dirIndex]!
    await fs.rm(dir.tmp, { recursive: true, force: true })
    await fs.mkdir(dir.tmp, { recursive: true })
    const { entries, found } = await scanCacheDir(dir.root, dirIndex, this.pageSize, {
      has: (key) => this.#idx.entries.has(key),
      dropped: (file, reason, detail) => {
        this.health.corrupt[reason]++
        this.#warn(`dropped ${file} at start-up (${reason}: ${detail}); it will be refetched from the origin on the next read`)
      }
    })
    const newest = new Map<Entry, number>()
    for (const f of found) newest.set(f.unit.entry, Math.max(newest.get(f.unit.entry) ?? 0, f.mtimeMs))
    for (const entry of entries) {
      this.#idx.entries.set(entry.key, entry)
      this.#known.note(entry, newest.get(entry) ?? 0)
    }
    found.sort((a, b) => a.mtimeMs - b.mtimeMs)
    for (const { unit } of found) this.#idx.register(unit)
    this.#idx.makeRoom(dir, 0)
    for (const e of entries) if (e.present > 0) this.#persistIndex(e)
  }
}

export { closeFd }
export type { DiskStoreOptions, FilledUnit, KnownVersion, StoreStats } from "./dirs.js"
export { readBitmap } from "./files.js"
