/**
 * The management page's recent past: a ring of samples of every worker's request and
 * cache counters, as their status heartbeats report them (the same counters the
 * coordinator's /metrics exposes), so the page shows rates over the last minutes without
 * a metrics server. Owned by one sampling fiber (./sampler.ts); plain data behind it.
 */

/** One worker's counters at one sample. */
export interface NodeCounters {
  readonly requests: number
  readonly hits: number
  readonly misses: number
}

export interface Sample {
  readonly atMs: number
  readonly nodes: ReadonlyMap<string, NodeCounters>
}

/** Cluster-wide rates between two consecutive samples; `hitRatio` null when no lookup happened. */
export interface Point {
  readonly atMs: number
  readonly requestsPerSec: number
  readonly hitRatio: number | null
}

export interface Rates {
  readonly requestsPerSec: number
  readonly hitRatio: number | null
}

/** A counter that went down belongs to a restarted node: what it counts now all happened since. */
const grown = (before: number, after: number) => (after >= before ? after - before : after)

/** What a worker counted between two samples; one first seen in `b` counted nothing yet. */
const growth = (a: NodeCounters | undefined, b: NodeCounters): NodeCounters => ({
  requests: grown(a?.requests ?? b.requests, b.requests),
  hits: grown(a?.hits ?? b.hits, b.hits),
  misses: grown(a?.misses ?? b.misses, b.misses)
})

const ratesOf = (requests: number, hits: number, misses: number, seconds: number): Rates => ({
  requestsPerSec: seconds > 0 ? requests / seconds : 0,
  hitRatio: hits + misses > 0 ? hits / (hits + misses) : null
})

export class History {
  readonly #samples: Array<Sample> = []

  constructor(readonly capacity: number) {}

  record(sample: Sample): void {
    this.#samples.push(sample)
    if (this.#samples.length > this.capacity) this.#samples.shift()
  }

  get size(): number {
    return this.#samples.length
  }

  /** One point per pair of consecutive samples, oldest first. */
  points(): ReadonlyArray<Point> {
    const out: Array<Point> = []
    for (let i = 1; i < this.#samples.length; i++) {
      const a = this.#samples[i - 1]!
      const b = this.#samples[i]!
      let requests = 0
      let hits = 0
      let misses = 0
      for (const [id, now] of b.nodes) {
        const d = growth(a.nodes.get(id), now)
        requests += d.requests
        hits += d.hits
        misses += d.misses
      }
      out.push({ atMs: b.atMs, ...ratesOf(requests, hits, misses, (b.atMs - a.atMs) / 1000) })
    }
    return out
  }

  /** A worker's rates over the last `windowMs` of samples that include it. */
  ratesOf(id: string, windowMs: number): Rates {
    const last = this.#samples.at(-1)
    const now = last?.nodes.get(id)
    if (last === undefined || now === undefined) return { requestsPerSec: 0, hitRatio: null }
    let first: Sample = last
    for (let i = this.#samples.length - 2; i >= 0; i--) {
      const s = this.#samples[i]!
      if (last.atMs - s.atMs > windowMs || !s.nodes.has(id)) break
      first = s
    }
    const d = growth(first.nodes.get(id), now)
    return ratesOf(d.requests, d.hits, d.misses, (last.atMs - first.atMs) / 1000)
  }
}
