/**
 * dataplane-bench's report: per-config summaries and ratios (plus the fixed comparisons between
 * arms), the targets table, console tables and bench/data/dataplane.json.
 */
import { writeFileSync } from "node:fs"
import {
  type BenchData,
  BENCH_DATA_SCHEMA,
  type ChartSpec,
  describeMachine,
  medianBarChart,
  ratioTable,
  type Row,
  rowsFromRounds,
  summaryTable,
  today
} from "../lib/chartsData.js"
import { type RoundsReport, summarise } from "../lib/rounds.js"
import { RANGE, SIZE } from "./arms.js"
import { fmt, type Metrics } from "./measure.js"

export interface Config {
  readonly name: string
  readonly conns: number
  readonly depth: number
}

export interface ReportParams {
  readonly reports: ReadonlyArray<{ readonly config: Config; readonly report: RoundsReport<Metrics> }>
  /** RSS of every arm with no connection open. */
  readonly idle: ReadonlyArray<Row>
  readonly rounds: number
  readonly seconds: number
  readonly warmup: number
  readonly cooldown: number
  readonly spin: boolean
  readonly configs: ReadonlyArray<Config>
  readonly arms: ReadonlyArray<string>
  readonly yardstick: string
  readonly machine: string
  readonly argv: ReadonlyArray<string>
  /** Where the data file goes; undefined writes none. */
  readonly out: string | undefined
}

