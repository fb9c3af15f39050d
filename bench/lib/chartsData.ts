/**
 * The one shape of `bench/data/*.json` (documented in BENCHMARKS.md): what a
 * benchmark script writes and what `bench/bench-charts.ts` renders into SVG
 * charts and markdown tables. Plain JSON rows plus declarative chart/table
 * specs, so a new benchmark drops a file in and gets charts without code.
 */
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { cpus, totalmem } from "node:os"
import type { RoundsReport, Spread } from "./rounds.js"

export const BENCH_DATA_SCHEMA = 1

export type Cell = string | number | boolean | null

/** One measured run (or any flat record): the rows charts and tables draw from. */
export type Row = Readonly<Record<string, Cell>>

export interface Machine {
  /** Short human name, e.g. "2-vCPU KVM VM (AMD EPYC), shared". */
  readonly name: string
  readonly cpu: string
  readonly cores: number
  readonly memory_gib: number
  readonly kernel: string
  readonly node: string
}

export type Filter = Readonly<Record<string, Cell | ReadonlyArray<Cell>>>

/** True when `row` passes `filter`. */
export const matches = (row: Row, filter: Filter | undefined): boolean =>
  Object.entries(filter ?? {}).every(([k, v]) => (Array.isArray(v) ? v.includes(row[k] ?? null) : row[k] === v))

export interface ChartSpec {
  /** File name stem: `docs/assets/bench/<dataset id>-<chart id>.svg`. */
  readonly id: string
  readonly title: string
  /** Which rows: `runs` (raw), `summary` or `ratios`. */
  readonly data: "runs" | "summary" | "ratios"
  readonly mark: "bar" | "line" | "point" | "tick"
  readonly x: AxisSpec
  readonly y: AxisSpec
  /** Field whose values get one colour each. */
  readonly color?: string
  /** Keep only rows whose fields equal these values (or one of a list of values). */
  readonly filter?: Filter
  /** Horizontal reference line, e.g. a target ratio. */
  readonly rule?: { readonly y: number; readonly label: string }
  /** For `summary` bar charts: draw [min, max] whiskers from these fields. */
  readonly errorBars?: { readonly low: string; readonly high: string }
}

export interface AxisSpec {
  readonly field: string
  readonly title: string
  readonly type?: "quantitative" | "nominal" | "ordinal"
  readonly scale?: "linear" | "log"
}

export interface TableSpec {
  readonly id: string
  readonly title: string
  readonly data: "runs" | "summary" | "ratios"
  readonly columns: ReadonlyArray<{ readonly field: string; readonly title: string; readonly digits?: number }>
  readonly filter?: Filter
}

/** The usual `summary` bar chart: one bar per arm at the median over rounds, with min–max whiskers. */
export const medianBarChart = (spec: {
  readonly id: string
  readonly title: string
  readonly yTitle: string
  readonly filter: Filter
  readonly scale?: AxisSpec["scale"]
}): ChartSpec => ({
  id: spec.id,
  title: spec.title,
  data: "summary",
  mark: "bar",
  filter: spec.filter,
  x: { field: "arm", title: "arm", type: "nominal" },
  y: { field: "median", title: spec.yTitle, ...(spec.scale === undefined ? {} : { scale: spec.scale }) },
  errorBars: { low: "min", high: "max" }
})

type Columns = TableSpec["columns"]

/** Fields and their column titles, in column order (field names that look like numbers would be sorted first). */
export type ColumnTitles = Readonly<Record<string, string>>

/** Table columns for `titles`, numbers shown with `digits` decimals (as they are when omitted). */
export const tableColumns = (titles: ColumnTitles, digits?: number): Columns =>
  Object.entries(titles).map(([field, title]) => (digits === undefined ? { field, title } : { field, title, digits }))

const spreadColumns = (digits: number, medianTitle = "median"): Columns =>
  tableColumns({ median: medianTitle, min: "min", max: "max" }, digits)

/** The usual `summary` table: the row keys in `lead`, then median, min and max over rounds. */
export const summaryTable = (spec: {
  readonly id?: string
  readonly title: string
  readonly lead: ColumnTitles
  readonly filter?: Filter
}): TableSpec => ({
  id: spec.id ?? "summary",
  title: spec.title,
  data: "summary",
  ...(spec.filter === undefined ? {} : { filter: spec.filter }),
  columns: [...tableColumns(spec.lead), ...spreadColumns(2)]
})

