/**
 * Microbenchmark results and their comparison against a saved baseline (DESIGN.md
 * "Benchmarks and measurement"). Pure: `bench/micro.ts` does the I/O.
 *
 * A results file is `{ "area::name[/arg]": median_ns }`, `area` being the bench file
 * (`bench/placement.bench.ts` → `placement`), so names line up with Talon's published
 * baseline (`placement::locate/256`).
 */

/** `{ "area::name[/arg]": median_ns }`, keys in `naturalCompare` order. */
export type Results = Readonly<Record<string, number>>

/**
 * A bench registered as `"name (×N)"` times N calls per sample: a clock read costs far more
 * than the work being measured (see bench/batch.ts), so each sample is a batch and the
 * harness divides the median by N.
 */
const BATCH = /^(.*) \(×(\d+)\)$/

export const batchedName = (name: string, batch: number): string => (batch === 1 ? name : `${name} (×${batch})`)

export const parseBenchName = (name: string): { readonly name: string; readonly batch: number } => {
  const m = BATCH.exec(name)
  if (m === null) return { name, batch: 1 }
  const batch = Number(m[2])
  return batch >= 1 ? { name: m[1]!, batch } : { name, batch: 1 }
}

/** `bench/core.bench.ts` → `core`. */
export const areaOfFile = (filepath: string): string =>
  (filepath.split(/[\\/]/).pop() ?? filepath).replace(/\.bench\.[cm]?[jt]sx?$/, "")

/** `placement::locate/256` → `placement`; a key without `::` has no area. */
export const areaOf = (key: string): string | undefined => {
  const i = key.indexOf("::")
  return i < 0 ? undefined : key.slice(0, i)
}

/** Compares strings with digit runs as numbers: `locate/8` < `locate/64` < `locate/256`. */
export const naturalCompare = (a: string, b: string): number => {
  const re = /(\d+)|(\D+)/g
  const pa = a.match(re) ?? []
  const pb = b.match(re) ?? []
  for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
    const x = pa[i]!
    const y = pb[i]!
    if (x === y) continue
    const nx = /^\d/.test(x)
    const ny = /^\d/.test(y)
    if (nx && ny) {
      const d = Number(x) - Number(y)
      if (d !== 0) return d
    }
    return x < y ? -1 : 1
  }
  return pa.length - pb.length || (a < b ? -1 : a > b ? 1 : 0)
}

export const sortResults = (r: Results): Results => {
  const out: Record<string, number> = {}
  for (const k of Object.keys(r).sort(naturalCompare)) out[k] = r[k]!
  return out
}

/** Three significant digits are more than a microbenchmark median can support. */
const round3 = (ns: number): number => (ns === 0 ? 0 : Number(ns.toPrecision(3)))

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null

/**
 * Converts vitest's `--outputJson` report (`files[].groups[].benchmarks[]`, times in ms)
 * into results. Malformed or failed entries are skipped and reported, never thrown on.
 */
export const resultsFromVitestJson = (
  report: unknown
): { readonly results: Results; readonly skipped: ReadonlyArray<string> } => {
  const results: Record<string, number> = {}
  const skipped: Array<string> = []
  const files = isRecord(report) && Array.isArray(report.files) ? report.files : []
  for (const file of files) {
    if (!isRecord(file) || typeof file.filepath !== "string" || !Array.isArray(file.groups)) continue
    const area = areaOfFile(file.filepath)
    for (const group of file.groups) {
      if (!isRecord(group) || !Array.isArray(group.benchmarks)) continue
      for (const b of group.benchmarks) {
        if (!isRecord(b) || typeof b.name !== "string") continue
        const { name, batch } = parseBenchName(b.name)
        const key = name.includes("::") ? name : `${area}::${name}`
        const median = b.median
        if (typeof median !== "number" || !Number.isFinite(median) || median < 0) {
          skipped.push(key)
          continue
        }
        results[key] = round3((median * 1e6) / batch)
      }
    }
  }
  return { results: sortResults(results), skipped }
}

/** Keeps only the keys of one area (`-p AREA`); all keys when `area` is undefined. */
export const scope = (r: Results, area: string | undefined): Results => {
  if (area === undefined) return r
  const out: Record<string, number> = {}
  for (const [k, v] of Object.entries(r)) if (areaOf(k) === area) out[k] = v
  return out
}

/** Replaces one area's keys in `base` with `fresh` (a `run -p AREA` updates only its area). */
export const mergeArea = (base: Results, fresh: Results, area: string): Results => {
  const out: Record<string, number> = {}
  for (const [k, v] of Object.entries(base)) if (areaOf(k) !== area) out[k] = v
  return sortResults({ ...out, ...fresh })
}

export type Verdict = "ok" | "regression" | "faster" | "new" | "missing"

export interface Row {
  readonly name: string
  readonly baseline: number | undefined
  readonly current: number | undefined
  /** (current − baseline) / baseline, as a fraction; undefined for new/missing rows. */
  readonly delta: number | undefined
  readonly verdict: Verdict
}

export interface Comparison {
  readonly rows: ReadonlyArray<Row>
  readonly regressions: number
  readonly threshold: number
}

/**
 * Row per benchmark in either file. A regression is a median slower than the baseline by
 * more than `threshold` (a fraction: 0.1 = 10%); faster by more than it is reported as such.
 */
