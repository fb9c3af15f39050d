/**
 * bench/data/multihost_throughput.json: the cross-node runs, their per-case medians and the
 * talon/ref ratios, with the chart and table specs `bench/bench-charts.ts` renders.
 */
import { type BenchData, BENCH_DATA_SCHEMA, type Cell, describeMachine, ratioTable, type Row, tableColumns, today } from "../lib/chartsData.js"
import type { ThroughputResult } from "../kit/multihost/throughput.js"

export const DATASET_ID = "multihost_throughput"
export const TARGET_RATIO = 0.9

export interface DataParams {
  readonly machine: string
  readonly command: string
  readonly rateBps: number
  readonly delayUs: number
  readonly delayVia: string
  readonly range: number
  readonly seconds: number
  readonly warmup: number
  readonly rounds: number
  readonly loadavgBefore: number
  readonly loadavgAfter: number
}

export const throughputData = (r: ThroughputResult, p: DataParams): BenchData => {
  const linkGbit = p.rateBps / 1e9
  const deepest = Math.max(...r.cases.map((c) => c.depth))
  const atDepth = r.cases.filter((c) => c.depth === deepest)
  const worst = Math.min(...atDepth.map((c) => c.ratio_median))
  const verdict = worst >= TARGET_RATIO ? "PASS" : "FAIL"
  const summary: Array<Row> = r.cases.map((c) => ({
    case: `${c.conns} conns, depth ${c.depth}`,
    conns: c.conns,
    depth: c.depth,
    talon_gbit_s: c.talon_gbit_s,
    ref_gbit_s: c.ref_gbit_s,
    talon_link_share: Math.round((c.talon_gbit_s / linkGbit) * 1000) / 1000,
    ref_link_share: Math.round((c.ref_gbit_s / linkGbit) * 1000) / 1000,
    talon_vs_depth1: c.talon_vs_depth1,
    ref_vs_depth1: c.ref_vs_depth1
  }))
  // One row per server per case, so the chart groups the two bars of a case side by side.
  const bars: Array<Row> = r.cases.flatMap((c) => [
    { case: `${c.conns} conns, depth ${c.depth}`, server: "talon worker", gbit_s: c.talon_gbit_s },
    { case: `${c.conns} conns, depth ${c.depth}`, server: "C reference server", gbit_s: c.ref_gbit_s }
  ])
  const ratios: Array<Row> = r.cases.map((c) => ({
    case: `${c.conns} conns, depth ${c.depth}`,
    conns: c.conns,
    depth: c.depth,
    metric: "gbit_s",
    median: c.ratio_median,
    min: c.ratio_min,
    max: c.ratio_max,
    per_round: c.per_round
  }))
  const runs: Array<Row> = r.report.runs.map((run) => ({ round: run.round, position: run.position, arm: run.arm, ...(run.result as unknown as Record<string, Cell>) }))
  return {
    schema: BENCH_DATA_SCHEMA,
    id: DATASET_ID,
    title: `Cross-node throughput over a shaped veth link (${linkGbit} Gbit/s, ${p.delayUs} µs each way)`,
    measures:
      "Payload throughput of `talon loadgen` in one network namespace reading 64 KiB ranges of a cached 64 MiB object from a talon worker in another, " +
      "across a bridge whose ports are shaped with tbf (rate) and netem (one-way delay), against the C reference server (tools/ref) on the worker's host " +
      "serving the same bytes over the same link. Every payload byte of every run is compared with the object as the origin serves it.",
    caveats: [
      p.delayVia === "nfqueue"
        ? `The kernel has no netem: the one-way delay is talon-netdelay holding each inbound packet (iptables NFQUEUE) for ${p.delayUs} µs; TCP connect round trips measured ${r.rttUs} µs (median of 20) against ${2 * p.delayUs} µs configured, the rest being the scheduling of the delay process.`
        : p.delayVia === "netem"
          ? `The one-way delay is netem at each switch port; TCP connect round trips measured ${r.rttUs} µs (median of 20).`
          : `No delay was added (no netem and no iptables): round trips are the veth path's own, ${r.rttUs} µs (median of 20 TCP connects).`,
      "Both namespaces share one 2-vCPU VM with other work: the link is virtual, and the CPU that moves its bytes is the same CPU the server and client use.",
      "Depth 1 loses to depth 16 only while connections × range is below the link's bandwidth-delay product; with enough connections depth 1 fills the link too.",
      `Runs are paired in order-swapped rounds; the ratio is the median of per-round talon/ref ratios. 1-minute load average ${p.loadavgBefore} before, ${p.loadavgAfter} after.`
    ],
    command: p.command,
    date: today(),
    machine: describeMachine(p.machine),
    params: {
      link_gbit_s: linkGbit,
      delay_us_each_way: p.delayUs,
      delay_via: p.delayVia,
      rtt_us_measured: r.rttUs,
      range: p.range,
      seconds: p.seconds,
      warmup: p.warmup,
      rounds: p.rounds,
      target_ratio: TARGET_RATIO,
      depth_of_target: deepest,
      worst_ratio_at_target_depth: worst,
      verdict
    },
    runs: [...runs, ...bars.map((b) => ({ ...b, arm: "median" }))],
    summary,
    ratios,
    charts: [
      {
        id: "gbit",
        title: `Median Gbit/s per case, talon worker vs C reference server (link ${linkGbit} Gbit/s)`,
        data: "runs",
        filter: { arm: "median" },
        mark: "bar",
        x: { field: "case", title: "connections × depth", type: "nominal" },
        y: { field: "gbit_s", title: "payload Gbit/s" },
        color: "server",
        rule: { y: linkGbit, label: `link ${linkGbit} Gbit/s` }
      }
    ],
    tables: [
      {
        id: "summary",
        title: "Medians over rounds: Gbit/s, share of the link, and depth 16 over depth 1",
        data: "summary",
        columns: [
          ...tableColumns({ conns: "conns", depth: "depth" }),
          ...tableColumns({ talon_gbit_s: "talon Gbit/s", ref_gbit_s: "ref Gbit/s" }, 3),
          ...tableColumns({ talon_link_share: "talon / link", ref_link_share: "ref / link", talon_vs_depth1: "talon vs depth 1", ref_vs_depth1: "ref vs depth 1" }, 2)
        ]
      },
      ratioTable({
        title: `talon / ref Gbit/s per round (target ≥ ${TARGET_RATIO} at depth ${deepest})`,
        medianTitle: "median ratio",
        lead: { conns: "conns", depth: "depth" }
      })
    ]
  }
}
