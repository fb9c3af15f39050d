/** The final table of a multi-host run: one row per scenario. */
export interface ScenarioRow {
  readonly scenario: string
  /** Client-visible errors during the scenario. */
  readonly errors: number
  /** Bytes (or replies, where only replies are counted) that differed from the origin's. */
  readonly wrongBytes: number
  /** e.g. "1.8 s" until reads succeed again, or "-". */
  readonly recovery: string
  /** e.g. "1.9 Gbit/s = 95 % of link", or "-". */
  readonly throughput: string
}

export const formatTable = (rows: ReadonlyArray<ScenarioRow>): string => {
  const head = ["scenario", "errors", "wrong bytes", "recovery time", "throughput vs link rate"]
  const cells = rows.map((r) => [r.scenario, String(r.errors), String(r.wrongBytes), r.recovery, r.throughput])
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)))
  const line = (c: ReadonlyArray<string>) => `| ${c.map((x, i) => x.padEnd(widths[i]!)).join(" | ")} |`
  return [line(head), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...cells.map(line)].join("\n")
}

export const printTable = (rows: ReadonlyArray<ScenarioRow>): void => {
  console.log(`\n${formatTable(rows)}`)
}