/** The usual `ratios` table: per-round ratios to the baseline arm, their median and spread, and each round's value. */
export const ratioTable = (spec: {
  readonly title: string
  readonly lead: ColumnTitles
  readonly filter?: Filter
  readonly medianTitle?: string
}): TableSpec => ({
  id: "ratios",
  title: spec.title,
  data: "ratios",
  ...(spec.filter === undefined ? {} : { filter: spec.filter }),
  columns: [...tableColumns(spec.lead), ...spreadColumns(3, spec.medianTitle), { field: "per_round", title: "per round" }]
})

export interface BenchData {
  readonly schema: typeof BENCH_DATA_SCHEMA
  /** Stable id, same as the file name stem. */
  readonly id: string
  readonly title: string
  /** What the numbers measure, and what they do not. */
  readonly measures: string
  readonly caveats: ReadonlyArray<string>
  /** How to reproduce, e.g. `npx tsx bench/loadgen-vs-pound.ts --rounds 4`. */
  readonly command: string
  /** Day of the measurement (YYYY-MM-DD); no time of day, so re-renders are stable. */
  readonly date: string
  readonly machine: Machine
  readonly params: Readonly<Record<string, Cell>>
  readonly runs: ReadonlyArray<Row>
  /** Per arm × metric: n, median, min, max, q1, q3. */
  readonly summary: ReadonlyArray<Row>
  /** Per non-baseline arm × metric: per-round ratio to the baseline, median and spread. */
  readonly ratios: ReadonlyArray<Row>
  readonly charts: ReadonlyArray<ChartSpec>
  readonly tables: ReadonlyArray<TableSpec>
}

const firstLine = (s: string) => s.split("\n")[0]!.trim()

/** Facts about this machine for the data file (no hostnames, no time). */
export const describeMachine = (name: string): Machine => {
  const cpuList = cpus()
  let kernel = "unknown"
  try {
    kernel = firstLine(execFileSync("uname", ["-sr"], { encoding: "utf8" }))
  } catch {
    try {
      kernel = firstLine(readFileSync("/proc/sys/kernel/osrelease", "utf8"))
    } catch {
      // keep "unknown"
    }
  }
  return {
    name,
    cpu: cpuList[0]?.model.trim() ?? "unknown",
    cores: cpuList.length,
    memory_gib: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    kernel,
    node: process.version
  }
}

export const today = (): string => new Date().toISOString().slice(0, 10)

const r3 = (x: number): number | null => (Number.isFinite(x) ? Math.round(x * 1000) / 1000 : null)

/** A spread's count and quartiles as row fields, rounded to 3 places. */
const spreadOf = (s: Spread) => ({ n: s.n, median: r3(s.median), min: r3(s.min), max: r3(s.max), q1: r3(s.q1), q3: r3(s.q3) })

/** Flattens a rounds report into `runs`, `summary` and `ratios` rows. */
export const rowsFromRounds = <A>(
  report: RoundsReport<A>,
  toRow: (a: A) => Row
): Pick<BenchData, "runs" | "summary" | "ratios"> => ({
  runs: report.runs.map((r) => ({ round: r.round, position: r.position, arm: r.arm, ...toRow(r.result) })),
  summary: Object.entries(report.summary).flatMap(([arm, metrics]) =>
    Object.entries(metrics).map(([metric, s]) => ({
      arm,
      metric,
      ...spreadOf(s)
    }))
  ),
  ratios: Object.entries(report.ratios).flatMap(([arm, metrics]) =>
    Object.entries(metrics).map(([metric, s]) => ({
      arm,
      baseline: report.baseline,
      metric,
      ...spreadOf(s),
      per_round: s.perRound.map((v) => r3(v) ?? "-").join(" ")
    }))
  )
})

/** Structural check of a parsed data file; returns problems (empty when fine). */
export const checkBenchData = (d: unknown, fileStem: string): ReadonlyArray<string> => {
  const problems: Array<string> = []
  if (typeof d !== "object" || d === null) return ["not a JSON object"]
  const o = d as Record<string, unknown>
  if (o["schema"] !== BENCH_DATA_SCHEMA) problems.push(`schema must be ${BENCH_DATA_SCHEMA}, got ${JSON.stringify(o["schema"])}`)
  if (o["id"] !== fileStem) problems.push(`id must equal the file name stem ${JSON.stringify(fileStem)}, got ${JSON.stringify(o["id"])}`)
  for (const k of ["title", "measures", "command", "date"]) if (typeof o[k] !== "string") problems.push(`${k} must be a string`)
  for (const k of ["runs", "summary", "ratios", "charts", "tables", "caveats"]) if (!Array.isArray(o[k])) problems.push(`${k} must be an array`)
  if (typeof o["machine"] !== "object" || o["machine"] === null) problems.push("machine must be an object")
  return problems
}
