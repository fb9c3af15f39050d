/**
 * Renders `bench/data/*.json` (see chartsData.ts) into SVG charts and markdown
 * tables. Output is byte-reproducible: a fixed font family (vega measures text
 * by estimate without a canvas, so no system fonts are consulted), no dates or
 * times, and element ids renumbered per file in order of appearance.
 */
import * as vega from "vega"
import * as vl from "vega-lite"
import { type BenchData, type Cell, type ChartSpec, type Filter, matches, type Row, type TableSpec } from "./chartsData.js"

export const FONT = "DejaVu Sans, Verdana, sans-serif"

const rowsOf = (data: BenchData, which: ChartSpec["data"], filter?: Filter): ReadonlyArray<Row> =>
  data[which].filter((row) => matches(row, filter))

/** The vega-lite spec of one chart of a data file. */
export const vegaLiteSpec = (data: BenchData, chart: ChartSpec): vl.TopLevelSpec => {
  const rows = rowsOf(data, chart.data, chart.filter).filter((r) => typeof r[chart.y.field] === "number")
  const x = { field: chart.x.field, type: chart.x.type ?? "ordinal", title: chart.x.title, ...(chart.x.scale === "log" ? { scale: { type: "log" as const } } : {}) }
  const y = { field: chart.y.field, type: "quantitative" as const, title: chart.y.title, ...(chart.y.scale === "log" ? { scale: { type: "log" as const } } : {}) }
  const grouped = chart.mark === "bar" && chart.color !== undefined
  const encoding = {
    x,
    y,
    ...(chart.color !== undefined ? { color: { field: chart.color, type: "nominal" as const, title: chart.color } } : {}),
    ...(grouped ? { xOffset: { field: chart.color!, type: "nominal" as const } } : {})
  }
  const main = { mark: { type: chart.mark, ...(chart.mark === "line" ? { point: true } : {}) }, encoding }
  const layers: Array<Record<string, unknown>> = [main]
  if (chart.errorBars) {
    layers.push({
      mark: { type: "rule", color: "#333" },
      encoding: {
        x,
        ...(grouped ? { xOffset: { field: chart.color!, type: "nominal" } } : {}),
        y: { field: chart.errorBars.low, type: "quantitative" },
        y2: { field: chart.errorBars.high }
      }
    })
  }
  if (chart.rule) {
    // One datum of their own, or the rule and its label repeat once per data row.
    const once = { values: [{}] }
    layers.push({ data: once, mark: { type: "rule", color: "#c0392b", strokeDash: [4, 3] }, encoding: { y: { datum: chart.rule.y } } })
    layers.push({
      data: once,
      mark: { type: "text", align: "left", dx: 4, dy: -6, color: "#c0392b" },
      encoding: { y: { datum: chart.rule.y }, x: { value: 0 }, text: { value: chart.rule.label } }
    })
  }
  return {
    title: { text: chart.title, subtitle: `${data.machine.name} · ${data.date}` },
    width: 520,
    height: 260,
    background: "white",
    padding: 8,
    data: { values: rows as Array<Row> },
    layer: layers,
    config: { font: FONT, title: { fontSize: 13, subtitleFontSize: 10, anchor: "start" }, axis: { labelFontSize: 10, titleFontSize: 11 }, legend: { labelLimit: 240 } }
  } as unknown as vl.TopLevelSpec
}

/** Renumbers every `id="…"` (and references to it) in order of first appearance. */
export const normaliseSvg = (svg: string): string => {
  const ids = new Map<string, string>()
  for (const m of svg.matchAll(/\bid="([^"]+)"/g)) if (!ids.has(m[1]!)) ids.set(m[1]!, `c${ids.size + 1}`)
  let out = svg
  for (const [from, to] of ids) {
    const esc = from.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
    out = out.replace(new RegExp(`\\bid="${esc}"`, "g"), `id="${to}"`).replace(new RegExp(`url\\(#${esc}\\)`, "g"), `url(#${to})`)
  }
  return out.endsWith("\n") ? out : out + "\n"
}

export const renderSvg = async (spec: vl.TopLevelSpec): Promise<string> => {
  const view = new vega.View(vega.parse(vl.compile(spec).spec), { renderer: "none" })
  try {
    return normaliseSvg(await view.toSVG())
  } finally {
    view.finalize()
  }
}

/** `docs/assets/bench/<dataset>-<chart>.svg` file name of a chart. */
export const chartFile = (data: BenchData, chart: ChartSpec): string => `${data.id}-${chart.id}.svg`

const fmtCell = (v: Cell | undefined, digits?: number): string => {
  if (v === null || v === undefined) return "-"
  if (typeof v === "number") {
    if (!Number.isFinite(v)) return "-"
    return digits === undefined ? String(v) : v.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })
  }
  return String(v).replace(/\|/g, "\\|")
}

/** A markdown table of one table spec, with the machine and date under it. */
export const markdownTable = (data: BenchData, table: TableSpec): string => {
  const rows = rowsOf(data, table.data, table.filter)
  const head = `| ${table.columns.map((c) => c.title).join(" | ")} |`
  const rule = `|${table.columns.map((c, i) => (i === 0 || rows.every((r) => typeof r[c.field] !== "number") ? "---" : "--:")).join("|")}|`
  const body = rows.map((r) => `| ${table.columns.map((c) => fmtCell(r[c.field], c.digits)).join(" | ")} |`)
  return [`**${table.title}** (${data.machine.name}; ${data.date}; \`${data.command}\`)`, "", head, rule, ...body].join("\n")
}

const BEGIN = /<!-- bench-table: ([\w.-]+)\/([\w.-]+) -->/g
const END = "<!-- /bench-table -->"

/**
 * Replaces every `<!-- bench-table: dataset/table -->…<!-- /bench-table -->`
 * section of a markdown document with the freshly rendered table. Returns the
 * new text and the markers that named no known table.
 */
export const fillTables = (
  markdown: string,
  tables: ReadonlyMap<string, string>
): { readonly text: string; readonly unknown: ReadonlyArray<string> } => {
  const unknown: Array<string> = []
  let out = ""
  let last = 0
  for (const m of markdown.matchAll(BEGIN)) {
    const start = m.index!
    const afterBegin = start + m[0].length
    const end = markdown.indexOf(END, afterBegin)
    if (end < 0) {
      unknown.push(`${m[1]}/${m[2]} (no closing ${END})`)
      continue
    }
    const key = `${m[1]}/${m[2]}`
    const table = tables.get(key)
    if (table === undefined) unknown.push(key)
    out += markdown.slice(last, afterBegin) + "\n" + (table ?? markdown.slice(afterBegin, end).trim()) + "\n"
    last = end
  }
  return { text: out + markdown.slice(last), unknown }
}
