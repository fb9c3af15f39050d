/**
 * The index owner's side of `--loops N`: one process (the cluster primary)
 * owns the cache dir — its DiskStore index, LRU, eviction and every fill —
 * and lends committed units to its serving loops.
 *
 * Why one owner rather than N processes sharing the directory: two
 * independent indexes over one directory could both fill a page (two origin
 * GETs, two renames) and one could evict (unlink) a page the other is
 * sending. With a single owner, fills are single-flight across all loops for
 * free (the owner's fill scheduler), and eviction obeys the owner's pins, which now
 * include one pin per lease. The price is one IPC round trip the first time a
 * loop serves a unit; after that the loop serves it with no IPC at all.
 *
 * Capacity: a leased unit is pinned, so it cannot be evicted. Before a fill
 * (and once a second) the owner checks whether the cache dir will fit: when
 * the unpinned bytes cannot make the room, it revokes the leases served least
 * recently, skipping those a response is reading (loops report every second
 * which leases they served, refreshing the owner's LRU, and which are busy).
 * A loop gives a revoked lease back as soon as no response reads it, and only
 * then can the owner's eviction unlink the file.
 */
import type { BlockId } from "../../core/ids.js"
import type { WorkerStats } from "../metrics.js"
import type { DiskStore } from "../store/DiskStore.js"
import type { Unit } from "../store/entry.js"
import { blockKey } from "../store/layout.js"
import { type CounterDelta, type Fill, type Grant, LOOP_COUNTERS } from "./protocol.js"

interface Lease {
  readonly id: number
  readonly loop: number
  readonly unit: Unit
  /** Last time the loop served from it (grant, or a usage report). */
  touched: number
  /** A response of the loop was reading it at the loop's last usage report. */
  busy: boolean
  /** When it was revoked (0 = not revoked). */
  revokedAt: number
}

/**
 * A revoked, not busy lease normally comes back within one IPC round trip; after this it no
 * longer counts as coming and is revoked again (a revoke can overtake the grant it revokes).
 */
const REVOKE_PENDING_MS = 1000

export interface LoopReport {
  readonly loop: number
  readonly leases: number
  /** The counters this loop reported (sums of its deltas); `tableHits`: of its hits, those its native hit table answered. */
  readonly counters: Readonly<Record<(typeof LOOP_COUNTERS)[number] | "tableHits", number>>
}

/**
 * The lease table the owner actor (OwnerActor.ts) keeps as its state: every method is
 * synchronous and called from the actor's fiber only.
 */
export class LeaseOwner {
  readonly #store: DiskStore
  readonly #stats: WorkerStats
  readonly #now: () => number
  readonly #leases = new Map<number, Lease>()
  readonly #byLoop = new Map<number, Set<number>>()
  readonly #revokers = new Map<number, (leases: ReadonlyArray<number>) => void>()
  readonly #counters = new Map<number, Record<string, number>>()
  #nextLease = 1

  /** `now`: the primary's Clock in ms (for least-recently-served order). */
  constructor(store: DiskStore, stats: WorkerStats, now: () => number) {
    this.#store = store
    this.#stats = stats
    this.#now = now
  }

