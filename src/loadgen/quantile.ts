/**
 * The one quantile definition of loadgen reports and every benchmark driver: nearest rank,
 * the definition HdrHistogram's `getValueAtPercentile` uses. The q-quantile of n values is the
 * value of rank `max(1, ⌈q·n⌉)` in ascending order: always a value that was measured (never an
 * interpolation between two), the median of an even count is the lower middle one, q = 0 is
 * the minimum and q = 1 the maximum. Loadgen's latencies come from HdrHistogram
 * (`histogram.ts`), which answers the same rank at its 3-significant-digit resolution.
 */

/** The 1-based rank of the q-quantile among `n` values (n ≥ 1, 0 ≤ q ≤ 1). */
export const nearestRank = (n: number, q: number): number => {
  const x = q * n
  // q·n lands one ulp above an integer for some q (0.1 × 30 = 3.0000000000000004), which must not
  // push the rank up a whole step; HdrHistogram subtracts one ulp for the same reason.
  return Math.min(n, Math.max(1, Math.ceil(x - Number.EPSILON * Math.max(1, x))))
}

/** The q-quantile of ascending `sorted`; NaN when it is empty. */
export const quantile = (sorted: ReadonlyArray<number>, q: number): number =>
  sorted.length === 0 ? NaN : sorted[nearestRank(sorted.length, Math.min(1, Math.max(0, q))) - 1]!

/** Ascending copy of the finite values. */
export const sortedFinite = (values: ReadonlyArray<number>): Array<number> => values.filter(Number.isFinite).sort((a, b) => a - b)

/** Median, min/max and quartiles of a sample; `q1`/`q3` bound the interquartile range. */
export interface Spread {
  readonly n: number
  readonly median: number
  readonly min: number
  readonly max: number
  readonly q1: number
  readonly q3: number
}

/** Median, min/max and quartiles of the finite values; `n` 0 (and NaN fields) when there are none. */
export const spread = (values: ReadonlyArray<number>): Spread => {
  const s = sortedFinite(values)
  if (s.length === 0) return { n: 0, median: NaN, min: NaN, max: NaN, q1: NaN, q3: NaN }
  return { n: s.length, median: quantile(s, 0.5), min: s[0]!, max: s[s.length - 1]!, q1: quantile(s, 0.25), q3: quantile(s, 0.75) }
}

export const median = (values: ReadonlyArray<number>): number => spread(values).median
