/**
 * The throughput and latency numbers every load client prints in its JSON line
 * (pound and loadgen alike), under the names both use.
 */

export interface LoadLatency {
  readonly rps: number
  readonly mib_s: number
  readonly p50_us: number
  readonly p99_us: number
  readonly p999_us: number
  readonly max_us: number
  readonly samples: number
  readonly errors: number
}

/** Those numbers read through `get` (which decides what a missing field becomes). */
export const latencyFrom = (get: (field: keyof LoadLatency) => number): LoadLatency => ({
  rps: get("rps"),
  mib_s: get("mib_s"),
  p50_us: get("p50_us"),
  p99_us: get("p99_us"),
  p999_us: get("p999_us"),
  max_us: get("max_us"),
  samples: get("samples"),
  errors: get("errors")
})
