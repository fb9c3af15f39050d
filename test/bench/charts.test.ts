import { spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { fillTables, markdownTable, normaliseSvg, renderSvg, vegaLiteSpec } from "../../bench/lib/charts.js"
import { benchCharts } from "../../bench/lib/benchCharts.js"
import { type BenchData, BENCH_DATA_SCHEMA, checkBenchData, medianBarChart, ratioTable, tableColumns } from "../../bench/lib/chartsData.js"

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..")

const sample: BenchData = {
  schema: BENCH_DATA_SCHEMA,
  id: "sample",
  title: "sample",
  measures: "nothing real",
  caveats: [],
  command: "none",
  date: "2026-01-01",
  machine: { name: "test box", cpu: "x", cores: 2, memory_gib: 1, kernel: "k", node: "v20" },
  params: {},
  runs: [
    { round: 1, arm: "a", rps: 100 },
    { round: 1, arm: "b", rps: 90 },
    { round: 2, arm: "b", rps: 95 },
    { round: 2, arm: "a", rps: 110 }
  ],
  summary: [
    { arm: "a", metric: "rps", median: 105, min: 100, max: 110 },
    { arm: "b", metric: "rps", median: 92.5, min: 90, max: 95 }
  ],
  ratios: [{ arm: "b", baseline: "a", metric: "rps", median: 0.88, per_round: "0.9 0.864" }],
  charts: [
    { id: "rps", title: "rps per round", data: "runs", mark: "bar", x: { field: "round", title: "round" }, y: { field: "rps", title: "req/s" }, color: "arm" },
    { ...medianBarChart({ id: "median", title: "median rps", yTitle: "req/s", filter: { metric: "rps" } }), rule: { y: 100, label: "target" } }
  ],
  tables: [
    {
      id: "summary",
      title: "Medians",
      data: "summary",
      columns: [
        { field: "arm", title: "arm" },
        { field: "median", title: "median", digits: 1 }
      ]
    }
  ]
}

const scratch: Array<string> = []
afterAll(() => {
  for (const d of scratch) rmSync(d, { recursive: true, force: true })
})

describe("charts", () => {
  it("renders the same bytes twice, with ids renumbered from c1", async () => {
    const a = await renderSvg(vegaLiteSpec(sample, sample.charts[0]!))
    const b = await renderSvg(vegaLiteSpec(sample, sample.charts[1]!))
    const a2 = await renderSvg(vegaLiteSpec(sample, sample.charts[0]!))
    expect(a2).toBe(a)
    expect(a.startsWith("<svg")).toBe(true)
    expect(a).toContain("rps per round")
    expect(a).toContain("test box · 2026-01-01")
    expect(b).toContain("target")
    for (const svg of [a, b]) {
      const ids = [...svg.matchAll(/\bid="([^"]+)"/g)].map((m) => m[1])
      expect(ids).toEqual(ids.map((_, i) => `c${i + 1}`))
    }
  })

  it("renumbers ids and their references", () => {
    expect(normaliseSvg('<g id="clip7"><path clip-path="url(#clip7)"/></g><g id="x"/>')).toBe(
      '<g id="c1"><path clip-path="url(#c1)"/></g><g id="c2"/>\n'
    )
  })

  it("fills marked table sections and reports unknown markers", () => {
    const doc = "intro\n<!-- bench-table: sample/summary -->\nold\n<!-- /bench-table -->\nmid\n<!-- bench-table: nope/x -->\n<!-- /bench-table -->\n"
    const tables = new Map([["sample/summary", markdownTable(sample, sample.tables[0]!)]])
    const { text, unknown } = fillTables(doc, tables)
    expect(unknown).toEqual(["nope/x"])
    expect(text).toContain("| arm | median |\n|---|--:|\n| a | 105.0 |\n| b | 92.5 |")
    expect(text).toContain("(test box; 2026-01-01; `none`)")
    expect(text).not.toContain("old")
    expect(fillTables(text, tables).text).toBe(text)
  })

  it("builds table columns in the order given, with a number format only when asked", () => {
    expect(tableColumns({ conns: "conns", p99_us: "p99 µs" })).toEqual([
      { field: "conns", title: "conns" },
      { field: "p99_us", title: "p99 µs" }
    ])
    expect(tableColumns({ rps_ratio: "rps" }, 2)).toEqual([{ field: "rps_ratio", title: "rps", digits: 2 }])
    expect(ratioTable({ title: "r", lead: { arm: "client" }, medianTitle: "median ratio" }).columns.map((c) => [c.field, c.title, c.digits])).toEqual([
      ["arm", "client", undefined],
      ["median", "median ratio", 3],
      ["min", "min", 3],
      ["max", "max", 3],
      ["per_round", "per round", undefined]
    ])
  })

  it("checks the data file shape", () => {
    expect(checkBenchData(sample, "sample")).toEqual([])
    expect(checkBenchData({ ...sample, schema: 9 }, "sample")[0]).toContain("schema")
    expect(checkBenchData(sample, "other")[0]).toContain("file name stem")
  })

  it("bench-charts --check passes on fresh output and fails on a stale, missing or orphaned chart", async () => {
    const root = mkdtempSync(join(tmpdir(), "bench-charts-test-"))
    scratch.push(root)
    mkdirSync(join(root, "bench", "data"), { recursive: true })
    writeFileSync(join(root, "bench", "data", "sample.json"), JSON.stringify(sample))
    writeFileSync(join(root, "BENCHMARKS.md"), "# b\n<!-- bench-table: sample/summary -->\n<!-- /bench-table -->\n")
    // The script itself once (its exit status and stderr); every other step calls what it runs,
    // in this process: a process per step would load tsx and vega each time.
    const script = (...args: Array<string>) =>
      new Promise<{ status: number | null; stderr: string }>((done) => {
        const child = spawn(process.execPath, ["--import", "tsx", join(repoRoot, "bench", "bench-charts.ts"), ...args], {
          cwd: repoRoot,
          env: { ...process.env, TALON_BENCH_ROOT: root }
        })
        let stderr = ""
        child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
        child.on("exit", (status) => done({ status, stderr }))
      })
    const run = async (...args: Array<string>) => {
      const r = await benchCharts(root, args.includes("--check"))
      return { status: r.status, stderr: r.err.join("\n") }
    }
    const charts = join(root, "docs", "assets", "bench")

    const first = await script("--check")
    expect(first.status).toBe(1) // nothing rendered yet
    expect(first.stderr).toContain("sample-rps.svg is missing")
    const write = await run()
    expect(write.stderr).toBe("")
    expect(write.status).toBe(0)
    expect(readdirSync(charts).sort()).toEqual(["sample-median.svg", "sample-rps.svg"])
    expect(readFileSync(join(root, "BENCHMARKS.md"), "utf8")).toContain("| a | 105.0 |")
    const before = readFileSync(join(charts, "sample-rps.svg"), "utf8")
    expect((await run()).status).toBe(0)
    expect(readFileSync(join(charts, "sample-rps.svg"), "utf8")).toBe(before) // byte-reproducible
    expect((await run("--check")).status).toBe(0)

    writeFileSync(join(charts, "sample-rps.svg"), before.replace("rps per round", "rps per ROUND"))
    const stale = await run("--check")
    expect(stale.status).toBe(1)
    expect(stale.stderr).toContain("sample-rps.svg differs")
    expect(readFileSync(join(charts, "sample-rps.svg"), "utf8")).toContain("ROUND") // --check writes nothing

    rmSync(join(charts, "sample-rps.svg"))
    writeFileSync(join(charts, "old.svg"), "<svg/>")
    const missing = await run("--check")
    expect(missing.stderr).toContain("sample-rps.svg is missing")
    expect(missing.stderr).toContain("old.svg has no data file")
  }, 180_000)
})
