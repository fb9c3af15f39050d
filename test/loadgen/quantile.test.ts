/** The one quantile definition (nearest rank) and its agreement with loadgen's HdrHistogram percentiles. */
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { latencySummary, LinearRecorder } from "../../src/loadgen/histogram.js"
import { median, nearestRank, quantile, spread } from "../../src/loadgen/quantile.js"

const sample = fc.array(fc.double({ min: -1e9, max: 1e9, noNaN: true }), { minLength: 1, maxLength: 200 })
const q = fc.double({ min: 0, max: 1, noNaN: true })
const asc = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)

describe("quantile (nearest rank)", () => {
  it("is a measured value with at least ⌈q·n⌉ values at or below it and the rest at or above", () =>
    fc.assert(
      fc.property(sample, q, (xs, p) => {
        const s = asc(xs)
        const v = quantile(s, p)
        expect(s).toContain(v)
        const k = nearestRank(s.length, p)
        expect(s.filter((x) => x <= v).length).toBeGreaterThanOrEqual(k)
        expect(s.filter((x) => x < v).length).toBeLessThan(k)
      })
    ))

  it("grows with q, from the minimum at 0 to the maximum at 1", () =>
    fc.assert(
      fc.property(sample, q, q, (xs, a, b) => {
        const s = asc(xs)
        expect(quantile(s, Math.min(a, b))).toBeLessThanOrEqual(quantile(s, Math.max(a, b)))
        expect(quantile(s, 0)).toBe(s[0])
        expect(quantile(s, 1)).toBe(s[s.length - 1])
      })
    ))

  it("takes the exact rank where q·n is an integer, despite floating point (0.1 × 30)", () => {
    const s = Array.from({ length: 30 }, (_, i) => i + 1)
    expect(quantile(s, 0.1)).toBe(3)
    expect(median([4, 1, 3, 2])).toBe(2)
    expect(median([5, 1, 3])).toBe(3)
    expect(quantile([], 0.5)).toBeNaN()
    expect(spread([3, NaN, 1, Infinity, 2])).toEqual({ n: 3, median: 2, min: 1, max: 3, q1: 1, q3: 3 })
  })

  it("agrees with loadgen's HdrHistogram percentiles wherever the histogram is exact (< 2048 µs)", () =>
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 2047 }), { minLength: 1, maxLength: 500 }), (xs) => {
        const rec = new LinearRecorder()
        for (const x of xs) rec.record(x)
        const h = latencySummary(rec.toHistogram())
        const s = asc(xs)
        expect(h).toEqual({
          p50_us: quantile(s, 0.5),
          p90_us: quantile(s, 0.9),
          p99_us: quantile(s, 0.99),
          p999_us: quantile(s, 0.999),
          max_us: quantile(s, 1)
        })
      }),
      { numRuns: 60 }
    ))
})
