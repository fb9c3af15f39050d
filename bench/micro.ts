/**
 * Microbenchmark harness (`just bench`, `just bench-save NAME`, `just bench-check`).
 *
 *   run [-p AREA]      vitest bench → bench/results/latest.json  { "area::name[/arg]": median_ns }
 *                      (-p runs only bench/AREA.bench.ts and replaces that area's keys)
 *   save NAME          bench/results/latest.json → bench/baselines/NAME.json
 *   check [-p AREA] [--threshold PCT] [--soft] [--baseline NAME]
 *                      markdown table against bench/baselines/NAME.json (default main);
 *                      exit 1 on a regression beyond PCT (default 10), 0 with --soft
 *
 * The comparison logic lives in bench/lib/compare.ts.
 */
import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import {
  areaOfFile,
  compare,
  formatNs,
  mergeArea,
  parseBenchArgs,
  renderMarkdown,
  scope,
  type Results,
  resultsFromVitestJson
} from "./lib/compare.js"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..")
/** Where results, baselines and bench files live; overridable so tests use a temp dir. */
const benchDir = resolve(process.env.TALON_BENCH_DIR ?? join(root, "bench"))
const latestPath = join(benchDir, "results", "latest.json")
const baselinePath = (name: string) => join(benchDir, "baselines", `${name}.json`)
const show = (p: string) => relative(process.cwd(), p) || p

const die = (message: string, code = 1): never => {
  console.error(message)
  process.exit(code)
}

const readResults = (path: string, hint: string): Results => {
  if (!existsSync(path)) return die(`${show(path)} does not exist: ${hint}`)
  try {
    const parsed: unknown = JSON.parse(readFileSync(path, "utf8"))
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error("not a JSON object")
    const out: Record<string, number> = {}
    for (const [k, v] of Object.entries(parsed)) if (typeof v === "number") out[k] = v
    return out
  } catch (e) {
    return die(`${show(path)} is not a results file ({ "name": median_ns }): ${(e as Error).message}`)
  }
}

const writeResults = (path: string, r: Results): void => {
  mkdirSync(dirname(path), { recursive: true })
  writeFileSync(path, `${JSON.stringify(r, null, 2)}\n`)
}

const areas = (): Array<string> =>
  readdirSync(benchDir)
    .filter((f) => /\.bench\.[cm]?[jt]s$/.test(f))
    .map(areaOfFile)
    .sort()

const run = (area: string | undefined): void => {
  const files = area === undefined ? [] : [join(benchDir, `${area}.bench.ts`)]
  if (area !== undefined && !existsSync(files[0]!))
    die(`no benchmarks for area "${area}": ${show(files[0]!)} does not exist (areas: ${areas().join(", ")})`)
  const report = join(tmpdir(), `talon-bench-${process.pid}.json`)
  const vitest = join(root, "node_modules", "vitest", "vitest.mjs")
  // One file at a time: two cores, and parallel bench files would time each other.
  const args = [vitest, "bench", "--run", "--no-file-parallelism", "--outputJson", report, ...files]
  const child = spawnSync(process.execPath, args, { cwd: root, stdio: "inherit" })
  if (child.status !== 0 || !existsSync(report)) die(`vitest bench failed (exit ${child.status ?? child.signal})`)
  const { results, skipped } = resultsFromVitestJson(JSON.parse(readFileSync(report, "utf8")))
  rmSync(report, { force: true })
  for (const k of skipped) console.error(`skipped ${k}: no median (the benchmark failed?)`)
  if (Object.keys(results).length === 0) die("vitest produced no benchmark results")
  const merged =
    area === undefined || !existsSync(latestPath) ? results : mergeArea(readResults(latestPath, ""), results, area)
  writeResults(latestPath, merged)
  const width = Math.max(...Object.keys(results).map((k) => k.length))
  console.log(`\nmedians (ns per call) → ${show(latestPath)}`)
  for (const [k, v] of Object.entries(results)) console.log(`  ${k.padEnd(width)}  ${formatNs(v)}`)
}

const save = (name: string): void => {
  const results = readResults(latestPath, "run `npm run bench` first")
  writeResults(baselinePath(name), results)
  console.log(`saved ${Object.keys(results).length} results to ${show(baselinePath(name))}`)
}

const check = (area: string | undefined, threshold: number, soft: boolean, baselineName: string): void => {
  const exitFail = soft ? 0 : 1
  if (!existsSync(baselinePath(baselineName)))
    die(`${show(baselinePath(baselineName))} does not exist: save one with \`npm run bench-save -- ${baselineName}\``, exitFail)
  if (!existsSync(latestPath)) die(`${show(latestPath)} does not exist: run \`npm run bench\` first`, exitFail)
  const baseline = scope(readResults(baselinePath(baselineName), ""), area)
  const current = scope(readResults(latestPath, ""), area)
  if (area !== undefined && Object.keys(baseline).length + Object.keys(current).length === 0)
    die(`no benchmarks in area "${area}" (areas: ${areas().join(", ")})`, exitFail)
  const result = compare(baseline, current, threshold)
  console.log(`### ${area ?? "all"}: ${show(latestPath)} vs ${show(baselinePath(baselineName))}\n`)
  console.log(renderMarkdown(result))
  if (result.regressions > 0) {
    if (soft) console.log("\n(--soft: regressions reported, not failing)")
    process.exit(exitFail)
  }
}

const cmd = parseBenchArgs(process.argv.slice(2))
switch (cmd._tag) {
  case "error":
    die(cmd.message, 2)
    break
  case "run":
    run(cmd.area)
    break
  case "save":
    save(cmd.name)
    break
  case "check":
    check(cmd.area, cmd.threshold, cmd.soft, cmd.baseline)
    break
}
