import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { PresentBitmap } from "../../src/core/index.js"

type Op = { op: "set" | "clear"; i: number } | { op: "setAll" } | { op: "clearAll" }

const naiveRuns = (model: ReadonlyArray<boolean>, start: number, end: number): Array<[number, number]> => {
  const runs: Array<[number, number]> = []
  for (let i = Math.max(0, start); i < Math.min(end, model.length); i++) {
    if (model[i]) continue
    const last = runs[runs.length - 1]
    if (last && last[1] === i) last[1] = i + 1
    else runs.push([i, i + 1])
  }
  return runs
}

describe("PresentBitmap", () => {
  it("sets, clears and ignores out-of-range pages", () => {
    const b = new PresentBitmap(70)
    b.set(0)
    b.set(69)
    b.set(70)
    b.set(-1)
    expect(b.isPresent(0)).toBe(true)
    expect(b.isPresent(69)).toBe(true)
    expect(b.isPresent(70)).toBe(false)
    expect(b.count()).toBe(2)
    b.clear(0)
    expect(b.count()).toBe(1)
    b.setAll()
    expect(b.count()).toBe(70)
    expect(b.rangePresent(0, 70)).toBe(true)
    expect(b.rangePresent(0, 71)).toBe(false)
    expect(b.rangePresent(5, 5)).toBe(true)
    expect(b.missingRuns()).toEqual([])
    b.clear(31)
    b.clear(32)
    b.clear(64)
    expect(b.missingRuns()).toEqual([[31, 33], [64, 65]])
    expect(b.missingRuns(32, 64)).toEqual([[32, 33]])
    expect(new PresentBitmap(0).rangePresent(0, 0)).toBe(true)
    expect(new PresentBitmap(0).missingRuns()).toEqual([])
  })

  it("agrees with a boolean-array model (property)", () => {
    const arb = fc.integer({ min: 0, max: 200 }).chain((size) =>
      fc.tuple(
        fc.constant(size),
        fc.array(
          fc.oneof(
            { weight: 8, arbitrary: fc.record({ op: fc.constantFrom("set" as const, "clear" as const), i: fc.integer({ min: -2, max: size + 2 }) }) },
            { weight: 1, arbitrary: fc.constant({ op: "setAll" as const }) },
            { weight: 1, arbitrary: fc.constant({ op: "clearAll" as const }) }
          ) as fc.Arbitrary<Op>,
          { maxLength: 120 }
        ),
        fc.integer({ min: -2, max: size + 2 }),
        fc.integer({ min: -2, max: size + 2 })
      )
    )
    fc.assert(
      fc.property(arb, ([size, ops, a, b]) => {
        const bm = new PresentBitmap(size)
        const model = new Array<boolean>(size).fill(false)
        for (const o of ops) {
          if (o.op === "set") { bm.set(o.i); if (o.i >= 0 && o.i < size) model[o.i] = true }
          else if (o.op === "clear") { bm.clear(o.i); if (o.i >= 0 && o.i < size) model[o.i] = false }
          else if (o.op === "setAll") { bm.setAll(); model.fill(true) }
          else { bm.clearAll(); model.fill(false) }
        }
        for (let i = -1; i <= size; i++) expect(bm.isPresent(i)).toBe(i >= 0 && i < size && model[i])
        expect(bm.count()).toBe(model.filter(Boolean).length)
        const [s, e] = a <= b ? [a, b] : [b, a]
        const expectRange = s >= e ? true : s < 0 || e > size ? false : model.slice(s, e).every(Boolean)
        expect(bm.rangePresent(s, e)).toBe(expectRange)
        expect(bm.missingRuns(s, e)).toEqual(naiveRuns(model, s, e))
        expect(bm.missingRuns()).toEqual(naiveRuns(model, 0, size))
        const back = PresentBitmap.fromBytes(bm.toBytes())
        expect(back?.size).toBe(size)
        expect(Array.from(back!.words)).toEqual(Array.from(bm.words))
      }),
      { numRuns: 300 }
    )
  })

  it("rejects malformed persisted bytes", () => {
    expect(PresentBitmap.fromBytes(new Uint8Array([1, 0]))).toBeUndefined()
    expect(PresentBitmap.fromBytes(new Uint8Array([33, 0, 0, 0, 0, 0, 0, 0]))).toBeUndefined()
    // a bit set beyond the page count
    expect(PresentBitmap.fromBytes(new Uint8Array([1, 0, 0, 0, 2, 0, 0, 0]))).toBeUndefined()
    expect(PresentBitmap.fromBytes(new Uint8Array([1, 0, 0, 0, 1, 0, 0, 0]))?.isPresent(0)).toBe(true)
  })
})
