/**
 * The `--loops` messages cross the cluster IPC channel as JSON: every message either side can
 * build survives Schema encoding, JSON and decoding unchanged, and whatever arrives that is not
 * a message decodes to a typed error instead of throwing.
 */
import { Arbitrary, Either, Schema } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { LeaseOwner } from "../../../src/worker/loops/LeaseOwner.js"
import { counterDeltas } from "../../../src/worker/loops/OwnerClient.js"
import { Counters, LoopMessage, OwnerMessage } from "../../../src/worker/loops/protocol.js"
import { WorkerStats } from "../../../src/worker/metrics.js"
import type { DiskStore } from "../../../src/worker/store/DiskStore.js"

/** Built on this package's fast-check (effect bundles its own copy). */
const fromSchema = <A, I>(schema: Schema.Schema<A, I>): fc.Arbitrary<A> =>
  Arbitrary.makeLazy(schema)(fc as unknown as Parameters<Arbitrary.LazyArbitrary<A>>[0]) as unknown as fc.Arbitrary<A>

describe("--loops protocol over JSON IPC", () => {
  for (const [name, schema] of [
    ["loop → owner", OwnerMessage],
    ["owner → loop", LoopMessage]
  ] as const) {
    const s = schema as unknown as Schema.Schema<{ readonly _tag: string }, unknown>
    it(`${name}: every message round-trips through encode, JSON and decode (property)`, () => {
      fc.assert(
        fc.property(fromSchema(s), (msg) => {
          const wire = JSON.parse(JSON.stringify(Schema.encodeSync(s)(msg)))
          const back = Schema.decodeUnknownSync(s)(wire)
          expect(back._tag).toBe(msg._tag)
          expect({ ...back }).toEqual({ ...msg })
        }),
        { numRuns: 300 }
      )
    })

    it(`${name}: arbitrary values decode to an error, never a throw (property)`, () => {
      fc.assert(
        fc.property(fc.anything(), (junk) => {
          const r = Schema.decodeUnknownEither(s)(junk)
          // fc.anything() can build a valid message only by accident; anything else is a Left.
          expect(Either.isLeft(r) || typeof (r.right as { _tag?: unknown })._tag === "string").toBe(true)
        }),
        { numRuns: 500 }
      )
    })
  }
})

describe("--loops counters", () => {
  it("a loop's JS hits and its hit table's hits reach the owner's totals once each, the table's also as offloaded (property)", () => {
    // Steps of a loop's life: [hits answered in JS, hits answered by its table] between two reports.
    const step = fc.tuple(fc.nat(50), fc.nat(50))
    fc.assert(
      fc.property(fc.array(fc.array(step, { maxLength: 8 }), { minLength: 1, maxLength: 3 }), (loops) => {
        const ownerStats = new WorkerStats()
        // addCounters never touches the store (only lease calls do).
        const owner = new LeaseOwner(undefined as unknown as DiskStore, ownerStats, () => 0)
        let js = 0
        let table = 0
        loops.forEach((steps, i) => {
          const loop = i + 1
          owner.attach(loop, () => {})
          const stats = new WorkerStats()
          stats.offloaded = new Float64Array(2)
          const deltas = counterDeltas(stats)
          for (const [j, t] of steps) {
            stats.hits += j
            stats.bytesServed += j * 10
            stats.offloaded[0] = stats.offloaded[0]! + t
            stats.offloaded[1] = stats.offloaded[1]! + t * 10
            js += j
            table += t
            const delta = deltas()
            if (delta === undefined) continue
            // Across the IPC channel as the loop sends it.
            const msg = Schema.decodeUnknownSync(OwnerMessage)(JSON.parse(JSON.stringify(Schema.encodeSync(OwnerMessage)(new Counters({ loop, delta })))))
            owner.addCounters(loop, (msg as Counters).delta)
          }
          expect(owner.report().loops.find((l) => l.loop === loop)?.counters.tableHits).toBe(steps.reduce((a, [, t]) => a + t, 0))
        })
        expect(ownerStats.hits).toBe(js + table)
        expect(ownerStats.bytesServed).toBe((js + table) * 10)
        expect(ownerStats.offloaded?.[0] ?? 0).toBe(table)
        expect(ownerStats.offloaded?.[1] ?? 0).toBe(table * 10)
      }),
      { numRuns: 200 }
    )
  })
})

