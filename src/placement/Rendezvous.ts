import type { BlockId, NodeInfo } from "../core/ids.js"
import { hrwWorkerSeed, sharedBlockHasher as importedHasher } from "./keys.js"
import { membershipEpoch, normalizeWorkers, placementLayer, type Placement, type PlacementOptions } from "./Placement.js"

export interface RendezvousOptions extends PlacementOptions {
  /**
   * Relative capacity of a worker (default 1 for all). A worker with weight w receives a
   * share w / Σw of blocks; weight ≤ 0 or not finite drains it (it is never chosen).
   */
  readonly weight?: (node: NodeInfo) => number
}

/** Bound locally: an imported binding costs a getter call per access under vitest. */
const sharedBlockHasher = importedHasher

const TWO_53 = 9007199254740992

/** murmur3's 32-bit finalizer: full avalanche in five operations. */
const fmix = (x: number): number => {
  x ^= x >>> 16
  x = Math.imul(x, 0x85ebca6b)
  x ^= x >>> 13
  x = Math.imul(x, 0xc2b2ae35)
  return x ^ (x >>> 16)
}

/**
 * Weighted rendezvous (highest random weight) hashing, the comparison implementation beside
 * Maglev (not part of the wire contract). Each (block, worker) pair gets a uniform u in (0, 1)
 * from the block's SHA-256 and a per-worker seed; the score is `w / -ln(u)` (equal weights:
 * just `u`), highest wins, ties to the smaller id. A worker's score for a block never depends
 * on the other workers, so removing one moves only the blocks it owned. O(workers) per lookup.
 */
export class Rendezvous implements Placement {
  /** A `PlacementTable` service backed by HRW, starting from an empty membership. */
  static readonly layer = placementLayer((nodes, options) => Rendezvous.build(nodes, options))

  static build(nodes: ReadonlyArray<NodeInfo>, options: RendezvousOptions = {}): Rendezvous {
    const weightOf = options.weight
    const all = normalizeWorkers(nodes)
    const weights: Array<number> = []
    const workers: Array<NodeInfo> = []
    for (const w of all) {
      const weight = weightOf === undefined ? 1 : weightOf(w)
      if (!(weight > 0 && Number.isFinite(weight))) continue
      workers.push(w)
      weights.push(weight)
    }
    return new Rendezvous(workers, weights, options.epoch ?? membershipEpoch(workers))
  }

  readonly ids: ReadonlyArray<string>
  private readonly seed0: Int32Array
  private readonly seed1: Int32Array
  private readonly weights: Float64Array
  private readonly uniform: boolean
  private readonly topIndex: Int32Array
  private readonly topScore: Float64Array

  private constructor(
    readonly workers: ReadonlyArray<NodeInfo>,
    weights: ReadonlyArray<number>,
    readonly epoch: number
  ) {
    const n = workers.length
    this.ids = workers.map((w) => w.id)
    this.seed0 = new Int32Array(n)
    this.seed1 = new Int32Array(n)
    for (let i = 0; i < n; i++) {
      const [a, b] = hrwWorkerSeed(this.ids[i]!)
      this.seed0[i] = a
      this.seed1[i] = b
    }
    this.weights = Float64Array.from(weights)
    this.uniform = weights.every((w) => w === weights[0])
    this.topIndex = new Int32Array(n)
    this.topScore = new Float64Array(n)
  }

  private score(b0: number, b1: number, i: number): number {
    let x = b0 ^ this.seed0[i]!
    let y = b1 ^ this.seed1[i]!
    x = fmix(x ^ Math.imul(y, 0xcc9e2d51))
    y = fmix(y ^ Math.imul(x, 0x1b873593))
    const u = ((x >>> 0) * 2097152 + (y >>> 11) + 0.5) / TWO_53
    return this.uniform ? u : this.weights[i]! / -Math.log(u)
  }

  primary(block: BlockId): string | undefined {
    const n = this.ids.length
    if (n === 0) return undefined
    const h = sharedBlockHasher
    h.hash(block)
    const b0 = h.lo
    const b1 = h.lo2
    let best = 0
    let bestScore = this.score(b0, b1, 0)
    for (let i = 1; i < n; i++) {
      const s = this.score(b0, b1, i)
      if (s > bestScore) {
        bestScore = s
        best = i
      }
    }
    return this.ids[best]
  }

  rank(block: BlockId, k: number): ReadonlyArray<string> {
    const n = this.ids.length
    const target = Math.min(Math.floor(k), n)
    if (!(target > 0)) return []
    const h = sharedBlockHasher
    h.hash(block)
    const b0 = h.lo
    const b1 = h.lo2
    const idx = this.topIndex
    const top = this.topScore
    let count = 0
    // Insertion into a sorted top-`target` list; strict `>` keeps the smaller id first on ties.
    for (let i = 0; i < n; i++) {
      const s = this.score(b0, b1, i)
      if (count === target && !(s > top[count - 1]!)) continue
      let j = count < target ? count++ : count - 1
      while (j > 0 && s > top[j - 1]!) {
        top[j] = top[j - 1]!
        idx[j] = idx[j - 1]!
        j--
      }
      top[j] = s
      idx[j] = i
    }
    const out: Array<string> = new Array(count)
    for (let j = 0; j < count; j++) out[j] = this.ids[idx[j]!]!
    return out
  }
}
