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
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { benchCharts } from "./lib/benchCharts.js"

const root = resolve(process.env.TALON_BENCH_ROOT ?? join(dirname(fileURLToPath(import.meta.url)), ".."))

benchCharts(root, process.argv.includes("--check")).then(
  (r) => {
    for (const line of r.out) console.log(line)
    for (const line of r.err) console.error(line)
    process.exitCode = r.status
  },
  (e: unknown) => {
    console.error(e instanceof Error ? (e.stack ?? e.message) : String(e))
    process.exitCode = 1
  }
)
