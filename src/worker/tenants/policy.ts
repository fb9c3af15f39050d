/**
 * The per-tenant rate-limit policy of a worker, in Talon's `[rate_limits]` shape:
 *
 *   enabled = true
 *   default = { read_iops = { rate = 1000, burst_ratio = 2.0 } }     # every tenant, and untagged reads
 *   [overrides.acme]
 *   read_throughput = { rate = 104857600 }                          # bytes/s; burst_ratio defaults to 1.0
 *
 * Here it is the worker setting `rate_limits` (TALON_WORKER_RATE_LIMITS): a `[worker.rate_limits]`
 * table in the config file, or the same as JSON in the variable or `--rate-limits`. Unknown keys
 * are refused (as Talon's `deny_unknown_fields`), so a typo cannot silently leave a tenant unlimited.
 */
import { Either } from "effect"
import { parseSize } from "../../core/size.js"
import type { RateLimit } from "./gcra.js"

export interface MetricLimits {
  /** Read requests admitted per second. */
  readonly readIops?: RateLimit | undefined
  /** Bytes per second served to the client. */
  readonly readThroughput?: RateLimit | undefined
}

export interface RateLimitPolicy {
  readonly enabled: boolean
  /** Limits of every tenant without an override, and of reads that name no tenant (Talon's Unattributed). */
  readonly default: MetricLimits
  readonly overrides: Readonly<Record<string, MetricLimits>>
}

export const NO_RATE_LIMITS: RateLimitPolicy = { enabled: false, default: {}, overrides: {} }

export const isEmpty = (m: MetricLimits): boolean => m.readIops === undefined && m.readThroughput === undefined

const isTable = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

const unknownKeys = (t: Record<string, unknown>, allowed: ReadonlyArray<string>, where: string): string | undefined => {
  const extra = Object.keys(t).filter((k) => !allowed.includes(k))
  return extra.length === 0 ? undefined : `${where}: unknown key ${extra.map((k) => JSON.stringify(k)).join(", ")} (expected ${allowed.join(", ")})`
}

const limitOf = (v: unknown, where: string, bytes: boolean): Either.Either<RateLimit, string> => {
  if (!isTable(v)) return Either.left(`${where} must be a table like { rate = 1000, burst_ratio = 1.0 }`)
  const bad = unknownKeys(v, ["rate", "burst_ratio"], where)
  if (bad !== undefined) return Either.left(bad)
  let rate: number
  if (typeof v.rate === "number") rate = v.rate
  else if (bytes && typeof v.rate === "string") {
    const parsed = parseSize(v.rate)
    if (Either.isLeft(parsed)) return Either.left(`${where}.rate: ${parsed.left}`)
    rate = parsed.right
  } else return Either.left(`${where}.rate must be a number${bytes ? " of bytes per second (or a size such as \"100M\")" : " of requests per second"}`)
  if (!Number.isFinite(rate) || rate <= 0) return Either.left(`${where}.rate must be positive (leave the metric out for no limit), got ${rate}`)
  const burstRatio = v.burst_ratio === undefined ? 1 : v.burst_ratio
  if (typeof burstRatio !== "number" || !Number.isFinite(burstRatio) || burstRatio <= 0) {
    return Either.left(`${where}.burst_ratio must be a finite number of seconds above 0, got ${JSON.stringify(v.burst_ratio)}`)
  }
  return Either.right({ rate, burstRatio })
}

const limitsOf = (v: unknown, where: string): Either.Either<MetricLimits, string> => {
  if (!isTable(v)) return Either.left(`${where} must be a table of read_iops and/or read_throughput`)
  const bad = unknownKeys(v, ["read_iops", "read_throughput"], where)
  if (bad !== undefined) return Either.left(bad)
  const iops = v.read_iops === undefined ? Either.right(undefined) : limitOf(v.read_iops, `${where}.read_iops`, false)
  if (Either.isLeft(iops)) return Either.left(iops.left)
  const bytes = v.read_throughput === undefined ? Either.right(undefined) : limitOf(v.read_throughput, `${where}.read_throughput`, true)
  if (Either.isLeft(bytes)) return Either.left(bytes.left)
  return Either.right({ readIops: iops.right, readThroughput: bytes.right })
}

/** A policy from its parsed table (what a config file holds), or what is wrong with it. */
export const policyOf = (doc: unknown): Either.Either<RateLimitPolicy, string> => {
  if (!isTable(doc)) return Either.left("rate_limits must be a table with enabled, default and overrides")
  const bad = unknownKeys(doc, ["enabled", "default", "overrides"], "rate_limits")
  if (bad !== undefined) return Either.left(bad)
  if (doc.enabled !== undefined && typeof doc.enabled !== "boolean") return Either.left("rate_limits.enabled must be true or false")
  const def = doc.default === undefined ? Either.right({}) : limitsOf(doc.default, "rate_limits.default")
  if (Either.isLeft(def)) return Either.left(def.left)
  const overrides: Record<string, MetricLimits> = {}
  if (doc.overrides !== undefined) {
    if (!isTable(doc.overrides)) return Either.left("rate_limits.overrides must be a table of tenant name → limits")
    for (const [name, v] of Object.entries(doc.overrides)) {
      if (name === "" || new TextEncoder().encode(name).length > 256) return Either.left(`rate_limits.overrides: tenant name ${JSON.stringify(name)} must be 1..256 bytes`)
      const limits = limitsOf(v, `rate_limits.overrides.${name}`)
      if (Either.isLeft(limits)) return Either.left(limits.left)
      overrides[name] = limits.right
    }
  }
  // Talon's default is off: a table without `enabled` configures limits but does not apply them.
  return Either.right({ enabled: doc.enabled === true, default: def.right, overrides })
}

/** The setting's text (JSON, or a config file's table rendered as JSON); empty or `off` = no limits. */
export const parsePolicy = (text: string): Either.Either<RateLimitPolicy, string> => {
  const t = text.trim()
  if (t === "" || t === "off") return Either.right(NO_RATE_LIMITS)
  let doc: unknown
  try {
    doc = JSON.parse(t)
  } catch (e) {
    return Either.left(`expected a [worker.rate_limits] table, or it as JSON, e.g. {"enabled":true,"default":{"read_iops":{"rate":1000}}} (${(e as Error).message})`)
  }
  return policyOf(doc)
}

const limitText = (l: RateLimit) => ({ rate: l.rate, burst_ratio: l.burstRatio })
const limitsText = (m: MetricLimits) => ({
  ...(m.readIops === undefined ? {} : { read_iops: limitText(m.readIops) }),
  ...(m.readThroughput === undefined ? {} : { read_throughput: limitText(m.readThroughput) })
})

export const showPolicy = (p: RateLimitPolicy): string =>
  !p.enabled && isEmpty(p.default) && Object.keys(p.overrides).length === 0
    ? "off"
    : JSON.stringify({
        enabled: p.enabled,
        default: limitsText(p.default),
        overrides: Object.fromEntries(Object.entries(p.overrides).map(([k, v]) => [k, limitsText(v)]))
      })
