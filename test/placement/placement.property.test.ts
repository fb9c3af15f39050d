import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { Backend, NodeRole, type BlockId, type NodeInfo } from "../../src/core/ids.js"
import { Maglev, Rendezvous, type Placement } from "../../src/placement/index.js"

const nodeArb: fc.Arbitrary<NodeInfo> = fc.record({
  id: fc.string({ minLength: 1, maxLength: 12, unit: "grapheme" }),
  address: fc.constantFrom("10.0.0.1:7001", "10.0.0.2:7001", "[::1]:7001"),
  role: fc.constantFrom(NodeRole.Worker, NodeRole.Worker, NodeRole.Worker, NodeRole.Coordinator)
})

const blockArb: fc.Arbitrary<BlockId> = fc.record({
  object: fc.record({
    backend: fc.constantFrom(Backend.S3, Backend.Gcs, Backend.Azure),
    bucket: fc.string({ minLength: 1, maxLength: 20 }),
    objectPath: fc.string({ minLength: 1, maxLength: 120, unit: "binary" })
  }),
  offset: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
  blockSize: fc.integer({ min: 1, max: 0xffff_ffff }),
  version: fc.string({ maxLength: 40 })
})

/** n workers with distinct, arbitrary ids. */
const workersArb = (min: number, max: number): fc.Arbitrary<ReadonlyArray<NodeInfo>> =>
  fc
    .uniqueArray(fc.string({ minLength: 1, maxLength: 16 }), { minLength: min, maxLength: max })
    .map((ids) => ids.map((id) => ({ id, address: `${id}:7001`, role: NodeRole.Worker })))

const builders: ReadonlyArray<[string, (nodes: ReadonlyArray<NodeInfo>) => Placement]> = [
  ["Maglev", (nodes) => Maglev.build(nodes)],
  ["Rendezvous", (nodes) => Rendezvous.build(nodes)]
]

const sampleBlocks = (count: number, salt: string): ReadonlyArray<BlockId> =>
  Array.from({ length: count }, (_, i) => ({
    object: { backend: Backend.S3, bucket: "bucket", objectPath: `${salt}/part-${i}` },
    offset: i * 1024,
    blockSize: 1024,
    version: "v1"
  }))

for (const [name, build] of builders) {
  describe(`${name} placement properties`, () => {
    it("is deterministic regardless of input order and duplicates", () => {
      fc.assert(
        fc.property(fc.array(nodeArb, { maxLength: 24 }), fc.array(blockArb, { minLength: 1, maxLength: 5 }), fc.infiniteStream(fc.nat()), (nodes, blocks, rnd) => {
          const it = rnd[Symbol.iterator]()
          const shuffled = [...nodes, ...nodes.filter(() => it.next().value % 3 === 0)]
            .map((n) => ({ n, key: it.next().value }))
            .sort((a, b) => a.key - b.key)
            .map(({ n }) => n)
          const a = build(nodes)
          const b = build(shuffled)
          expect(b.workers.map((w) => w.id)).toEqual(a.workers.map((w) => w.id))
          expect(b.epoch).toBe(a.epoch)
          for (const block of blocks) {
            expect(b.primary(block)).toBe(a.primary(block))
            expect(b.rank(block, 4)).toEqual(a.rank(block, 4))
          }
        }),
        { numRuns: 60 }
      )
    })

    it("keeps only workers, unique, sorted by UTF-8 bytes; never returns a coordinator", () => {
      fc.assert(
        fc.property(fc.array(nodeArb, { maxLength: 24 }), blockArb, (nodes, block) => {
          const p = build(nodes)
          const ids = p.workers.map((w) => w.id)
          const expected = [...new Set(nodes.filter((n) => n.role === NodeRole.Worker).map((n) => n.id))].sort((x, y) =>
            Buffer.compare(Buffer.from(x), Buffer.from(y))
          )
          expect(ids).toEqual(expected)
          const primary = p.primary(block)
          if (ids.length === 0) expect(primary).toBeUndefined()
          else expect(ids).toContain(primary)
        }),
        { numRuns: 100 }
      )
    })

    it("rank returns min(k, n) distinct workers, primary first", () => {
      fc.assert(
        fc.property(workersArb(0, 40), blockArb, fc.integer({ min: 0, max: 50 }), (nodes, block, k) => {
          const p = build(nodes)
          const ranked = p.rank(block, k)
          expect(ranked.length).toBe(Math.min(k, nodes.length))
          expect(new Set(ranked).size).toBe(ranked.length)
          for (const id of ranked) expect(p.workers.map((w) => w.id)).toContain(id)
          if (ranked.length > 0) expect(ranked[0]).toBe(p.primary(block))
          // A shorter ranking is a prefix of a longer one.
          expect(p.rank(block, Math.max(0, k - 1))).toEqual(ranked.slice(0, Math.max(0, k - 1)))
        }),
        { numRuns: 100 }
      )
    })
  })
}

