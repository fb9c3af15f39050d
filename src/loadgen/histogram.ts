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

/** Percentiles in µs; all null when the histogram is empty. */
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
