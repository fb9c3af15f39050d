/**
 * One GCRA meter (Generic Cell Rate Algorithm), Talon's `Gcra`: its whole state is the
 * theoretical arrival time (TAT). A charge of `cost` units moves the TAT `cost / rate` seconds
 * later; it is admitted while the TAT stays within the burst window (`burstRatio` seconds) of
 * now. A refused charge leaves the meter as it was, so a caller that waits the returned delay
 * and retries is charged once. Time is the caller's monotonic milliseconds: no allocation, no
 * clock read here (the hot path reads the clock once per request).
 */

export interface RateLimit {
  /** Sustained ceiling, units per second (requests, or bytes). */
  readonly rate: number
  /** Burst window in seconds: `rate * burstRatio` units may arrive at once. */
  readonly burstRatio: number
}

export class Gcra {
  /** Theoretical arrival time, in the caller's milliseconds. */
  private tat = 0
  private readonly msPerUnit: number
  private readonly toleranceMs: number

  constructor(limit: RateLimit) {
    this.msPerUnit = 1000 / Math.max(limit.rate, Number.MIN_VALUE)
    this.toleranceMs = Math.max(limit.burstRatio, 0) * 1000
  }

  /** 0 when `cost` is admitted at `nowMs` (and charged), else the ms until it would be. */
  check(cost: number, nowMs: number): number {
    if (cost <= 0) return 0
    const increment = cost * this.msPerUnit
    // A single charge larger than the burst is admitted from an idle meter (then paces), as in
    // Talon: otherwise it would be refused forever with a retry hint that never comes true.
    const ceiling = increment > this.toleranceMs ? increment : this.toleranceMs
    const next = (this.tat > nowMs ? this.tat : nowMs) + increment
    const backlog = next - nowMs
    // A nanosecond of slack: sums of fractional intervals must not refuse the last unit of a burst.
    if (backlog <= ceiling + 1e-6) return 0
    return backlog - ceiling
  }

  /** Charges what `check` admitted (split so two meters can both be checked before either moves). */
  charge(cost: number, nowMs: number): void {
    if (cost <= 0) return
    this.tat = (this.tat > nowMs ? this.tat : nowMs) + cost * this.msPerUnit
  }
}
