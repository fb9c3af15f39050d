/**
 * Messages between the index owner (the cluster primary) and its serving
 * loops (cluster children), over Node's IPC channel (JSON). Every message
 * carries `talon: 1` so it can never be mistaken for cluster's own traffic.
 *
 * A *lease* is one pin the owner holds on a committed unit (page or whole
 * block) on behalf of one loop. Every grant is a new lease with a new id and
 * is matched by exactly one `release` of that id; leases are never merged, so
 * a release racing a new grant of the same unit can never drop a pin that is
 * still needed.
 */
import type { BlockId, ObjectId } from "../../core/ids.js"
import type { BlockMeta } from "../store/layout.js"

/** Child-side counters a loop reports to the owner as deltas (the owner's /metrics shows the sums). */
export const LOOP_COUNTERS = [
  "hits",
  "misses",
  "errors",
  "bytesServed",
  "pings",
  "connectionsOpen",
  "connectionsTotal",
  "connectionsDropped"
] as const
export type LoopCounter = (typeof LOOP_COUNTERS)[number]
export type CounterDelta = Partial<Record<LoopCounter, number>>

/** What a loop may hold: the block's directory and meta, and one lease per granted unit. */
export interface Grant {
  readonly key: string
  readonly meta: BlockMeta
  /** The block directory (unit files are `meta`-derived names inside it). */
  readonly path: string
  /** `[unit index, lease id]` for every unit pinned for the loop. */
  readonly units: ReadonlyArray<readonly [number, number]>
}

export type ToOwner =
  /** `fresh`: ask the origin now rather than answer from the cached version (a pinned read's check). */
  | { readonly talon: 1; readonly t: "stat"; readonly id: number; readonly object: ObjectId; readonly fresh?: boolean }
  | {
      readonly talon: 1
      readonly t: "fill"
      readonly id: number
      readonly block: BlockId
      readonly blockLength: number
      readonly objectSize: number
      readonly first: number
      readonly end: number
    }
  | { readonly talon: 1; readonly t: "release"; readonly leases: ReadonlyArray<number> }
  /** Leases served from since the last report (the owner refreshes their LRU position), and those being read now. */
  | { readonly talon: 1; readonly t: "usage"; readonly used: ReadonlyArray<number>; readonly busy: ReadonlyArray<number> }
  | { readonly talon: 1; readonly t: "counters"; readonly delta: CounterDelta }

export interface Failure {
  readonly ok: false
  readonly reason: string
  readonly staleVersion?: boolean
  /** The typed error class (DataErrorCode), when the failure has one. */
  readonly code?: number
}

export type ToLoop =
  | ({ readonly talon: 1; readonly t: "stat"; readonly id: number } & (
      | { readonly ok: true; readonly size: number; readonly version: string; readonly expiresAt: number }
      | Failure
    ))
  | ({ readonly talon: 1; readonly t: "fill"; readonly id: number } & ({ readonly ok: true; readonly grant: Grant | null } | Failure))
  /** Give these leases back as soon as no response is reading them (the owner needs the room). */
  | { readonly talon: 1; readonly t: "revoke"; readonly leases: ReadonlyArray<number> }
  | { readonly talon: 1; readonly t: "ready"; readonly ready: boolean; readonly registered: boolean; readonly detail: string }

export const isToOwner = (m: unknown): m is ToOwner =>
  typeof m === "object" && m !== null && (m as { talon?: unknown }).talon === 1 && typeof (m as { t?: unknown }).t === "string"

export const isToLoop = isToOwner as unknown as (m: unknown) => m is ToLoop

/** The env var carrying a loop's settings (JSON) from the primary to its children. */
export const LOOP_SETTINGS_ENV = "TALON_WORKER_LOOP_SETTINGS"
/** The env var carrying a loop's index (1-based), for logs. */
export const LOOP_INDEX_ENV = "TALON_WORKER_LOOP_INDEX"
