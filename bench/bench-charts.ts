/**
 * Renders every bench/data/*.json into SVG charts under docs/assets/bench/ and
 * fills the `<!-- bench-table: dataset/table -->` sections of BENCHMARKS.md.
 *
 *   npx tsx bench/bench-charts.ts            write charts and tables
 *   npx tsx bench/bench-charts.ts --check    render to a scratch dir; exit 1 when a
 *                                              committed chart or table is stale, missing
 *                                              or orphaned (nothing is written)
 *
 * TALON_BENCH_ROOT overrides the repository root (tests use a temp copy).
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { basename, dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { chartFile, fillTables, markdownTable, renderSvg, vegaLiteSpec } from "./lib/charts.js"
import { type BenchData, checkBenchData } from "./lib/chartsData.js"

const root = resolve(process.env.TALON_BENCH_ROOT ?? join(dirname(fileURLToPath(import.meta.url)), ".."))
const dataDir = join(root, "bench", "data")
const chartDir = join(root, "docs", "assets", "bench")
const docPath = join(root, "BENCHMARKS.md")
const check = process.argv.includes("--check")
const show = (p: string) => relative(process.cwd(), p) || p

const loadAll = (): ReadonlyArray<BenchData> => {
  const files = existsSync(dataDir) ? readdirSync(dataDir).filter((f) => f.endsWith(".json")).sort() : []
  const problems: Array<string> = []
  const out: Array<BenchData> = []
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
    else out.push(parsed as BenchData)
  }
  if (problems.length > 0) {
    console.error(problems.join("\n"))
    process.exit(1)
  }
  return out
}

const main = async () => {
  const datasets = loadAll()
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
    if (filled.unknown.length > 0) {
      console.error(`${show(docPath)}: bench-table markers name no table: ${filled.unknown.join(", ")}`)
      process.exit(1)
    }

    if (!check) {
      const orphans = existsSync(chartDir) ? readdirSync(chartDir).filter((f) => f.endsWith(".svg") && !rendered.includes(f)) : []
      for (const f of orphans) rmSync(join(chartDir, f))
      if (filled.text !== doc) writeFileSync(docPath, filled.text)
      console.log(`rendered ${rendered.length} chart(s) into ${show(chartDir)} and ${tables.size} table(s) into ${show(docPath)}`)
      if (orphans.length > 0) console.log(`removed orphaned ${orphans.join(", ")}`)
      return
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
    if (stale.length > 0) {
      console.error(`bench charts are stale (run \`just bench-charts\` and commit):\n  ${stale.join("\n  ")}`)
      process.exit(1)
    }
    console.log(`bench charts up to date (${rendered.length} chart(s), ${tables.size} table(s))`)
  } finally {
    if (check) rmSync(target, { recursive: true, force: true })
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? (e.stack ?? e.message) : String(e))
  process.exit(1)
})
