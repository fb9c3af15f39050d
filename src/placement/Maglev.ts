import type { BlockId, NodeInfo } from "../core/ids.js"
import { sharedBlockHasher as importedHasher, workerPermutation } from "./keys.js"
import { membershipEpoch, normalizeWorkers, placementLayer, type Placement, type PlacementOptions } from "./Placement.js"

/** Bound locally: an imported binding costs a getter call per access under vitest. */
const sharedBlockHasher = importedHasher

const MIN_TABLE_SIZE = 4096
const SLOTS_PER_WORKER = 64
/** Keeps `mask` below 2^31 so slot arithmetic stays in int32 (Talon caps at u32::MAX workers). */
const MAX_WORKERS = 1 << 24

const nextPowerOfTwo = (n: number): number => {
  let size = 1
  while (size < n) size *= 2
  return size
}

/**
 * Talon-compatible Maglev table (docs/architecture.md "Placement", steps 1–6). Building costs one
 * permutation per worker plus the fill, paid when membership changes; a primary lookup is
 * one block hash and one array access, independent of fleet size.
 */
export class Maglev implements Placement {
  /** A `PlacementTable` service backed by Maglev, starting from an empty membership. */
  static readonly layer = placementLayer((nodes, options) => Maglev.build(nodes, options))

  static build(nodes: ReadonlyArray<NodeInfo>, options: PlacementOptions = {}): Maglev {
    const workers = normalizeWorkers(nodes)
    return new Maglev(workers, options.epoch ?? membershipEpoch(workers))
  }

  readonly ids: ReadonlyArray<string>
  /** Table size: next power of two ≥ max(4096, 64 × workers); 0 without workers. */
  readonly size: number
  private readonly mask: number
  /** Slot → index into `ids`. */
  private readonly slots: Int32Array
  /** Per-worker "already ranked" marks for `rank`, compared against `generation`. */
  private readonly seen: Uint32Array
  private generation = 0

  private constructor(readonly workers: ReadonlyArray<NodeInfo>, readonly epoch: number) {
    const n = workers.length
    if (n > MAX_WORKERS) throw new RangeError(`Maglev placement supports at most ${MAX_WORKERS} workers, got ${n}`)
    this.ids = workers.map((w) => w.id)
    this.seen = new Uint32Array(n)
    if (n === 0) {
      this.size = 0
      this.mask = 0
      this.slots = new Int32Array(0)
      return
    }
    const size = nextPowerOfTwo(Math.max(MIN_TABLE_SIZE, SLOTS_PER_WORKER * n))
    const mask = size - 1
    const next = new Int32Array(n)
    const skip = new Int32Array(n)
    for (let i = 0; i < n; i++) {
      const p = workerPermutation(this.ids[i]!, mask)
      next[i] = p.offset
      skip[i] = p.skip
    }
    // Round-robin: each worker claims its next free candidate. `next` holds the worker's
    // candidate (offset + j × skip) & mask, advanced by addition (the same thing mod 2^k).
    const slots = new Int32Array(size).fill(-1)
    let filled = 0
    fill: for (;;) {
      for (let i = 0; i < n; i++) {
        const s = skip[i]!
        let c = next[i]!
        while (slots[c] !== -1) c = (c + s) & mask
        slots[c] = i
        next[i] = (c + s) & mask
        if (++filled === size) break fill
      }
    }
    this.size = size
    this.mask = mask
    this.slots = slots
  }

  primary(block: BlockId): string | undefined {
    if (this.size === 0) return undefined
    const h = sharedBlockHasher
    h.hash(block)
    return this.ids[this.slots[h.lo & this.mask]!]
  }

  /** Index into `ids`/`workers` of the primary, or -1 without workers. */
  primaryIndex(block: BlockId): number {
    if (this.size === 0) return -1
    const h = sharedBlockHasher
    h.hash(block)
    return this.slots[h.lo & this.mask]!
  }

  rank(block: BlockId, k: number): ReadonlyArray<string> {
    const target = Math.min(Math.floor(k), this.ids.length)
    if (!(target > 0)) return []
    const h = sharedBlockHasher
    h.hash(block)
    const mask = this.mask
    const step = (h.hi | 1) & mask
    let slot = h.lo & mask
    if (++this.generation === 0x1_0000_0000) {
      this.seen.fill(0)
      this.generation = 1
    }
    const gen = this.generation
    const seen = this.seen
    const out: Array<string> = []
    // step is odd, so `size` probes visit every slot and therefore every worker.
    for (let i = 0; i < this.size; i++) {
      const w = this.slots[slot]!
      if (seen[w] !== gen) {
        seen[w] = gen
        out.push(this.ids[w]!)
        if (out.length === target) break
      }
      slot = (slot + step) & mask
    }
    return out
  }

  /** The worker id owning table slot `slot` (for ownership and disruption analysis). */
  ownerOfSlot(slot: number): string | undefined {
    const w = this.slots[slot]
    return w === undefined ? undefined : this.ids[w]
  }

  /** How many table slots each worker owns, indexed like `ids` (balance checks, metrics). */
  slotCounts(): Uint32Array {
    const counts = new Uint32Array(this.ids.length)
    for (let i = 0; i < this.slots.length; i++) counts[this.slots[i]!]!++
    return counts
  }
}
