import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import {
  areaOf,
  areaOfFile,
  batchedName,
  compare,
  formatNs,
  mergeArea,
  naturalCompare,
  parseBenchArgs,
  parseBenchName,
  renderMarkdown,
  resultsFromVitestJson,
  scope
} from "../../bench/lib/compare.js"

describe("bench names", () => {
  it("round-trips batched names and leaves plain ones alone", () => {
    expect(parseBenchName(batchedName("locate/256", 64))).toEqual({ name: "locate/256", batch: 64 })
    expect(parseBenchName("table_build/8")).toEqual({ name: "table_build/8", batch: 1 })
    expect(batchedName("x", 1)).toBe("x")
    expect(parseBenchName("weird (×0)")).toEqual({ name: "weird (×0)", batch: 1 })
  })

  it("derives areas from files and keys", () => {
    expect(areaOfFile("/work/main/bench/placement.bench.ts")).toBe("placement")
    expect(areaOfFile("bench\\core.bench.mts")).toBe("core")
    expect(areaOf("protocol::decode_frames")).toBe("protocol")
    expect(areaOf("nameless")).toBeUndefined()
  })

  it("natural order puts /8 before /64 before /256", () => {
    const keys = ["placement::locate/256", "placement::locate/8", "core::x", "placement::locate/64", "placement::locate_hrw/8"]
    expect([...keys].sort(naturalCompare)).toEqual([
      "core::x",
      "placement::locate/8",
      "placement::locate/64",
      "placement::locate/256",
      "placement::locate_hrw/8"
    ])
  })

  it("natural order is a total order consistent with equality", () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom("a", "b", "/", "0", "1", "9", "_") }), fc.string({ unit: fc.constantFrom("a", "/", "0", "1", "9") }), (a, b) => {
        expect(Math.sign(naturalCompare(a, b)) + Math.sign(naturalCompare(b, a))).toBe(0)
        expect(naturalCompare(a, b) === 0).toBe(a === b)
      })
    )
  })
})

describe("resultsFromVitestJson", () => {
  // The shape vitest 3.2 writes with --outputJson (times in milliseconds).
  const report = {
    files: [
      {
        filepath: "/repo/bench/placement.bench.ts",
        groups: [
          {
            fullName: "bench/placement.bench.ts",
            benchmarks: [
              { id: "1", name: "locate/256 (×64)", median: 0.0512, mean: 0.06 },
              { id: "2", name: "table_build/8", median: 0.184 },
              { id: "3", name: "broken", median: null }
            ]
          }
        ]
      },
      { filepath: "/repo/bench/core.bench.ts", groups: [{ fullName: "x", benchmarks: [{ name: "core::explicit", median: 0.000123456 }] }] },
      { filepath: "/repo/bench/empty.bench.ts", groups: [] }
    ]
  }

  it("keys by area::name, converts ms to ns per call, divides batches, sorts", () => {
    const { results, skipped } = resultsFromVitestJson(report)
    expect(results).toEqual({ "core::explicit": 123, "placement::locate/256": 800, "placement::table_build/8": 184000 })
    expect(Object.keys(results)).toEqual(["core::explicit", "placement::locate/256", "placement::table_build/8"])
    expect(skipped).toEqual(["placement::broken"])
  })

  it("never throws on malformed input", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(() => resultsFromVitestJson(v)).not.toThrow()
        expect(() => resultsFromVitestJson({ files: [v] })).not.toThrow()
        expect(() => resultsFromVitestJson({ files: [{ filepath: "a.bench.ts", groups: [v] }] })).not.toThrow()
      })
    )
  })
})

