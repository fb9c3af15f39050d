/**
 * mixed-bench's pure parts: per-round comparisons of multiplexed against pipelined for one
 * miss share × depth, which mode to pick from them, and the issue's target (at 10 % misses,
 * multiplexed hit p99 ≤ 0.1× pipelined at equal or better rps).
 */
import { median } from "../lib/rounds.js"

/** What one loadgen run against one worker measured (µs; null where there were no samples). */
export interface MixedResult {
  readonly rps: number
  readonly hit_p50_us: number | null
  readonly hit_p99_us: number | null
  readonly miss_p50_us: number | null
  readonly miss_p99_us: number | null
  readonly cpu_us_per_req: number | null
  readonly hit_samples: number
  readonly miss_samples: number
}

/** Per-round ratios are taken as multiplexed / pipelined within a round. */
export interface Comparison {
  readonly hitP99: ReadonlyArray<number>
  readonly hitP50: ReadonlyArray<number>
  readonly rps: ReadonlyArray<number>
  readonly cpu: ReadonlyArray<number>
}

const ratio = (a: number | null, b: number | null): number => (a === null || b === null || b === 0 ? NaN : a / b)

export const compare = (multiplexed: ReadonlyArray<MixedResult>, pipelined: ReadonlyArray<MixedResult>): Comparison => {
  const n = Math.min(multiplexed.length, pipelined.length)
  const per = (f: (m: MixedResult, p: MixedResult) => number) => Array.from({ length: n }, (_, i) => f(multiplexed[i]!, pipelined[i]!))
  return {
    hitP99: per((m, p) => ratio(m.hit_p99_us, p.hit_p99_us)),
    hitP50: per((m, p) => ratio(m.hit_p50_us, p.hit_p50_us)),
    rps: per((m, p) => ratio(m.rps, p.rps)),
    cpu: per((m, p) => ratio(m.cpu_us_per_req, p.cpu_us_per_req))
  }
}

/** Median of the finite values, or null when there are none. */
export const medianOf = (xs: ReadonlyArray<number>): number | null => {
  const finite = xs.filter((x) => Number.isFinite(x))
  return finite.length === 0 ? null : median(finite)
}

/** rps within this factor of the other mode counts as equal: run-to-run noise on a shared box is larger. */
export const RPS_EQUAL = 0.95
/** Hit p99 must move by more than this factor for a mode to be picked for latency. */
export const P99_MATTERS = 0.8

export type Pick = "multiplexed" | "pipelined" | "trade-off" | "either"

/**
 * Which mode one case calls for, from its per-round ratios (multiplexed / pipelined). A call is
 * made only when every round agrees, since a single round on a shared box moves by tens of
 * percent (the depth-1 cases, where the modes cannot differ, show how much):
 * multiplexed when its hit p99 is clearly lower at equal or better rps; pipelined when its hit
 * p99 is clearly lower, or multiplexed costs rps without buying hit latency; trade-off when
 * multiplexed buys hit latency with rps; otherwise either.
 */
export const pickMode = (hitP99: ReadonlyArray<number>, rps: ReadonlyArray<number>): Pick => {
  const all = (xs: ReadonlyArray<number>, ok: (x: number) => boolean) => xs.length > 0 && xs.every((x) => Number.isFinite(x) && ok(x))
  const fasterHits = all(hitP99, (x) => x <= P99_MATTERS)
  const slowerHits = all(hitP99, (x) => x >= 1 / P99_MATTERS)
  const sameRps = all(rps, (x) => x >= RPS_EQUAL)
  const lessRps = all(rps, (x) => x < RPS_EQUAL)
  if (fasterHits && sameRps) return "multiplexed"
  if (fasterHits && lessRps) return "trade-off"
  if (slowerHits || (lessRps && all(hitP99, (x) => x > P99_MATTERS))) return "pipelined"
  return "either"
}

export interface TargetVerdict {
  readonly met: boolean
  readonly hitP99Ratio: number | null
  readonly rpsRatio: number | null
  readonly text: string
}

/** The issue's target, judged on the medians of per-round ratios. */
export const judgeTarget = (c: Comparison | undefined, missShare: number, depth: number): TargetVerdict => {
  if (c === undefined) return { met: false, hitP99Ratio: null, rpsRatio: null, text: `not measured (no ${missShare * 100} % × depth ${depth} case in this run)` }
  const p = medianOf(c.hitP99)
  const r = medianOf(c.rps)
  if (p === null || r === null) return { met: false, hitP99Ratio: p, rpsRatio: r, text: "no data" }
  const latencyOk = p <= 0.1
  const rpsOk = r >= RPS_EQUAL
  const met = latencyOk && rpsOk
  const why = met
    ? "met"
    : `not met: ${latencyOk ? "" : `hit p99 ratio ${p.toFixed(3)} > 0.1`}${!latencyOk && !rpsOk ? "; " : ""}${rpsOk ? "" : `rps ratio ${r.toFixed(3)} < ${RPS_EQUAL}`}`
  return {
    met,
    hitP99Ratio: p,
    rpsRatio: r,
    text: `at ${missShare * 100} % misses, depth ${depth}: multiplexed/pipelined hit p99 ${p.toFixed(3)} (target ≤ 0.1), rps ${r.toFixed(3)} (target ≥ ${RPS_EQUAL}): ${why}`
  }
}
