/**
 * A serving loop's view of its owner's block store: the units the owner has
 * leased to this loop, each with this loop's own open fd. It answers the
 * read path exactly as the DiskStore does (lookup / pin / release /
 * missingRuns), synchronously and without IPC, so a hit in a loop costs what
 * a hit in a single-process worker costs.
 *
 * Invariants:
 * - A unit is indexed here only while its lease is held (the owner's pin keeps
 *   it indexed there, so it is never evicted or unlinked meanwhile).
 * - A lease is given back only when no response of this loop reads the unit
 *   (refs 0): on the owner's revoke, or to stay under `maxLeases` open fds.
 *   The fd is closed before the release is sent, so the owner can never
 *   unlink a file this loop could still be sending from.
 * - A unit published to the loop's hit table (HitPublisher) is unpublished the
 *   moment it stops being indexed (`onUnitGone`), before its lease goes back.
 */
import type { Grant } from "./protocol.js"
import { Entry, missingRunsOf, Unit } from "../store/entry.js"
import { closeQuietly, openFd } from "../store/fsx.js"
import type { HitSource } from "../server/HitPublisher.js"

/** A leased unit: the lease id to give back, and when this loop last served from it. */
export class LeasedUnit extends Unit {
  lease = 0
  lastUse = 0
}

export class LeaseStore implements HitSource {
  /** Told when a unit stops being servable here (the hit table unpublishes it). */
  onUnitGone: ((unit: Unit) => void) | undefined = undefined
  readonly #index = new Map<string, Entry>()
  readonly #leases = new Map<number, LeasedUnit>()
  /** Gives leases back to the owner. */
  readonly #release: (leases: ReadonlyArray<number>) => void
  readonly #maxLeases: number
  /** Bumped by every `touched()` report; a pin stamps the unit with it. */
  #epoch = 1
  #releases: Array<number> = []
  #flushQueued = false
  #closed = false

  constructor(release: (leases: ReadonlyArray<number>) => void, maxLeases: number) {
    this.#release = release
    this.#maxLeases = Math.max(1, maxLeases)
  }

  // ---------------------------------------------------------------- serve side (ReadPath's ServeStore)

  lookup(key: string): Entry | undefined {
    return this.#index.get(key)
  }

  pin(entry: Entry, first: number, end: number, out: Array<Unit>): boolean {
    const units = entry.units
    for (let i = first; i < end; i++) if (units[i] === undefined) return false
    const epoch = this.#epoch
    for (let i = first; i < end; i++) {
      const u = units[i] as LeasedUnit
      u.refs++
      u.lastUse = epoch
      out.push(u)
    }
    return true
  }

  /** Leased units always have an open fd (opened before they were indexed). */
  ensureOpen(_units: ReadonlyArray<Unit>, _from = 0): Promise<boolean> | undefined {
    return undefined
  }

  release(units: ReadonlyArray<Unit>, from = 0): void {
    for (let i = from; i < units.length; i++) {
      const u = units[i] as LeasedUnit
      u.refs--
      if (u.refs === 0 && u.gone) this.#giveBack(u)
    }
  }

  /** The hit table answered from `unit`: it counts as served for the owner's LRU. */
  touch(unit: Unit): void {
    ;(unit as LeasedUnit).lastUse = this.#epoch
  }