describe("compare", () => {
  const baseline = { "core::a": 100, "core::b": 100, "core::c": 100, "core::gone": 5, "placement::x/8": 1000 }
  const current = { "core::a": 109, "core::b": 111, "core::c": 80, "core::fresh": 7, "placement::x/8": 1000 }

  it("flags only slowdowns beyond the threshold; reports new, missing and faster", () => {
    const c = compare(baseline, current, 0.1)
    expect(c.regressions).toBe(1)
    expect(Object.fromEntries(c.rows.map((r) => [r.name, r.verdict]))).toEqual({
      "core::a": "ok",
      "core::b": "regression",
      "core::c": "faster",
      "core::fresh": "new",
      "core::gone": "missing",
      "placement::x/8": "ok"
    })
    expect(c.rows.find((r) => r.name === "core::b")!.delta).toBeCloseTo(0.11)
  })

  it("threshold is respected exactly at the edge and can be widened", () => {
    expect(compare({ k: 100 }, { k: 110 }, 0.1).regressions).toBe(0)
    expect(compare(baseline, current, 0.2).regressions).toBe(0)
    expect(compare({ k: 0 }, { k: 1 }, 0.1).regressions).toBe(1)
  })

  it("renders the markdown table with every row", () => {
    const md = renderMarkdown(compare(baseline, current, 0.1))
    const lines = md.split("\n")
    expect(lines[0]).toBe("| benchmark | baseline | current | Δ | verdict |")
    expect(lines).toContain("| core::b | 100 ns | 111 ns | +11.0% | **REGRESSION** |")
    expect(lines).toContain("| core::c | 100 ns | 80 ns | -20.0% | faster |")
    expect(lines).toContain("| core::fresh | — | 7 ns | — | new (no baseline) |")
    expect(lines).toContain("| core::gone | 5 ns | — | — | missing (not run) |")
    expect(md).toContain("6 benchmarks: 1 regressed beyond 10%, 1 faster, 1 new, 1 missing.")
  })

  it("scopes to one area and merges a partial run into the rest", () => {
    expect(Object.keys(scope(current, "placement"))).toEqual(["placement::x/8"])
    expect(scope(current, undefined)).toBe(current)
    expect(mergeArea(baseline, { "placement::x/8": 1, "placement::y": 2 }, "placement")).toEqual({
      "core::a": 100,
      "core::b": 100,
      "core::c": 100,
      "core::gone": 5,
      "placement::x/8": 1,
      "placement::y": 2
    })
  })

  it("formats durations in the right unit", () => {
    expect([formatNs(812), formatNs(14_200), formatNs(1_710_000), formatNs(undefined)]).toEqual(["812 ns", "14.2 µs", "1.71 ms", "—"])
  })
})

describe("parseBenchArgs", () => {
  it("parses the three commands with their options", () => {
    expect(parseBenchArgs(["run"])).toEqual({ _tag: "run", area: undefined })
    expect(parseBenchArgs(["run", "-p", "core"])).toEqual({ _tag: "run", area: "core" })
    expect(parseBenchArgs(["save", "main"])).toEqual({ _tag: "save", name: "main" })
    expect(parseBenchArgs(["check"])).toEqual({ _tag: "check", area: undefined, threshold: 0.1, soft: false, baseline: "main" })
    expect(parseBenchArgs(["check", "-p", "placement", "--threshold", "25", "--soft", "--baseline=pr-12"])).toEqual({
      _tag: "check",
      area: "placement",
      threshold: 0.25,
      soft: true,
      baseline: "pr-12"
    })
    expect(parseBenchArgs(["check", "--threshold=5%"])).toMatchObject({ threshold: 0.05 })
  })

  it("rejects bad input with a message, never throws", () => {
    for (const argv of [[], ["frobnicate"], ["save"], ["save", "../etc/passwd"], ["check", "--threshold", "-3"], ["check", "--threshold"], ["check", "--nope"], ["run", "-p"], ["check", "extra"]]) {
      const r = parseBenchArgs(argv)
      expect(r._tag, argv.join(" ")).toBe("error")
      if (r._tag === "error") expect(r.message).toContain("usage: bench.ts")
    }
    fc.assert(fc.property(fc.array(fc.string()), (argv) => void parseBenchArgs(argv)))
  })
})
