/**
 * The GCRA meter, the policy's parser and the limiter on an explicit clock: Talon's own
 * cases (a burst then a 100 ms hint, refill, burst ratio, byte costs, zero and oversized
 * costs), a property that no schedule of charges ever gets more than rate × time + burst
 * admitted, the `[worker.rate_limits]` table of a TOML config file, and the limiter's tenant
 * and label bounds.
 */
import { Either } from "effect"
import fc from "fast-check"
import { parse as parseToml } from "smol-toml"
import { describe, expect, it } from "vitest"
import { flattenConfig } from "../../../src/cli/configFile.js"
import { Gcra } from "../../../src/worker/tenants/gcra.js"
import { parsePolicy, policyOf, showPolicy } from "../../../src/worker/tenants/policy.js"
import { MAX_LABELS, MAX_TENANTS, rateLimitedMessage, TenantLimiter } from "../../../src/worker/tenants/TenantLimiter.js"
import { DataErrorCode, decodeErrorPayload, encodeTypedErrorPayload, retryAfterMs } from "../../../src/protocol/index.js"

/** Admits at `now`: check, then charge (as the limiter does). */
const take = (g: Gcra, cost: number, now: number): number => {
  const wait = g.check(cost, now)
  if (wait === 0) g.charge(cost, now)
  return wait
}

describe("Gcra", () => {
  it("admits a full burst, then refuses with one emission interval as the hint", () => {
    const g = new Gcra({ rate: 10, burstRatio: 1 })
    for (let i = 0; i < 10; i++) expect(take(g, 1, 0)).toBe(0)
    expect(take(g, 1, 0)).toBeCloseTo(100, 6)
  })

  it("refills at the rate; a refusal charges nothing", () => {
    const g = new Gcra({ rate: 10, burstRatio: 1 })
    for (let i = 0; i < 10; i++) take(g, 1, 0)
    expect(take(g, 1, 99.9)).toBeGreaterThan(0)
    expect(take(g, 1, 99.9)).toBeGreaterThan(0)
    expect(take(g, 1, 100)).toBe(0)
  })

  it("burst ratio scales the burst; byte costs count as units; zero costs are free", () => {
    const g = new Gcra({ rate: 10, burstRatio: 2 })
    for (let i = 0; i < 20; i++) expect(take(g, 1, 0)).toBe(0)
    expect(take(g, 1, 0)).toBeGreaterThan(0)
    expect(take(g, 0, 0)).toBe(0)
    const b = new Gcra({ rate: 1000, burstRatio: 1 })
    expect(take(b, 1000, 0)).toBe(0)
    expect(take(b, 1, 0)).toBeGreaterThan(0)
    expect(take(b, 1000, 1000)).toBe(0)
  })

  it("admits one oversized cost from idle, then paces with a hint that comes true", () => {
    const g = new Gcra({ rate: 10, burstRatio: 1 })
    expect(take(g, 25, 0)).toBe(0)
    const wait = take(g, 25, 0)
    expect(wait).toBeCloseTo(2500, 6)
    expect(take(g, 25, wait - 1)).toBeGreaterThan(0)
    expect(take(g, 25, wait)).toBe(0)
  })

  it("never admits more than rate × elapsed + burst (+ one cost) over any schedule", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10_000 }),
        fc.double({ min: 0.01, max: 10, noNaN: true }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 500 }), fc.integer({ min: 0, max: 2_000 })), { maxLength: 300 }),
        (rate, burstRatio, steps) => {
          const g = new Gcra({ rate, burstRatio })
          let now = 0
          let admitted = 0
          let largest = 0
          for (const [dt, cost] of steps) {
            now += dt
            if (take(g, cost, now) === 0) {
              admitted += cost
              largest = Math.max(largest, cost)
            }
          }
          return admitted <= (rate * now) / 1000 + rate * burstRatio + largest + 1e-6
        }
      )
    )
  })
})

