/**
 * Injected faults for benches and tests, all off by default: per-request latency
 * (fixed or heavy-tailed), a failure rate (503 SlowDown/ServerBusy or a TCP reset)
 * and a per-response bandwidth cap. Random draws come from a seeded generator so a
 * bench run is reproducible.
 */
import { Schema } from "effect"

const NonNegative = Schema.Number.pipe(Schema.finite(), Schema.nonNegative())

export const LatencyModel = Schema.Union(
  Schema.Struct({ kind: Schema.Literal("none") }),
  Schema.Struct({ kind: Schema.Literal("fixed"), ms: NonNegative }),
  /** Median `medianMs`, spread `sigma` (of the underlying normal); optionally capped. */
  Schema.Struct({
    kind: Schema.Literal("lognormal"),
    medianMs: NonNegative,
    sigma: NonNegative,
    maxMs: Schema.optional(NonNegative)
  }),
  /** Pareto with scale `minMs` and shape `alpha` (smaller alpha, heavier tail); optionally capped. */
  Schema.Struct({
    kind: Schema.Literal("pareto"),
    minMs: NonNegative,
    alpha: Schema.Number.pipe(Schema.finite(), Schema.positive()),
    maxMs: Schema.optional(NonNegative)
  })
)
export type LatencyModel = typeof LatencyModel.Type

export const RequestKind = Schema.Literal("head", "get", "list", "put", "delete", "other")
export type RequestKind = typeof RequestKind.Type

export const Faults = Schema.Struct({
  latency: LatencyModel,
  /** Probability in [0, 1] that a request fails. */
  failureRate: Schema.Number.pipe(Schema.between(0, 1)),
  /**
   * `503`: SlowDown (S3) / ServerBusy (Azure); `reset`: the TCP connection is reset
   * before any response; `truncate`: a GET sends its headers and half its body, then
   * the connection is reset (other requests are reset outright).
   */
  failureMode: Schema.Literal("503", "reset", "truncate"),
  /** Per-response body rate cap in bytes/s; 0 = unlimited. */
  bandwidthBytesPerSec: NonNegative,
  /** Request kinds the faults apply to; empty = all. */
  kinds: Schema.Array(RequestKind),
  seed: Schema.Int
})
export type Faults = typeof Faults.Type

/** What `POST /_talon/faults` and `setFaults` accept: any subset, merged over the current faults. */
export const FaultsPatch = Schema.partial(Faults)
export type FaultsPatch = typeof FaultsPatch.Type

export const noFaults: Faults = {
  latency: { kind: "none" },
  failureRate: 0,
  failureMode: "503",
  bandwidthBytesPerSec: 0,
  kinds: [],
  seed: 1
}

/** mulberry32: tiny, fast, good enough for fault draws. */
export const seededRandom = (seed: number): (() => number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export const sampleLatencyMs = (model: LatencyModel, random: () => number): number => {
  switch (model.kind) {
    case "none":
      return 0
    case "fixed":
      return model.ms
    case "lognormal": {
      // Box–Muller; 1 - u keeps the log argument in (0, 1].
      const z = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random())
      const v = model.medianMs * Math.exp(model.sigma * z)
      return model.maxMs === undefined ? v : Math.min(v, model.maxMs)
    }
    case "pareto": {
      const v = model.minMs / Math.pow(1 - random(), 1 / model.alpha)
      return model.maxMs === undefined ? v : Math.min(v, model.maxMs)
    }
  }
}

/** The live fault state of one server: current settings plus its generator. */
export class FaultState {
  private random: () => number
  constructor(private current: Faults) {
    this.random = seededRandom(current.seed)
  }
  get faults(): Faults {
    return this.current
  }
  update(patch: FaultsPatch): Faults {
    this.current = { ...this.current, ...patch }
    if (patch.seed !== undefined || patch.latency !== undefined || patch.failureRate !== undefined) {
      this.random = seededRandom(this.current.seed)
    }
    return this.current
  }
  applies(kind: RequestKind): boolean {
    return this.current.kinds.length === 0 || this.current.kinds.includes(kind)
  }
  latencyMs(): number {
    return sampleLatencyMs(this.current.latency, this.random)
  }
  shouldFail(): boolean {
    return this.current.failureRate > 0 && this.random() < this.current.failureRate
  }
}