/** Summarises the configs measured so far and writes the data file; prints the tables when `final`. */
export const writeReport = (p: ReportParams, originTotal: number, final: boolean): void => {
  const reports = p.reports
  const log = final ? console.log : () => {}
  // ---------------------------------------------------------------- summary, comparisons, targets
  const metrics = ["rps", "cpu_us_per_req", "kernel_share", "p50_us", "p99_us", "max_us", "rss_mib", "client_cores", "server_cores"] as const
  const metricFns = Object.fromEntries(metrics.map((m) => [m, (a: Metrics) => a[m]]))
  const runs: Array<Row> = []
  const summary: Array<Row> = []
  const ratios: Array<Row> = []
  const comparisons: Array<[string, string]> = [
    ["native-pipelined", "portable-pipelined"],
    ["native-multiplexed", "portable-multiplexed"],
    ["native-multiplexed", "native-pipelined"],
    ["portable-multiplexed", "portable-pipelined"],
    ["native-pipelined-x2", "native-pipelined"],
    ["native-multiplexed-x2", "native-multiplexed"],
    ["portable-pipelined-x2", "portable-pipelined"],
    ["portable-multiplexed-x2", "portable-multiplexed"],
    ["native-pipelined-x2-shared", "native-pipelined-x2"]
  ]
  const ratioOf = (config: string, arm: string, baseline: string, metric: string): number => {
    const r = ratios.find((x) => x["config"] === config && x["arm"] === arm && x["baseline"] === baseline && x["metric"] === metric)
    return typeof r?.["median"] === "number" ? r["median"] : NaN
  }
  for (const { config, report } of reports) {
    const rows = rowsFromRounds({ ...report, ...summarise(report.arms, report.byArm, report.baseline, metricFns) }, (m) => ({ ...m }))
    runs.push(...rows.runs.map((r) => ({ config: config.name, ...r })))
    summary.push(...rows.summary.map((r) => ({ config: config.name, ...r })))
    ratios.push(...rows.ratios.map((r) => ({ config: config.name, ...r })))
    for (const [arm, base] of comparisons) {
      if (!report.arms.includes(arm) || !report.arms.includes(base)) continue
      const s = summarise([base, arm], report.byArm, base, metricFns)
      const extra = rowsFromRounds({ ...report, baseline: base, ...s }, (m) => ({ ...m }))
      ratios.push(...extra.ratios.map((r) => ({ config: config.name, ...r })))
    }
  }

  const median = (config: string, arm: string, metric: string): number => {
    const r = summary.find((x) => x["config"] === config && x["arm"] === arm && x["metric"] === metric)
    return typeof r?.["median"] === "number" ? r["median"] : NaN
  }
  type Check = { target: string; measured: number; ok: (v: number) => boolean; bar: string }
  const checks: Array<Check> = [
    { target: "64x16 native-pipelined rps / ceiling", measured: ratioOf("64x16", "native-pipelined", "ceiling", "rps"), ok: (v) => v >= 0.85, bar: "≥ 0.85" },
    { target: "64x16 native-pipelined CPU/req / ceiling", measured: ratioOf("64x16", "native-pipelined", "ceiling", "cpu_us_per_req"), ok: (v) => v <= 1.25, bar: "≤ 1.25" },
    { target: "64x16 native-pipelined kernel share", measured: median("64x16", "native-pipelined", "kernel_share"), ok: (v) => v >= 0.85, bar: "≥ 0.85" },
    { target: "1x1 native-pipelined rps / ceiling", measured: ratioOf("1x1", "native-pipelined", "ceiling", "rps"), ok: (v) => v >= 0.85, bar: "≥ 0.85" },
    { target: "1x1 native-pipelined CPU/req / ceiling", measured: ratioOf("1x1", "native-pipelined", "ceiling", "cpu_us_per_req"), ok: (v) => v <= 2, bar: "≤ 2" },
    { target: "1x1 native-pipelined kernel share", measured: median("1x1", "native-pipelined", "kernel_share"), ok: (v) => v >= 0.85, bar: "≥ 0.85" },
    { target: "64x1 native-pipelined rps / ceiling", measured: ratioOf("64x1", "native-pipelined", "ceiling", "rps"), ok: (v) => v >= 0.85, bar: "≥ 0.85" },
    { target: "64x1 native-pipelined CPU/req / ceiling", measured: ratioOf("64x1", "native-pipelined", "ceiling", "cpu_us_per_req"), ok: (v) => v <= 2, bar: "≤ 2" },
    { target: "64x1 native-pipelined kernel share", measured: median("64x1", "native-pipelined", "kernel_share"), ok: (v) => v >= 0.85, bar: "≥ 0.85" },
    { target: "64x16 native / portable rps (pipelined)", measured: ratioOf("64x16", "native-pipelined", "portable-pipelined", "rps"), ok: (v) => v >= 2, bar: "≥ 2" },
    { target: "64x16 native / portable CPU/req (pipelined)", measured: ratioOf("64x16", "native-pipelined", "portable-pipelined", "cpu_us_per_req"), ok: (v) => v <= 0.5, bar: "≤ 0.5" },
    { target: "1024x1 portable / native p99 (pipelined)", measured: 1 / ratioOf("1024x1", "native-pipelined", "portable-pipelined", "p99_us"), ok: (v) => v >= 5, bar: "≥ 5" }
  ]
  const targetRows: Array<Row> = checks.map((c) => ({
    target: c.target,
    bar: c.bar,
    measured: Number.isFinite(c.measured) ? Math.round(c.measured * 1000) / 1000 : null,
    meets: Number.isFinite(c.measured) ? c.ok(c.measured) : null
  }))
  log("\n| target | bar | measured (median of per-round ratios) | meets |\n|---|---|--:|---|")
  for (const r of targetRows) log(`| ${r["target"]} | ${r["bar"]} | ${r["measured"] ?? "-"} | ${r["meets"] === null ? "not run" : r["meets"] ? "yes" : "NO"} |`)
  log("\n| config | arm | rps | CPU µs/req | kernel share | p99 µs | max µs | RSS MiB | client cores |\n|---|---|--:|--:|--:|--:|--:|--:|--:|")
  for (const { config, report } of reports) {
    for (const arm of report.arms) {
      const m = (k: string, d = 0) => fmt(median(config.name, arm, k), d)
      log(
        `| ${config.name} | ${arm} | ${m("rps")} | ${m("cpu_us_per_req", 1)} | ${m("kernel_share", 3)} | ${m("p99_us")} | ${m("max_us")} | ${m("rss_mib", 1)} | ${m("client_cores", 2)} |`
      )
    }
  }
  const at1024 = reports.find((r) => r.config.conns === 1024)
  if (at1024 !== undefined) {
    log("\n| arm | processes | RSS idle MiB | RSS at 1024 conns MiB | per connection KiB |\n|---|--:|--:|--:|--:|")
    for (const row of p.idle) {
      const busy = median(at1024.config.name, String(row["arm"]), "rss_mib")
      const idleMib = Number(row["rss_idle_mib"])
      log(`| ${row["arm"]} | ${row["processes"]} | ${fmt(idleMib, 1)} | ${fmt(busy, 1)} | ${fmt(((busy - idleMib) * 1024) / at1024.config.conns, 1)} |`)
    }
  }
  const errors = runs.reduce((n, r) => n + (typeof r["errors"] === "number" ? r["errors"] : 0), 0)
  log(`\norigin requests during the measured rounds: ${originTotal} (all hits when 0); error replies: ${errors}`)

  const barChart = (id: string, config: string, metric: string, title: string): ChartSpec =>
    medianBarChart({ id, title, yTitle: title, filter: { config, metric } })
  const data: BenchData & { readonly targets: ReadonlyArray<Row>; readonly idle: ReadonlyArray<Row> } = {
    schema: BENCH_DATA_SCHEMA,
    id: "dataplane",
    title: "Data plane: talon worker vs the C ceiling server (64 KiB ranges, all hits)",
    measures:
      "Requests per second, server CPU per request, kernel share of server CPU, latency percentiles and RSS of the C ceiling server " +
      "(epoll + sendfile) and of talon worker arms (native sendfile addon | portable copy plane × pipelined | multiplexed serve mode × 1 | 2 loops), " +
      "all driven by the same C pound client over loopback on one 64 MiB object that every worker holds fully resident. " +
      "Ratios are medians of per-round ratios from paired, order-swapped rounds.",
    caveats: [
      "2-vCPU VM shared with other engineers' workloads: single runs drift 20-30 % between minutes, so only per-round ratios are compared.",
      "Single-process servers are pinned to CPU 0 and pound to CPU 1; a --loops 2 worker is pinned to CPUs 0 and 1 and so shares CPU 1 with the client.",
      "CPU and RSS are sampled by the bench from /proc over pound's measured window and summed over every process of an arm (a loops=2 worker is a primary and two loops); pound's single-pid numbers are kept as pound_* fields.",
      "At 64 connections the client core can be the limit (client_cores ≈ 1): then rps is the client's number and CPU per request is the server comparison that counts.",
      p.spin ? "pound ran with --spin (busy-polling client)." : "pound ran without --spin: 64×16 runs are bistable (see shared/tools/ceiling/README.md).",
      `C server and client: ${p.yardstick}.`,
      "Workers run with --version-ttl-ms 86400000 so no window contains a version re-check; the origin served no requests during the measured rounds when origin_requests_during_rounds is 0."
    ],
    command: `npx tsx bench/dataplane-bench.ts ${p.argv.join(" ")}`.trim(),
    date: today(),
    machine: describeMachine(p.machine),
    params: {
      rounds: p.rounds,
      seconds: p.seconds,
      warmup: p.warmup,
      cooldown_s: p.cooldown,
      configs: p.configs.map((c) => c.name).join(","),
      arms: p.arms.join(","),
      range: RANGE,
      object_size: SIZE,
      pound_spin: p.spin,
      server_cpus: "0 (loops=2: 0,1)",
      client_cpus: "1",
      origin_requests_during_rounds: originTotal,
      error_replies: errors
    },
    runs,
    summary,
    ratios,
    targets: targetRows,
    idle: p.idle,
    charts: [
      barChart("rps-64x16", "64x16", "rps", "rps at 64×16 (median, min–max)"),
      barChart("cpu-64x16", "64x16", "cpu_us_per_req", "server CPU µs per request at 64×16"),
      barChart("p99-1024x1", "1024x1", "p99_us", "p99 latency µs at 1024×1"),
      barChart("rss-1024x1", "1024x1", "rss_mib", "server RSS MiB holding 1024 connections")
    ],
    tables: [
      summaryTable({
        id: "medians",
        title: "Medians over rounds",
        lead: { config: "conns×depth", arm: "arm", metric: "metric" }
      }),
      ratioTable({
        title: "Per-round ratios (median, min, max)",
        lead: { config: "conns×depth", arm: "arm", baseline: "vs", metric: "metric" }
      })
    ]
  }
  if (p.out !== undefined) {
    writeFileSync(p.out, JSON.stringify(data, null, 2) + "\n")
    log(`wrote ${p.out}`)
  }

}
