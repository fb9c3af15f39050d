/**
 * Property: the registry's view lays its own accepted writes over the store's
 * followed view only until the store has caught up with them, and where both
 * hold a record for a node the one Talon's ordering rule prefers is served.
 */
import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { mergeView, pendingWrites, revisionNumber, type LocalWrite } from "../../src/coordinator/registry/view.js"
import type { FollowedMembership } from "../../src/coordinator/state/MembershipView.js"
import { rejectReason, type StoredNode } from "../../src/coordinator/state/record.js"
import { worker } from "./state/support.js"

const record = fc
  .record({ id: fc.constantFrom("a", "b", "c"), inc: fc.constantFrom("i1", "i2"), started: fc.integer({ min: 0, max: 3 }), seq: fc.integer({ min: 0, max: 5 }) })
  .map(({ id, inc, started, seq }): StoredNode => ({
    status: { ...worker("c", id, inc, seq), startedAtUnixMs: started, reportedAtUnixMs: started + seq },
    updatedAtUnixMs: 1_000
  }))

const byId = (nodes: ReadonlyArray<StoredNode>) => new Map(nodes.map((n) => [n.status.node.id, n]))

describe("registry view", () => {
  it("property: local writes count until the followed revision reaches them; the preferred record wins", () => {
    const arbitraries = [
      fc.array(record, { maxLength: 4 }),
      fc.array(fc.tuple(record, fc.integer({ min: 1, max: 20 })), { maxLength: 4 }),
      fc.integer({ min: 0, max: 20 })
    ] as const
    fc.assert(fc.property(...arbitraries, (followedNodes, writes, seen) => {
      const followed: FollowedMembership = {
        ready: true,
        revision: `memory:${seen}`,
        nodes: byId(followedNodes),
        placement: [],
        epoch: 0n,
        error: undefined
      }
      const local = new Map<string, LocalWrite>(writes.map(([node, revision]) => [node.status.node.id, { node, revision }]))
      const pending = pendingWrites(followed, local)
      for (const [id, w] of local) expect(pending.has(id)).toBe(w.revision > seen)
      const view = mergeView(followed, pending, 1_000, 10_000)
      const ids = new Set([...followed.nodes.keys(), ...pending.keys()])
      expect(view.nodes.map((n) => n.status.node.id)).toEqual([...ids].sort())
      for (const n of view.nodes) {
        const id = n.status.node.id
        const f = followed.nodes.get(id)
        const p = pending.get(id)?.node
        // The served record is one of the two, and neither source holds one the rule prefers over it.
        expect([f?.status, p?.status]).toContain(n.status)
        for (const other of [f, p]) if (other !== undefined && other.status !== n.status) expect(rejectReason(n.status, other.status)).not.toBeNull()
      }
    }), { numRuns: 300 })
    expect(revisionNumber("etcd:42")).toBe(42)
    expect(revisionNumber(undefined)).toBeNaN()
  })
})