export const compare = (baseline: Results, current: Results, threshold: number): Comparison => {
  const names = [...new Set([...Object.keys(baseline), ...Object.keys(current)])].sort(naturalCompare)
  let regressions = 0
  const rows = names.map((name): Row => {
    const b = baseline[name]
    const c = current[name]
    if (b === undefined) return { name, baseline: b, current: c, delta: undefined, verdict: "new" }
    if (c === undefined) return { name, baseline: b, current: c, delta: undefined, verdict: "missing" }
    const delta = b === 0 ? (c === 0 ? 0 : Infinity) : (c - b) / b
    const verdict: Verdict = delta > threshold ? "regression" : delta < -threshold ? "faster" : "ok"
    if (verdict === "regression") regressions++
    return { name, baseline: b, current: c, delta, verdict }
  })
  return { rows, regressions, threshold }
}

/** `812 ns`, `14.2 µs`, `1.31 ms`. */
export const formatNs = (ns: number | undefined): string => {
  if (ns === undefined) return "—"
  if (ns < 1e3) return `${Number(ns.toPrecision(3))} ns`
  if (ns < 1e6) return `${Number((ns / 1e3).toPrecision(3))} µs`
  if (ns < 1e9) return `${Number((ns / 1e6).toPrecision(3))} ms`
  return `${Number((ns / 1e9).toPrecision(3))} s`
}

const formatDelta = (d: number | undefined): string => {
  if (d === undefined) return "—"
  if (!Number.isFinite(d)) return "+∞"
  const pct = d * 100
  return `${pct >= 0 ? "+" : ""}${pct.toFixed(1)}%`
}

const VERDICT_TEXT: Record<Verdict, string> = {
  ok: "ok",
  regression: "**REGRESSION**",
  faster: "faster",
  new: "new (no baseline)",
  missing: "missing (not run)"
}

export const renderMarkdown = (c: Comparison): string => {
  const lines = ["| benchmark | baseline | current | Δ | verdict |", "|---|---:|---:|---:|---|"]
  for (const r of c.rows) {
    lines.push(
      `| ${r.name} | ${formatNs(r.baseline)} | ${formatNs(r.current)} | ${formatDelta(r.delta)} | ${VERDICT_TEXT[r.verdict]} |`
    )
  }
  const count = (v: Verdict) => c.rows.filter((r) => r.verdict === v).length
  const pct = `${Number((c.threshold * 100).toPrecision(3))}%`
  lines.push(
    "",
    `${c.rows.length} benchmarks: ${c.regressions} regressed beyond ${pct}, ${count("faster")} faster, ` +
      `${count("new")} new, ${count("missing")} missing.`
  )
  return lines.join("\n")
}

export type BenchCommand =
  | { readonly _tag: "run"; readonly area: string | undefined }
  | { readonly _tag: "save"; readonly name: string }
  | {
      readonly _tag: "check"
      readonly area: string | undefined
      readonly threshold: number
      readonly soft: boolean
      readonly baseline: string
    }

const USAGE =
  "usage: bench.ts run [-p AREA] | save NAME | check [-p AREA] [--threshold PCT] [--soft] [--baseline NAME]"

/** Baseline names become file names: keep them to one safe path segment. */
const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/

/**
 * Parses `bench/micro.ts` arguments. `--threshold` is in percent (`--threshold 15` or `15%`);
 * returns a message naming the problem instead of throwing.
 */
export const parseBenchArgs = (argv: ReadonlyArray<string>): BenchCommand | { readonly _tag: "error"; readonly message: string } => {
  const [cmd, ...rest] = argv
  const fail = (why: string) => ({ _tag: "error" as const, message: `${why}\n${USAGE}` })
  let area: string | undefined
  let threshold = 0.1
  let soft = false
  let baseline = "main"
  const positional: Array<string> = []
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!
    const value = (): string | undefined => {
      const eq = a.indexOf("=")
      if (a.startsWith("--") && eq > 0) return a.slice(eq + 1)
      return rest[++i]
    }
    const flag = a.startsWith("--") && a.includes("=") ? a.slice(0, a.indexOf("=")) : a
    if (flag === "-p" || flag === "--package" || flag === "--area") {
      const v = value()
      if (v === undefined || v === "") return fail(`${flag} needs an area (core, placement, protocol, …)`)
      area = v
    } else if (flag === "--threshold") {
      const v = value()
      const n = v === undefined ? NaN : Number(v.replace(/%$/, ""))
      if (!(n >= 0) || !Number.isFinite(n)) return fail(`--threshold needs a non-negative percentage, got ${v ?? "nothing"}`)
      threshold = n / 100
    } else if (flag === "--soft") {
      soft = true
    } else if (flag === "--baseline") {
      const v = value()
      if (v === undefined || !SAFE_NAME.test(v)) return fail(`--baseline needs a name like "main", got ${v ?? "nothing"}`)
      baseline = v
    } else if (a.startsWith("-")) {
      return fail(`unknown option ${a}`)
    } else {
      positional.push(a)
    }
  }
  switch (cmd) {
    case "run":
      if (positional.length > 0) return fail(`run takes no positional arguments, got ${positional.join(" ")}`)
      return { _tag: "run", area }
    case "save": {
      const name = positional[0]
      if (name === undefined || positional.length > 1 || !SAFE_NAME.test(name))
        return fail(`save needs exactly one baseline name like "main", got ${positional.join(" ") || "nothing"}`)
      return { _tag: "save", name }
    }
    case "check":
      if (positional.length > 0) return fail(`check takes no positional arguments, got ${positional.join(" ")}`)
      return { _tag: "check", area, threshold, soft, baseline }
    default:
      return fail(cmd === undefined ? "missing command" : `unknown command ${cmd}`)
  }
}
