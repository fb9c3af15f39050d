import { Context, Effect, Ref } from "effect"
import { NodeRole, type BlockId, type NodeInfo } from "../core/ids.js"
import { membershipToken } from "./keys.js"

/**
 * Which worker owns a block, computed locally by every client from the membership list
 * (the coordinator is not on the per-request path). Implementations are plain classes so
 * the hot path is a method call; `PlacementTable` is the service that holds the current one.
 */
export interface Placement {
  /** The primary worker's id, or undefined when there are no workers. */
  primary(block: BlockId): string | undefined
  /** Up to `k` distinct worker ids, primary first; `min(k, workers.length)` of them. */
  rank(block: BlockId, k: number): ReadonlyArray<string>
  /**
   * Identifies the membership this placement was built from. Either the coordinator's
   * epoch (passed at build) or, by default, derived from the membership (see `membershipEpoch`).
   */
  readonly epoch: number
  /** Workers placement chooses from: role Worker only, sorted by id (UTF-8 bytes), ids unique. */
  readonly workers: ReadonlyArray<NodeInfo>
}

export interface PlacementOptions {
  /** Use this epoch (e.g. the coordinator's) instead of the membership-derived one. */
  readonly epoch?: number
}

const utf8 = (s: string): Buffer => Buffer.from(s, "utf8")

/**
 * DESIGN.md step 1: keep workers only, sort by id, drop duplicate ids. Ids sort by their
 * UTF-8 bytes as Talon (Rust) does, not by UTF-16 code units as `Array.sort` would: the two
 * orders differ for characters above U+FFFF, and the sorted position decides the Maglev fill.
 * Among duplicate ids the lowest address wins, so the result never depends on input order.
 */
export const normalizeWorkers = (nodes: ReadonlyArray<NodeInfo>): ReadonlyArray<NodeInfo> => {
  const keyed = nodes
    .filter((n) => n.role === NodeRole.Worker)
    .map((node) => ({ node, id: utf8(node.id), address: utf8(node.address) }))
  keyed.sort((x, y) => Buffer.compare(x.id, y.id) || Buffer.compare(x.address, y.address))
  const out: Array<NodeInfo> = []
  let last: Buffer | undefined
  for (const k of keyed) {
    if (last !== undefined && last.equals(k.id)) continue
    out.push(k.node)
    last = k.id
  }
  return out
}

/**
 * The default epoch: the top 53 bits of Talon's `cache_membership_epoch` token (SHA-256 over
 * the sorted workers' ids and addresses), at least 1, and 0 for an empty membership. The same
 * workers give the same epoch in every client; any id or address change gives a new one.
 * Computed over the normalized (deduplicated) list, so it equals Talon's token >> 11 whenever
 * the input has no duplicate ids.
 */
export const membershipEpoch = (workers: ReadonlyArray<NodeInfo>): number => {
  if (workers.length === 0) return 0
  const token = membershipToken(workers)
  return Math.max(1, Number(token >> 11n))
}

/** Holds the placement for the current membership; swapped whole when membership changes. */
export class PlacementTable extends Context.Tag("talon/placement/PlacementTable")<
  PlacementTable,
  {
    /** The placement now in force (a plain object: call `primary`/`rank` on it directly). */
    readonly current: Effect.Effect<Placement>
    /** Rebuild from a membership snapshot and make it current. */
    readonly update: (nodes: ReadonlyArray<NodeInfo>, options?: PlacementOptions) => Effect.Effect<Placement>
  }
>() {}

export type PlacementBuilder = (nodes: ReadonlyArray<NodeInfo>, options?: PlacementOptions) => Placement

/** A `PlacementTable` that starts from `initial` (empty by default) and builds with `build`. */
export const makePlacementTable = (
  build: PlacementBuilder,
  initial: ReadonlyArray<NodeInfo> = []
): Effect.Effect<Context.Tag.Service<PlacementTable>> =>
  Effect.gen(function* () {
    const ref = yield* Ref.make(build(initial))
    return {
      current: Ref.get(ref),
      update: (nodes, options) =>
        Effect.sync(() => build(nodes, options)).pipe(Effect.tap((p) => Ref.set(ref, p)))
    }
  })
