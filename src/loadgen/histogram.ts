/**
 * Latency histograms (HdrHistogram, microseconds, 3 significant digits): one per
 * thread and kind while running, merged in the main thread afterwards.
 */
import hdr from "hdr-histogram-js"

export type Histogram = hdr.Histogram

export const newHistogram = (): Histogram =>
  hdr.build({ bitBucketSize: 64, numberOfSignificantValueDigits: 3, useWebAssembly: false, autoResize: true })

/** Merges compressed per-thread histograms into one. */
export const mergeEncoded = (encoded: ReadonlyArray<string>): Histogram => {
  const total = newHistogram()
  for (const e of encoded) total.add(hdr.decodeFromCompressedBase64(e, 64, false))
  return total
}

export interface LatencySummary {
  readonly p50_us: number
  readonly p90_us: number
  readonly p99_us: number
  readonly p999_us: number
  readonly max_us: number
}

/**
 * Percentiles in µs; all null when the histogram is empty. HdrHistogram's percentile is the
 * nearest-rank one of quantile.ts (tested to agree wherever the histogram is exact).
 */
export const latencySummary = (h: Histogram): { [K in keyof LatencySummary]: number | null } =>
  h.totalCount === 0
    ? { p50_us: null, p90_us: null, p99_us: null, p999_us: null, max_us: null }
    : {
        p50_us: h.getValueAtPercentile(50),
        p90_us: h.getValueAtPercentile(90),
        p99_us: h.getValueAtPercentile(99),
        p999_us: h.getValueAtPercentile(99.9),
        max_us: h.maxValue
      }

/** Latencies up to this many µs are counted in a flat array; longer ones are kept individually. */
const LINEAR_LIMIT_US = 1 << 20

/**
 * A recorder for the hot loop: one array increment per sample (1 µs buckets up to
 * ~1 s, like pound's), poured into an HdrHistogram once at the end. HdrHistogram's
 * own recordValue costs a log2 and a pow per sample, which shows at 10⁵ samples/s.
 */
export class LinearRecorder {
  private readonly counts = new Uint32Array(LINEAR_LIMIT_US)
  private readonly overflow: Array<number> = []
  total = 0

  record(us: number): void {
    this.total++
    if (us < LINEAR_LIMIT_US) this.counts[us]!++
    else this.overflow.push(us)
  }

  toHistogram(): Histogram {
    const h = newHistogram()
    const counts = this.counts
    for (let i = 0; i < counts.length; i++) if (counts[i] !== 0) h.recordValueWithCount(i, counts[i]!)
    for (const v of this.overflow) h.recordValue(v)
    return h
  }
}