  missingRuns(key: string, first: number, end: number): Array<[number, number]> {
    return missingRunsOf(this.#index.get(key), first, end)
  }

  // ---------------------------------------------------------------- owner side

  /**
   * Takes the leases of a grant: opens each unit's file and indexes it. A unit
   * already held (a concurrent grant of the same unit) or whose file cannot be
   * opened is released again at once, so every lease is given back exactly once.
   */
  async admit(grant: Grant): Promise<void> {
    if (grant.units.length === 0) return
    const entry = this.#entryFor(grant)
    entry.pendingCommits++
    try {
      await Promise.all(grant.units.map(([index, lease]) => this.#admitUnit(entry, index, lease)))
    } finally {
      entry.pendingCommits--
      this.#dropIfEmpty(entry)
    }
    this.#trim()
  }

  /** The owner wants these back: no new pins from now on, the fd closes and the lease returns once unread. */
  revoke(leases: ReadonlyArray<number>): void {
    for (const id of leases) {
      const u = this.#leases.get(id)
      if (u !== undefined && !u.gone) this.#retire(u)
    }
  }

  /**
   * Leases served from since the last call (for the owner's LRU), and those a
   * response is reading right now (the owner leaves them out of revocations,
   * which could not take effect until the response ends); starts a new period.
   */
  usage(): { readonly used: Array<number>; readonly busy: Array<number> } {
    const epoch = this.#epoch++
    const used: Array<number> = []
    const busy: Array<number> = []
    for (const [id, u] of this.#leases) {
      if (u.lastUse === epoch) used.push(id)
      if (u.refs > 0) busy.push(id)
    }
    return { used, busy }
  }

  get leases(): number {
    return this.#leases.size
  }

  /** Closes every fd (the owner drops this loop's leases when it exits). */
  close(): void {
    this.#closed = true
    for (const u of this.#leases.values()) {
      this.onUnitGone?.(u)
      closeQuietly(u.fd)
    }
    this.#leases.clear()
    this.#index.clear()
  }

  // ---------------------------------------------------------------- internals

  #entryFor(grant: Grant): Entry {
    const existing = this.#index.get(grant.key)
    if (existing !== undefined) return existing
    const entry = new Entry(grant.key, grant.meta, grant.path, 0)
    this.#index.set(grant.key, entry)
    return entry
  }

  async #admitUnit(entry: Entry, index: number, lease: number): Promise<void> {
    if (entry.units[index] !== undefined || this.#closed) return this.#releaseLater(lease)
    let fd: number
    try {
      fd = await openFd(entry.unitPath(index), "r")
    } catch {
      return this.#releaseLater(lease)
    }
    if (entry.units[index] !== undefined || this.#closed) {
      closeQuietly(fd)
      return this.#releaseLater(lease)
    }
    const u = new LeasedUnit(entry, index, entry.unitBytes(index))
    u.fd = fd
    u.lease = lease
    u.lastUse = this.#epoch
    entry.units[index] = u
    entry.present++
    this.#leases.set(lease, u)
  }

  /** Unindexes a unit; its lease goes back now if unread, else on its last release. */
  #retire(u: LeasedUnit): void {
    u.gone = true
    this.onUnitGone?.(u)
    const entry = u.entry
    if (entry.units[u.index] === u) {
      entry.units[u.index] = undefined
      entry.present--
    }
    this.#dropIfEmpty(entry)
    if (u.refs === 0) this.#giveBack(u)
  }

  #giveBack(u: LeasedUnit): void {
    if (this.#leases.get(u.lease) !== u) return
    closeQuietly(u.fd)
    u.fd = -1
    this.#leases.delete(u.lease)
    this.#releaseLater(u.lease)
  }

  #dropIfEmpty(entry: Entry): void {
    if (entry.present === 0 && entry.pendingCommits === 0 && this.#index.get(entry.key) === entry) {
      this.#index.delete(entry.key)
      entry.removed = true
    }
  }

  /** Over the fd budget: give back the least recently served unread leases (down to 7/8 of it). */
  #trim(): void {
    if (this.#leases.size <= this.#maxLeases) return
    const target = this.#maxLeases - (this.#maxLeases >> 3)
    const idle = [...this.#leases.values()].filter((u) => u.refs === 0 && !u.gone).sort((a, b) => a.lastUse - b.lastUse)
    for (const u of idle) {
      if (this.#leases.size <= target) break
      this.#retire(u)
    }
  }

  /** Releases leave in one message per turn of the event loop (a revoke can free thousands). */
  #releaseLater(lease: number): void {
    if (this.#closed) return
    this.#releases.push(lease)
    if (this.#flushQueued) return
    this.#flushQueued = true
    setImmediate(() => {
      this.#flushQueued = false
      const leases = this.#releases
      this.#releases = []
      if (leases.length > 0 && !this.#closed) this.#release(leases)
    })
  }
}
