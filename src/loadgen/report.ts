/** Human-readable output of loadgen runs: a markdown-style table and a live progress line. */
import type { LoadResult, Progress } from "./run.js"

const fmt = (v: number | null | undefined, digits = 0): string =>
  v === null || v === undefined ? "-" : v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })

interface Column {
  readonly head: string
  readonly cell: (r: LoadResult) => string
}

const baseColumns: ReadonlyArray<Column> = [
  { head: "conns", cell: (r) => String(r.conns) },
  { head: "depth", cell: (r) => String(r.depth) },
  { head: "rps", cell: (r) => fmt(r.rps) },
  { head: "MiB/s", cell: (r) => fmt(r.mib_s, 1) },
  { head: "p50 µs", cell: (r) => fmt(r.p50_us) },
  { head: "p90 µs", cell: (r) => fmt(r.p90_us) },
  { head: "p99 µs", cell: (r) => fmt(r.p99_us) },
  { head: "p99.9 µs", cell: (r) => fmt(r.p999_us) },
  { head: "max µs", cell: (r) => fmt(r.max_us) },
  { head: "samples", cell: (r) => String(r.samples) },
  { head: "errors", cell: (r) => String(r.errors) },
  { head: "srv CPU %", cell: (r) => fmt(r.cpu_percent, 1) },
  { head: "kernel", cell: (r) => fmt(r.kernel_share, 3) },
  { head: "srv µs/req", cell: (r) => fmt(r.cpu_us_per_req, 2) },
  { head: "RSS MiB", cell: (r) => (r.rss_kb === null ? "-" : fmt(r.rss_kb / 1024, 1)) },
  { head: "client cores", cell: (r) => fmt(r.client_cores, 2) }
]

const missColumns: ReadonlyArray<Column> = [
  { head: "miss share", cell: (r) => fmt(r.miss_share, 2) },
  { head: "hit p50/p99 µs", cell: (r) => `${fmt(r.hit_p50_us)} / ${fmt(r.hit_p99_us)}` },
  { head: "misses", cell: (r) => String(r.miss_samples) },
  { head: "miss p50/p99 µs", cell: (r) => `${fmt(r.miss_p50_us)} / ${fmt(r.miss_p99_us)}` }
]

export const columnsFor = (results: ReadonlyArray<LoadResult>): ReadonlyArray<Column> =>
  results.some((r) => r.miss_share > 0) ? [...baseColumns, ...missColumns] : baseColumns

/** A markdown table (aligned for a terminal, valid for a document). */
export const table = (results: ReadonlyArray<LoadResult>): string => {
  const cols = columnsFor(results)
  const rows = results.map((r) => cols.map((c) => c.cell(r)))
  const widths = cols.map((c, i) => Math.max(c.head.length, ...rows.map((row) => row[i]!.length)))
  const line = (cells: ReadonlyArray<string>) => `| ${cells.map((c, i) => c.padStart(widths[i]!)).join(" | ")} |`
  return [line(cols.map((c) => c.head)), `|${widths.map((w) => "-".repeat(w + 1) + ":").join("|")}|`, ...rows.map(line)].join("\n")
}

/** JSON Lines form: one object per run, keys in a fixed order. */
export const jsonLine = (r: LoadResult): string => JSON.stringify(r)

export const progressLine = (conns: number, depth: number, p: Progress): string =>
  `loadgen ${conns}×${depth}  ${p.phase.padEnd(9)} ${p.elapsed.toFixed(1).padStart(6)} s  ${fmt(p.rps).padStart(9)} req/s  ${p.replies} replies`
