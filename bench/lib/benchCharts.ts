/**
 * What bench/bench-charts.ts does, as a function over a repository root: renders every
 * bench/data/*.json into SVG charts under docs/assets/bench/ and fills the
 * `<!-- bench-table: dataset/table -->` sections of BENCHMARKS.md, or with `check` renders to a
 * scratch dir and reports what is stale, missing or orphaned (writing nothing). Returns the exit
 * status and the lines for stdout and stderr, so tests run it without a process per call.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { basename, join, relative } from "node:path"
import { chartFile, fillTables, markdownTable, renderSvg, vegaLiteSpec } from "./charts.js"
import { type BenchData, checkBenchData } from "./chartsData.js"

export interface BenchChartsResult {
  readonly status: 0 | 1
  readonly out: ReadonlyArray<string>
  readonly err: ReadonlyArray<string>
}

export const benchCharts = async (root: string, check: boolean): Promise<BenchChartsResult> => {
  const dataDir = join(root, "bench", "data")
  const chartDir = join(root, "docs", "assets", "bench")
  const docPath = join(root, "BENCHMARKS.md")
  const show = (p: string) => relative(process.cwd(), p) || p
  const out: Array<string> = []
  const err: Array<string> = []
  const fail = (line: string): BenchChartsResult => ({ status: 1, out, err: [...err, line] })

  const files = existsSync(dataDir) ? readdirSync(dataDir).filter((f) => f.endsWith(".json")).sort() : []
  const problems: Array<string> = []
  const datasets: Array<BenchData> = []
  for (const f of files) {
    const path = join(dataDir, f)
    let parsed: unknown
    try {
      parsed = JSON.parse(readFileSync(path, "utf8"))
    } catch (e) {
      problems.push(`${show(path)}: not JSON (${e instanceof Error ? e.message : String(e)})`)
      continue
    }
    const issues = checkBenchData(parsed, basename(f, ".json"))
    if (issues.length > 0) problems.push(...issues.map((i) => `${show(path)}: ${i}`))
    else datasets.push(parsed as BenchData)
  }
  if (problems.length > 0) return fail(problems.join("\n"))

  const target = check ? mkdtempSync(join(tmpdir(), "bench-charts-")) : chartDir
  mkdirSync(target, { recursive: true })
  const rendered: Array<string> = []
  const tables = new Map<string, string>()
  try {
    for (const data of datasets) {
      for (const chart of data.charts) {
        const name = chartFile(data, chart)
        writeFileSync(join(target, name), await renderSvg(vegaLiteSpec(data, chart)))
        rendered.push(name)
      }
      for (const table of data.tables) tables.set(`${data.id}/${table.id}`, markdownTable(data, table))
    }
    const doc = existsSync(docPath) ? readFileSync(docPath, "utf8") : ""
    const filled = fillTables(doc, tables)
    if (filled.unknown.length > 0) return fail(`${show(docPath)}: bench-table markers name no table: ${filled.unknown.join(", ")}`)

    if (!check) {
      const orphans = existsSync(chartDir) ? readdirSync(chartDir).filter((f) => f.endsWith(".svg") && !rendered.includes(f)) : []
      for (const f of orphans) rmSync(join(chartDir, f))
      if (filled.text !== doc) writeFileSync(docPath, filled.text)
      out.push(`rendered ${rendered.length} chart(s) into ${show(chartDir)} and ${tables.size} table(s) into ${show(docPath)}`)
      if (orphans.length > 0) out.push(`removed orphaned ${orphans.join(", ")}`)
      return { status: 0, out, err }
    }

    const stale: Array<string> = []
    for (const name of rendered) {
      const committed = join(chartDir, name)
      if (!existsSync(committed)) stale.push(`${show(committed)} is missing`)
      else if (readFileSync(committed, "utf8") !== readFileSync(join(target, name), "utf8")) stale.push(`${show(committed)} differs`)
    }
    const orphans = existsSync(chartDir) ? readdirSync(chartDir).filter((f) => f.endsWith(".svg") && !rendered.includes(f)) : []
    for (const f of orphans) stale.push(`${show(join(chartDir, f))} has no data file`)
    if (filled.text !== doc) stale.push(`${show(docPath)} tables differ from bench/data`)
    if (stale.length > 0) return fail(`bench charts are stale (run \`just bench-charts\` and commit):\n  ${stale.join("\n  ")}`)
    out.push(`bench charts up to date (${rendered.length} chart(s), ${tables.size} table(s))`)
    return { status: 0, out, err }
  } finally {
    if (check) rmSync(target, { recursive: true, force: true })
  }
}