describe("Maglev balance", () => {
  it("every worker owns between 0.9/n and 1.1/n of the slots (n = 1..64 and beyond)", () => {
    fc.assert(
      fc.property(workersArb(1, 64), (nodes) => {
        const table = Maglev.build(nodes)
        const n = table.workers.length
        for (const owned of table.slotCounts()) {
          expect(owned / table.size).toBeGreaterThanOrEqual(0.9 / n)
          expect(owned / table.size).toBeLessThanOrEqual(1.1 / n)
        }
      }),
      { numRuns: 80 }
    )
    for (const n of [1, 2, 3, 7, 64, 65, 100, 256, 300]) {
      const table = Maglev.build(Array.from({ length: n }, (_, i) => ({ id: `worker-${i}`, address: "", role: NodeRole.Worker })))
      const counts = Array.from(table.slotCounts())
      // Round-robin fill: shares differ by at most one slot.
      expect(Math.max(...counts) - Math.min(...counts), `n=${n}`).toBeLessThanOrEqual(1)
      expect(counts.reduce((a, b) => a + b, 0)).toBe(table.size)
    }
  })

  it("table size is the next power of two >= max(4096, 64n)", () => {
    const size = (n: number) => Maglev.build(Array.from({ length: n }, (_, i) => ({ id: `w${i}`, address: "", role: NodeRole.Worker }))).size
    expect([0, 1, 64, 65, 128, 129, 256].map(size)).toEqual([0, 4096, 4096, 8192, 8192, 16384, 16384])
  })
})

/*
 * Disruption when one worker leaves. Maglev trades minimal disruption for O(1) lookups: the
 * survivors re-fill the table round-robin, so a few slots change hands between workers that
 * stayed. Measured (slot-exact, 3000 random memberships of 2..64 workers with the same table
 * size): mean 1.9%, 99.6% of cases under 4%. Small memberships have a heavy tail, so no bound
 * holds per case: 6000 random memberships each of 3, 4 and 5 workers gave p99 2.1-3.0%, p99.9
 * 8.5-15% and a worst case of 51% (3 workers; fast-check once found 10.5%). The assertion is
 * on the mean over the sampled memberships: at most 4%. When removal shrinks the table (65 → 64, 129 → 128
 * workers) every block's slot changes and about half of them move — pinned below, since it is
 * part of the Talon-compatible layout. HRW moves none.
 */
const fractionMovedOffVictim = (before: Maglev, after: Maglev, victim: string): number => {
  let moved = 0
  let notOn = 0
  for (let s = 0; s < before.size; s++) {
    const owner = before.ownerOfSlot(s)
    if (owner === victim) continue
    notOn++
    if (after.ownerOfSlot(s) !== owner) moved++
  }
  return moved / notOn
}