describe("rate_limits policy", () => {
  it("reads Talon's [rate_limits] shape as a [worker.rate_limits] table of a TOML config file", () => {
    const doc = parseToml(`
[worker]
capacity = "1G"
[worker.rate_limits]
enabled = true
[worker.rate_limits.default]
read_iops = { rate = 1000, burst_ratio = 2.0 }
[worker.rate_limits.overrides.acme]
read_throughput = { rate = 1048576 }
[worker.rate_limits.overrides.beta]
read_throughput = { rate = "100M", burst_ratio = 0.5 }
`)
    const flat = flattenConfig(doc)
    if ("error" in flat) throw new Error(flat.error)
    const policy = parsePolicy(flat.settings.get("TALON_WORKER_RATE_LIMITS")!)
    expect(policy).toEqual(
      Either.right({
        enabled: true,
        default: { readIops: { rate: 1000, burstRatio: 2 }, readThroughput: undefined },
        overrides: {
          acme: { readIops: undefined, readThroughput: { rate: 1048576, burstRatio: 1 } },
          beta: { readIops: undefined, readThroughput: { rate: 100 * 1024 * 1024, burstRatio: 0.5 } }
        }
      })
    )
    // What the docs show parses back to the same policy.
    expect(parsePolicy(showPolicy(Either.getOrThrow(policy)))).toEqual(policy)
  })

  it("refuses what Talon refuses, naming the key", () => {
    const bad = (doc: unknown) => Either.getLeft(policyOf(doc)).pipe((o) => (o._tag === "Some" ? o.value : "accepted"))
    expect(bad({ enabled: true, default: { read_iops: { rate: 0 } } })).toContain("rate_limits.default.read_iops.rate must be positive")
    expect(bad({ enabled: true, default: { read_iops: { rate: 1, burst_ratio: 0 } } })).toContain("burst_ratio")
    expect(bad({ enabled: true, defaults: {} })).toContain(`unknown key "defaults"`)
    expect(bad({ overrides: { acme: { read_iop: { rate: 1 } } } })).toContain(`rate_limits.overrides.acme: unknown key "read_iop"`)
    expect(bad({ enabled: "yes" })).toContain("enabled must be true or false")
    expect(parsePolicy("off")).toEqual(Either.right({ enabled: false, default: {}, overrides: {} }))
    expect(Either.isLeft(parsePolicy("{not json"))).toBe(true)
  })
})

describe("TenantLimiter", () => {
  const iops = (rate: number, burstRatio = 1) => ({ readIops: { rate, burstRatio } })

  it("keeps tenants apart, charges untagged reads to the default, and lets overrides win", () => {
    let now = 0
    const l = new TenantLimiter({ enabled: true, default: iops(1), overrides: { vip: iops(3) } }, () => now)
    expect(l.admit("a", 10)).toBe(0)
    expect(l.admit("b", 10)).toBe(0)
    expect(l.admit("a", 10)).toBeGreaterThan(0)
    expect(l.lastMetric).toBe("read_iops")
    expect(l.admit(undefined, 10)).toBe(0)
    expect(l.admit(undefined, 10)).toBeGreaterThan(0)
    expect([l.admit("vip", 1), l.admit("vip", 1), l.admit("vip", 1)]).toEqual([0, 0, 0])
    expect(l.admit("vip", 1)).toBeGreaterThan(0)
    now = 1000
    expect(l.admit("a", 10)).toBe(0)
    expect(l.limitsUntagged).toBe(true)
  })

  it("a refused byte charge does not spend the request meter", () => {
    const l = new TenantLimiter({ enabled: true, default: { readIops: { rate: 2, burstRatio: 1 }, readThroughput: { rate: 100, burstRatio: 1 } }, overrides: {} }, () => 0)
    expect(l.admit("t", 100)).toBe(0)
    expect(l.admit("t", 50)).toBeGreaterThan(0)
    expect(l.lastMetric).toBe("read_throughput")
    // The second request slot is still there for a read that fits (none does at t=0 but a zero-byte one).
    expect(l.admit("t", 0)).toBe(0)
    expect(l.admit("t", 0)).toBeGreaterThan(0)
  })

  it("bounds its records and its metric labels", () => {
    const l = new TenantLimiter({ enabled: true, default: iops(1), overrides: {} }, () => 0)
    for (let i = 0; i < MAX_TENANTS + 100; i++) l.admit(`t${i}`, 1)
    const labels = l.byLabel()
    expect(labels.size).toBeLessThanOrEqual(MAX_LABELS + 1)
    const total = [...labels.values()].reduce((n, c) => n + c.admitted + c.limited, 0)
    expect(total).toBe(MAX_TENANTS + 100)
    // Tenants past the cap share the overflow record's default limits: the first is admitted, the rest are not.
    expect(l.admit("late-1", 1)).toBeGreaterThan(0)
  })
})

describe("the RateLimited reply", () => {
  it("round-trips through Talon's typed envelope with its retry hint; the hint reader never throws", () => {
    fc.assert(
      fc.property(fc.constantFrom("read_iops" as const, "read_throughput" as const), fc.double({ min: 0.001, max: 1e9, noNaN: true }), (metric, wait) => {
        const decoded = decodeErrorPayload(encodeTypedErrorPayload(DataErrorCode.RateLimited, rateLimitedMessage(metric, wait)))
        return decoded.code === DataErrorCode.RateLimited && decoded.message.includes(metric) && retryAfterMs(decoded.message) === Math.ceil(wait)
      })
    )
    fc.assert(fc.property(fc.string(), (s) => { const r = retryAfterMs(s); return r === undefined || Number.isFinite(r) }))
  })
})
