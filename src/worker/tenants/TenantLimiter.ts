/**
 * Per-tenant rate limits on a worker's read path (Talon's `TenantRateLimiter`): every range
 * read is charged one request and its length in bytes against its tenant's meters; a read
 * that names no tenant (types 2 and 6) is charged to the unattributed tenant under the default
 * limits, as Talon does, so untagged traffic cannot escape the policy.
 *
 * The hit path calls `admit` once per request: a Map lookup by the tenant's name and a few
 * float operations, no allocation (a tenant's record is made the first time it is seen). At
 * most MAX_TENANTS records are kept; later tenants share one overflow record with the default
 * limits (Talon's rule), so a client inventing names cannot grow the worker's memory.
 *
 * Each record also counts admitted and limited requests and bytes for /metrics, under a label
 * of its own for the first MAX_LABELS tenants (configured overrides first) and `other` after.
 */
import { type Gcra as GcraT, Gcra } from "./gcra.js"
import { isEmpty, type MetricLimits, type RateLimitPolicy } from "./policy.js"

export const MAX_TENANTS = 4096
export const MAX_LABELS = 64
export const UNATTRIBUTED = "unattributed"
export const OTHER = "other"

export type RateMetric = "read_iops" | "read_throughput"

export class TenantRecord {
  readonly iops: GcraT | undefined
  readonly bytes: GcraT | undefined
  admitted = 0
  admittedBytes = 0
  limited = 0
  constructor(
    limits: MetricLimits,
    readonly label: string
  ) {
    this.iops = limits.readIops === undefined ? undefined : new Gcra(limits.readIops)
    this.bytes = limits.readThroughput === undefined ? undefined : new Gcra(limits.readThroughput)
  }
}

export class TenantLimiter {
  readonly #tenants = new Map<string, TenantRecord>()
  readonly #unattributed: TenantRecord
  readonly #overflow: TenantRecord
  readonly #labels = new Set<string>()
  /** After a refusal: which meter refused (the reply names it). */
  lastMetric: RateMetric = "read_iops"
  /** Refusals by metric, for /metrics (Talon's `talon_worker_rate_limited_total{metric}`). */
  limitedIops = 0
  limitedBytes = 0

  constructor(
    readonly policy: RateLimitPolicy,
    /** Monotonic milliseconds (performance.now in production; a test's own clock in tests). */
    private readonly now: () => number
  ) {
    this.#unattributed = new TenantRecord(policy.default, UNATTRIBUTED)
    this.#overflow = new TenantRecord(policy.default, OTHER)
    this.#labels.add(UNATTRIBUTED)
    for (const name of Object.keys(policy.overrides)) this.#record(name)
  }

  /** Whether plain reads (no tenant) are limited: then nothing may answer them without `admit`. */
  get limitsUntagged(): boolean {
    return this.policy.enabled && !isEmpty(this.policy.default)
  }

  /**
   * Charges one read of `bytes` to `tenant` (undefined = unattributed): 0 when admitted, else the
   * milliseconds until it would be (nothing is charged then; `lastMetric` names the meter).
   */
  admit(tenant: string | undefined, bytes: number): number {
    const r = tenant === undefined ? this.#unattributed : (this.#tenants.get(tenant) ?? this.#record(tenant))
    if (r.iops !== undefined || r.bytes !== undefined) {
      const now = this.now()
      const waitIops = r.iops === undefined ? 0 : r.iops.check(1, now)
      if (waitIops > 0) return this.#refuse(r, "read_iops", waitIops)
      const waitBytes = r.bytes === undefined ? 0 : r.bytes.check(bytes, now)
      if (waitBytes > 0) return this.#refuse(r, "read_throughput", waitBytes)
      r.iops?.charge(1, now)
      r.bytes?.charge(bytes, now)
    }
    r.admitted++
    r.admittedBytes += bytes
    return 0
  }

  #refuse(r: TenantRecord, metric: RateMetric, wait: number): number {
    r.limited++
    this.lastMetric = metric
    if (metric === "read_iops") this.limitedIops++
    else this.limitedBytes++
    return wait
  }

  #record(name: string): TenantRecord {
    if (this.#tenants.size >= MAX_TENANTS) return this.#overflow
    const label = this.#labels.size < MAX_LABELS ? name : OTHER
    this.#labels.add(label)
    const r = new TenantRecord(this.policy.overrides[name] ?? this.policy.default, label)
    this.#tenants.set(name, r)
    return r
  }

  /** Counters summed by label (bounded: at most MAX_LABELS + 1 series per counter). */
  byLabel(): Map<string, { admitted: number; admittedBytes: number; limited: number }> {
    const out = new Map<string, { admitted: number; admittedBytes: number; limited: number }>()
    const add = (r: TenantRecord) => {
      const c = out.get(r.label) ?? { admitted: 0, admittedBytes: 0, limited: 0 }
      c.admitted += r.admitted
      c.admittedBytes += r.admittedBytes
      c.limited += r.limited
      out.set(r.label, c)
    }
    add(this.#unattributed)
    for (const r of this.#tenants.values()) add(r)
    if (this.#overflow.admitted + this.#overflow.limited > 0) add(this.#overflow)
    return out
  }
}

/** Talon's refusal text: the meter and the retry hint (clients parse the hint: `retryAfterMs`). */
export const rateLimitedMessage = (metric: RateMetric, waitMs: number): string =>
  `tenant rate limit exceeded on ${metric}; retry after ${Math.ceil(waitMs)} ms`

const escapeLabel = (v: string): string => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")

/** The limiter's series for /metrics. */
export const renderTenantMetrics = (out: Array<string>, l: TenantLimiter | undefined): void => {
  if (l === undefined) return
  out.push(
    "# HELP talon_worker_rate_limited_total Reads refused by per-tenant rate limits, by the meter that refused.",
    "# TYPE talon_worker_rate_limited_total counter",
    `talon_worker_rate_limited_total{metric="read_iops"} ${l.limitedIops}`,
    `talon_worker_rate_limited_total{metric="read_throughput"} ${l.limitedBytes}`
  )
  const rows = [...l.byLabel()]
  out.push("# HELP talon_worker_tenant_requests_total Range reads by tenant (first 64 tenants by name, then other) and outcome.", "# TYPE talon_worker_tenant_requests_total counter")
  for (const [label, c] of rows) {
    out.push(`talon_worker_tenant_requests_total{tenant="${escapeLabel(label)}",outcome="admitted"} ${c.admitted}`)
    out.push(`talon_worker_tenant_requests_total{tenant="${escapeLabel(label)}",outcome="rate_limited"} ${c.limited}`)
  }
  out.push("# HELP talon_worker_tenant_bytes_total Bytes of admitted range reads by tenant.", "# TYPE talon_worker_tenant_bytes_total counter")
  for (const [label, c] of rows) out.push(`talon_worker_tenant_bytes_total{tenant="${escapeLabel(label)}"} ${c.admittedBytes}`)
}
