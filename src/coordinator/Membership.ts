/**
 * The coordinator's view of the fleet: who registered, when each node last
 * heartbeated, and the placement epoch.
 *
 * Liveness: a node is healthy while `now - lastHeartbeat <= window`. Every read
 * first sweeps at `now`, so a query can never see a node past its window even if
 * the periodic sweeper has not run yet. An expired node is forgotten entirely; its
 * next heartbeat is refused ("register again"), which is also how workers notice
 * a restarted coordinator.
 *
 * Epoch: a monotonic counter that advances by exactly one each time the healthy
 * membership changes (a node joins, expires, or re-registers with a different
 * address or role) and at no other time. It starts from a base (default: the
 * wall clock in ms at start) so a restarted coordinator does not reuse epochs a
 * client may have cached from its predecessor.
 *
 * Plain synchronous TypeScript; the Coordinator service serialises access.
 */
import type { NodeInfo } from "../core/ids.js"

export interface MemberState {
  readonly info: NodeInfo
  readonly registeredAt: number
  readonly lastHeartbeat: number
  readonly blockCount: number
}

export interface MembershipCounters {
  registrations: number
  heartbeats: number
  rejectedHeartbeats: number
  expirations: number
}

export class MembershipTable {
  private readonly members = new Map<string, MemberState>()
  private epochValue: number
  readonly counters: MembershipCounters = { registrations: 0, heartbeats: 0, rejectedHeartbeats: 0, expirations: 0 }

  constructor(
    readonly windowMs: number,
    epochBase: number
  ) {
    this.epochValue = epochBase
  }

  get epoch(): number {
    return this.epochValue
  }

  /** Whether a registration from `id` would add a member (swept at `now` first). */
  isNew(id: string, now: number): boolean {
    this.sweep(now)
    return !this.members.has(id)
  }

  /** Members currently held, healthy or not yet swept. */
  get size(): number {
    return this.members.size
  }

  /** Registers (or re-registers) a node. Returns whether the healthy membership changed. */
  register(info: NodeInfo, now: number): boolean {
    this.sweep(now)
    this.counters.registrations++
    const previous = this.members.get(info.id)
    this.members.set(info.id, {
      info: { id: info.id, address: info.address, role: info.role },
      registeredAt: previous?.registeredAt ?? now,
      lastHeartbeat: now,
      blockCount: previous?.blockCount ?? 0
    })
    const changed =
      previous === undefined || previous.info.address !== info.address || previous.info.role !== info.role
    if (changed) this.epochValue++
    return changed
  }

  /** Refreshes a registered node's liveness. False when the node is unknown (never registered or expired). */
  heartbeat(id: string, blockCount: number, now: number): boolean {
    this.sweep(now)
    const current = this.members.get(id)
    if (current === undefined) {
      this.counters.rejectedHeartbeats++
      return false
    }
    this.counters.heartbeats++
    this.members.set(id, { ...current, lastHeartbeat: now, blockCount })
    return true
  }

  /** Drops nodes whose last heartbeat is older than the window. Returns the ids dropped. */
  sweep(now: number): ReadonlyArray<string> {
    const dropped: Array<string> = []
    for (const [id, state] of this.members) {
      if (now - state.lastHeartbeat > this.windowMs) {
        this.members.delete(id)
        dropped.push(id)
      }
    }
    if (dropped.length > 0) {
      this.counters.expirations += dropped.length
      this.epochValue++
    }
    return dropped
  }

  /** Healthy members at `now`, sorted by id (a stable order for replies and placement). */
  healthy(now: number): ReadonlyArray<MemberState> {
    this.sweep(now)
    return [...this.members.values()].sort((a, b) => (a.info.id < b.info.id ? -1 : a.info.id > b.info.id ? 1 : 0))
  }
}