  /** A loop (re)joined: how to tell it to give leases back. */
  attach(loop: number, revoke: (leases: ReadonlyArray<number>) => void): void {
    this.#revokers.set(loop, revoke)
    if (!this.#byLoop.has(loop)) this.#byLoop.set(loop, new Set())
    if (!this.#counters.has(loop)) this.#counters.set(loop, Object.fromEntries([...LOOP_COUNTERS, "tableHits"].map((k) => [k, 0])))
  }

  /** A loop exited: its pins go (its fds closed with it) and its open connections are gone. */
  detach(loop: number): void {
    this.#revokers.delete(loop)
    const ids = this.#byLoop.get(loop)
    if (ids !== undefined) for (const id of [...ids]) this.#drop(id, loop)
    const c = this.#counters.get(loop)
    if (c !== undefined && c["connectionsOpen"]! > 0) {
      this.#stats.connectionsOpen -= c["connectionsOpen"]!
      c["connectionsOpen"] = 0
    }
  }

  /** The loop is attached (a fill that ends after its loop exited must not lease it anything). */
  attached(loop: number): boolean {
    return this.#revokers.has(loop)
  }

  release(loop: number, leases: ReadonlyArray<number>): void {
    for (const id of leases) this.#drop(id, loop)
  }

  /** Adds a loop's counter deltas to its report and to the owner's counters. */
  addCounters(loop: number, delta: CounterDelta): void {
    const c = this.#counters.get(loop)
    if (c === undefined) return
    const th = delta.tableHits ?? 0
    const tb = delta.tableBytes ?? 0
    if (th > 0 || tb > 0) {
      c["tableHits"] = c["tableHits"]! + th
      // The loop's hits and bytes already include what its table answered: moving those into
      // `offloaded` must leave the owner's totals where they were before the loop's deltas add.
      const hits = this.#stats.hits
      const bytes = this.#stats.bytesServed
      const off = (this.#stats.offloaded ??= new Float64Array(2))
      off[0] = off[0]! + th
      off[1] = off[1]! + tb
      this.#stats.hits = hits
      this.#stats.bytesServed = bytes
    }
    const stats = this.#stats as unknown as Record<string, number>
    for (const k of LOOP_COUNTERS) {
      const d = delta[k]
      if (typeof d !== "number" || !Number.isFinite(d)) continue
      c[k] = c[k]! + d
      stats[k] = stats[k]! + d
    }
  }

  /** Leases outstanding (all loops), how many were last reported busy or are revoked, and what each loop reported. */
  report(): { readonly leases: number; readonly busy: number; readonly revoked: number; readonly loops: ReadonlyArray<LoopReport> } {
    let busy = 0
    let revoked = 0
    for (const l of this.#leases.values()) {
      if (l.busy) busy++
      if (l.revokedAt > 0) revoked++
    }
    return {
      leases: this.#leases.size,
      busy,
      revoked,
      loops: [...this.#counters.entries()].map(([loop, c]) => ({
        loop,
        leases: this.#byLoop.get(loop)?.size ?? 0,
        counters: { ...c } as LoopReport["counters"]
      }))
    }
  }

  /**
   * Makes sure `extra` more bytes will fit cache dir `dir` (every dir when
   * undefined, with extra 0): when the unpinned bytes cannot make the room,
   * revokes leases, a unit's leases together, least recently served first —
   * those no response is reading before those being read (a busy lease comes
   * back only when its response ends, so it is the last resort, but revoking
   * it is always safe).
   */
  enforceCapacity(dir?: number, extra = 0): void {
    const dirs = this.#store.stats().perDir
    const now = this.#now()
    for (let d = 0; d < dirs.length; d++) {
      if (dir !== undefined && d !== dir) continue
      const resident = dirs[d]!.residentBytes
      const need = resident + (dir === undefined ? 0 : extra) - dirs[d]!.capacity
      if (need <= 0) continue
      const byUnit = new Map<Unit, Array<Lease>>()
      for (const l of this.#leases.values()) {
        if (l.unit.entry.dirIndex !== d) continue
        const list = byUnit.get(l.unit)
        if (list === undefined) byUnit.set(l.unit, [l])
        else list.push(l)
      }
      let pinned = 0
      let coming = 0
      const candidates: Array<{ unit: Unit; leases: Array<Lease>; busy: boolean; newest: number }> = []
      for (const [unit, leases] of byUnit) {
        pinned += unit.bytes
        let busy = false
        let revocable = false
        let newest = 0
        for (const l of leases) {
          if (l.busy) busy = true
          if (l.revokedAt === 0 || now - l.revokedAt >= REVOKE_PENDING_MS) revocable = true
          newest = Math.max(newest, l.touched)
        }
        if (revocable) candidates.push({ unit, leases, busy, newest })
        else if (!busy) coming += unit.bytes
      }
      // Leases are the only long-lived pins in the owner (fills pin nothing), so the rest is evictable.
      let toFree = need - (resident - pinned) - coming
      if (toFree <= 0) continue
      candidates.sort((a, b) => (a.busy === b.busy ? a.newest - b.newest : a.busy ? 1 : -1))
      const revoke = new Map<number, Array<number>>()
      for (const c of candidates) {
        if (toFree <= 0) break
        toFree -= c.unit.bytes
        for (const l of c.leases) {
          if (l.revokedAt !== 0 && now - l.revokedAt < REVOKE_PENDING_MS) continue
          l.revokedAt = now
          const list = revoke.get(l.loop)
          if (list === undefined) revoke.set(l.loop, [l.id])
          else list.push(l.id)
        }
      }
      for (const [loop, leases] of revoke) this.#revokers.get(loop)?.(leases)
    }
  }

  /** Leases the present units of `[first, end)` to `loop` (after a fill), then checks capacity. */
  lease(loop: number, block: BlockId, first: number, end: number): Grant | null {
    if (!this.#revokers.has(loop)) return null
    const grant = this.#grant(loop, block, first, end)
    this.enforceCapacity()
    return grant
  }

  // ------------------------------------------------------------------ internals

  /** Pins each present unit of `[first, end)` once for `loop`; units evicted since the fill are left out. */
  #grant(loop: number, block: BlockId, first: number, end: number): Grant | null {
    const key = blockKey(block)
    const entry = this.#store.lookup(key)
    if (entry === undefined) return null
    const units: Array<readonly [number, number]> = []
    const pinned: Array<Unit> = []
    const now = this.#now()
    const mine = this.#byLoop.get(loop)!
    for (let i = first; i < end; i++) {
      pinned.length = 0
      if (!this.#store.pin(entry, i, i + 1, pinned)) continue
      const id = this.#nextLease++
      this.#leases.set(id, { id, loop, unit: pinned[0]!, touched: now, busy: false, revokedAt: 0 })
      mine.add(id)
      units.push([i, id])
    }
    return units.length === 0 ? null : { key, meta: entry.meta, path: entry.path, units }
  }

  #drop(id: number, loop: number): void {
    const l = this.#leases.get(id)
    if (l === undefined || l.loop !== loop) return
    this.#leases.delete(id)
    this.#byLoop.get(loop)?.delete(id)
    this.#store.release([l.unit])
  }

  /** Revocations ahead of a fill, so its commit finds room instead of evicting the unit it just wrote. */
  makeRoomFor(m: Fill): void {
    const key = blockKey(m.block)
    const ps = this.#store.pageSize
    let extra = 0
    for (const [s, e] of this.#store.missingRuns(key, m.first, m.end)) {
      for (let i = s; i < e; i++) extra += ps > 0 ? Math.min(ps, m.blockLength - i * ps) : m.blockLength
    }
    if (extra > 0) this.enforceCapacity(this.#store.dirFor(key), extra)
  }

  /** What a loop served from (refresh their place in the owner's LRU: a pin and release is a touch) and is reading now. */
  usage(loop: number, used: ReadonlyArray<number>, busy: ReadonlyArray<number>): void {
    const now = this.#now()
    const scratch: Array<Unit> = []
    for (const id of used) {
      const l = this.#leases.get(id)
      if (l === undefined || l.loop !== loop) continue
      l.touched = now
      scratch.length = 0
      if (this.#store.pin(l.unit.entry, l.unit.index, l.unit.index + 1, scratch)) this.#store.release(scratch)
    }
    // Each report is a full snapshot of what the loop is reading.
    const reading = new Set(busy)
    for (const id of this.#byLoop.get(loop) ?? []) {
      const l = this.#leases.get(id)
      if (l !== undefined) l.busy = reading.has(id)
    }
  }
}
