/**
 * The Prometheus text format (0.0.4), hand-rendered: every component keeps plain counters
 * its own code bumps (no metrics library on the serve loop) and renders them here when
 * scraped. Talon's metric families (its talon-observability contract) are rendered with
 * its names, types, labels and units, beside this project's own.
 */

/** Request-latency bucket bounds, seconds: fine below a millisecond, where a cache hit lives. */
export const LATENCY_BUCKETS: ReadonlyArray<number> = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10
]

/** Label pairs in a fixed order; values escaped. */
export type Labels = ReadonlyArray<readonly [string, string]>

const escapeLabel = (v: string): string => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")

export const labelText = (labels: Labels, extra?: readonly [string, string]): string => {
  const all = extra === undefined ? labels : [...labels, extra]
  return all.length === 0 ? "" : `{${all.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}`
}

/**
 * Observations by bucket (each counted once, in the first bucket that holds it; the last
 * slot is +Inf), rendered cumulative. Another source's counts (the native hit table's)
 * can be added at render time with `plus`.
 */
export class Histogram {
  readonly counts: Float64Array
  sum = 0
  constructor(readonly bounds: ReadonlyArray<number> = LATENCY_BUCKETS) {
    this.counts = new Float64Array(bounds.length + 1)
  }
  observe(seconds: number): void {
    this.sum += seconds
    const b = this.bounds
    let i = 0
    while (i < b.length && seconds > b[i]!) i++
    this.counts[i]!++
  }
  get count(): number {
    let n = 0
    for (const c of this.counts) n += c
    return n
  }
}

/** One family: HELP and TYPE once, then its series. */
export class Exposition {
  readonly #out: Array<string> = []
  #header(name: string, type: string, help: string) {
    this.#out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`)
  }
  counter(name: string, help: string, series: ReadonlyArray<readonly [Labels, number]>): this {
    this.#header(name, "counter", help)
    for (const [l, v] of series) this.#out.push(`${name}${labelText(l)} ${v}`)
    return this
  }
  gauge(name: string, help: string, series: ReadonlyArray<readonly [Labels, number]>): this {
    this.#header(name, "gauge", help)
    for (const [l, v] of series) this.#out.push(`${name}${labelText(l)} ${v}`)
    return this
  }
  /** `extra` holds per-series counts from elsewhere with the same bounds (added bucket by bucket). */
  histogram(
    name: string,
    help: string,
    series: ReadonlyArray<readonly [Labels, Histogram, { readonly counts: ArrayLike<number>; readonly sum: number }?]>
  ): this {
    this.#header(name, "histogram", help)
    for (const [l, h, extra] of series) {
      let cumulative = 0
      for (let i = 0; i <= h.bounds.length; i++) {
        cumulative += h.counts[i]! + (extra?.counts[i] ?? 0)
        const le = i < h.bounds.length ? String(h.bounds[i]) : "+Inf"
        this.#out.push(`${name}_bucket${labelText(l, ["le", le])} ${cumulative}`)
      }
      this.#out.push(`${name}_sum${labelText(l)} ${h.sum + (extra?.sum ?? 0)}`, `${name}_count${labelText(l)} ${cumulative}`)
    }
    return this
  }
  /** Text already in the format (a component's own families, rendered elsewhere). */
  raw(text: string): this {
    const t = text.endsWith("\n") ? text.slice(0, -1) : text
    if (t.length > 0) this.#out.push(t)
    return this
  }
  text(): string {
    return this.#out.join("\n") + "\n"
  }
}

/** Seconds from a monotonic `performance.now()` reading to now. */
export const secondsSince = (startMs: number): number => (performance.now() - startMs) / 1000
