import { Context, Effect, Layer, Ref } from "effect"
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

/**
 * Orders strings by code point, which is the order of their UTF-8 bytes. Plain `<` compares
 * UTF-16 units and puts a surrogate pair (U+10000 and up) before U+E000–U+FFFF.
 */
export const compareUtf8 = (a: string, b: string): number => {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i)
    let y = b.charCodeAt(i)
    if (x === y) continue
    if (x >= 0xd800 && y >= 0xd800) {
      // Surrogates (0xD800–0xDFFF) rank above 0xE000–0xFFFF in code point order.
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000
    }
    return x - y
  }
  return a.length - b.length
}

/** A lone surrogate has no UTF-8 form; Buffer encodes it as U+FFFD, and so do we. */
const LONE_SURROGATE = /\p{Cs}/u
const wireForm = (s: string): string => (LONE_SURROGATE.test(s) ? Buffer.from(s, "utf8").toString("utf8") : s)

/**
 * Placement step 1 (docs/architecture.md): keep workers only, sort by id, drop duplicate ids. Ids sort by their
 * UTF-8 bytes as Talon (Rust) does, not by UTF-16 code units as `Array.sort` would: the two
 * orders differ for characters above U+FFFF, and the sorted position decides the Maglev fill.
 * Among duplicate ids the lowest address wins, so the result never depends on input order.
 */
export const normalizeWorkers = (nodes: ReadonlyArray<NodeInfo>): ReadonlyArray<NodeInfo> => {
  const keyed: Array<{ node: NodeInfo; id: string; address: string }> = []
  for (const node of nodes) {
    if (node.role === NodeRole.Worker) keyed.push({ node, id: wireForm(node.id), address: wireForm(node.address) })
  }
  keyed.sort((x, y) => compareUtf8(x.id, y.id) || compareUtf8(x.address, y.address))
  const out: Array<NodeInfo> = []
  let last: string | undefined
  for (const k of keyed) {
    if (k.id === last) continue
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

/** The `PlacementTable` service of one placement scheme, starting from an empty membership. */
export const placementLayer = (build: PlacementBuilder): Layer.Layer<PlacementTable> =>
  Layer.effect(PlacementTable, makePlacementTable(build))