describe("removing one worker", () => {
  it("Maglev moves few of the blocks that were not on it: at most 4% on average (same table size)", () => {
    const fractions: Array<number> = []
    fc.assert(
      fc.property(workersArb(2, 64), fc.nat(), (nodes, pick) => {
        const victim = nodes[pick % nodes.length]!
        const before = Maglev.build(nodes)
        const after = Maglev.build(nodes.filter((n) => n !== victim))
        expect(after.size).toBe(before.size)
        // Slot-exact: blocks hash uniformly onto slots, so this is the expected block fraction.
        fractions.push(fractionMovedOffVictim(before, after, victim.id))
        // And on real blocks: every block not on the victim that moved landed on a survivor.
        for (const block of sampleBlocks(50, victim.id)) {
          const was = before.primary(block)
          const now = after.primary(block)
          expect(now).not.toBe(victim.id)
          if (was === victim.id) expect(after.workers.map((w) => w.id)).toContain(now)
        }
      }),
      { numRuns: 60 }
    )
    expect(fractions.reduce((a, b) => a + b, 0) / fractions.length).toBeLessThanOrEqual(0.04)
  })

  it("Maglev reshuffles about half the blocks when removal shrinks the table (65 -> 64 workers)", () => {
    const nodes = Array.from({ length: 65 }, (_, i) => ({ id: `worker-${i}`, address: "", role: NodeRole.Worker }))
    const before = Maglev.build(nodes)
    const after = Maglev.build(nodes.slice(1))
    expect([before.size, after.size]).toEqual([8192, 4096])
    const blocks = sampleBlocks(4000, "shrink")
    const notOn = blocks.filter((b) => before.primary(b) !== "worker-0")
    const moved = notOn.filter((b) => after.primary(b) !== before.primary(b)).length / notOn.length
    expect(moved).toBeGreaterThan(0.3)
    expect(moved).toBeLessThan(0.7)
  })

  it("HRW moves none of the blocks that were not on it", () => {
    fc.assert(
      fc.property(workersArb(2, 64), fc.nat(), fc.array(blockArb, { minLength: 20, maxLength: 60 }), (nodes, pick, blocks) => {
        const victim = nodes[pick % nodes.length]!
        const before = Rendezvous.build(nodes)
        const after = Rendezvous.build(nodes.filter((n) => n !== victim))
        for (const block of blocks) {
          const was = before.primary(block)
          if (was !== victim.id) expect(after.primary(block)).toBe(was)
          // The whole ranking survives too, minus the victim.
          expect(after.rank(block, 3)).toEqual(before.rank(block, 4).filter((id) => id !== victim.id).slice(0, 3))
        }
      }),
      { numRuns: 60 }
    )
  })
})

describe("weighted HRW", () => {
  it("splits blocks in proportion to weight, and weight 0 drains a worker", () => {
    const nodes = ["a", "b", "c", "d", "e"].map((id) => ({ id, address: "", role: NodeRole.Worker }))
    const weights: Record<string, number> = { a: 1, b: 1, c: 2, d: 4, e: 0 }
    const p = Rendezvous.build(nodes, { weight: (n) => weights[n.id]! })
    expect(p.workers.map((w) => w.id)).toEqual(["a", "b", "c", "d"])
    const blocks = sampleBlocks(16000, "weighted")
    const counts: Record<string, number> = {}
    for (const b of blocks) {
      const id = p.primary(b)!
      counts[id] = (counts[id] ?? 0) + 1
    }
    // Expected shares 1/8, 1/8, 2/8, 4/8; ±10% relative is > 4 standard deviations here.
    for (const [id, w] of Object.entries({ a: 1, b: 1, c: 2, d: 4 })) {
      expect(counts[id]! / blocks.length).toBeGreaterThan((w / 8) * 0.9)
      expect(counts[id]! / blocks.length).toBeLessThan((w / 8) * 1.1)
    }
    expect(counts["e"]).toBeUndefined()
  })

  it("equal weights spread blocks evenly", () => {
    const n = 16
    const p = Rendezvous.build(Array.from({ length: n }, (_, i) => ({ id: `w${i}`, address: "", role: NodeRole.Worker })))
    const counts = new Map<string, number>()
    for (const b of sampleBlocks(16000, "even")) counts.set(p.primary(b)!, (counts.get(p.primary(b)!) ?? 0) + 1)
    expect(counts.size).toBe(n)
    // 1000 expected per worker, sd ≈ 31: ±15% is ~5 sd.
    for (const c of counts.values()) expect(Math.abs(c - 1000)).toBeLessThan(150)
  })
})
