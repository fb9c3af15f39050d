import { existsSync, readFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { compare, judgeTarget, medianOf, type MixedResult, pickMode } from "../../bench/mixed/verdict.js"
import { checkBenchData } from "../../bench/lib/chartsData.js"

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..")

const run = (rps: number, hitP99: number | null, hitP50: number | null = 100, cpu: number | null = 30): MixedResult => ({
  rps,
  hit_p50_us: hitP50,
  hit_p99_us: hitP99,
  miss_p50_us: 30_000,
  miss_p99_us: 90_000,
  cpu_us_per_req: cpu,
  hit_samples: 1000,
  miss_samples: 100
})

describe("mixed-bench comparisons", () => {
  it("takes multiplexed / pipelined within each round, NaN where a value is missing", () => {
    const c = compare([run(1000, 500), run(900, null)], [run(500, 5000), run(1000, 4000)])
    expect(c.rps).toEqual([2, 0.9])
    expect(c.hitP99[0]).toBe(0.1)
    expect(Number.isNaN(c.hitP99[1]!)).toBe(true)
    expect(medianOf(c.hitP99)).toBe(0.1)
    expect(medianOf([NaN])).toBeNull()
  })

  it("picks a mode only when every round agrees and the difference is outside the noise", () => {
    expect(pickMode([0.05, 0.3], [1.2, 0.97])).toBe("multiplexed")
    expect(pickMode([0.05, 0.9], [1.2, 1.2])).toBe("either")
    expect(pickMode([0.05, 0.1], [0.5, 0.6])).toBe("trade-off")
    expect(pickMode([1.0, 0.9], [0.8, 0.7])).toBe("pipelined")
    expect(pickMode([1.5, 1.3], [1.0, 1.1])).toBe("pipelined")
    expect(pickMode([0.95, 1.1], [1.02, 0.9])).toBe("either")
    expect(pickMode([NaN], [1])).toBe("either")
    expect(pickMode([], [])).toBe("either")
  })

  it("judges the issue's target on the medians: hit p99 ≤ 0.1× at rps ≥ 0.95×", () => {
    const pipelined = [run(1000, 100_000), run(1000, 120_000), run(1000, 80_000)]
    const met = judgeTarget(compare([run(1000, 5000), run(990, 6000), run(1100, 9000)], pipelined), 0.1, 16)
    expect(met.met).toBe(true)
    expect(met.text).toContain(": met")
    const slow = judgeTarget(compare([run(800, 5000), run(800, 6000), run(800, 7000)], pipelined), 0.1, 16)
    expect(slow.met).toBe(false)
    expect(slow.text).toContain("rps ratio 0.800 < 0.95")
    const late = judgeTarget(compare([run(1000, 50_000), run(1000, 60_000), run(1000, 40_000)], pipelined), 0.1, 16)
    expect(late.met).toBe(false)
    expect(late.text).toContain("hit p99 ratio 0.500 > 0.1")
    expect(judgeTarget(undefined, 0.1, 16).text).toContain("not measured")
  })
})

describe("bench/data/mixed.json", () => {
  const path = join(repoRoot, "bench/data/mixed.json")
  it.skipIf(!existsSync(path))("is a bench data file with its mode, both serve modes per case, hits and misses apart, and the target judged", () => {
    const d = JSON.parse(readFileSync(path, "utf8"))
    expect(checkBenchData(d, "mixed")).toEqual([])
    expect(["quick", "full"]).toContain(d.params.mode)
    expect(typeof d.params.target_met).toBe("boolean")
    expect(d.params.target).toMatch(/^at 10 % misses, depth 16: .*: (met|not met)|not measured/)
    const cases = new Set(d.summary.map((r: { case: string }) => r.case))
    for (const c of cases) {
      expect(d.summary.filter((r: { case: string }) => r.case === c).map((r: { arm: string }) => r.arm).sort()).toEqual(["multiplexed", "pipelined"])
    }
    for (const r of d.runs) {
      if (r.miss_share > 0) expect(r.miss_samples).toBeGreaterThan(0)
      else expect(r.miss_samples).toBe(0)
    }
    for (const r of d.ratios) expect(["multiplexed", "pipelined", "trade-off", "either"]).toContain(r.pick)
  })
})
