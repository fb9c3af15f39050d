/**
 * Settings of `talon origin` (the origin stub), one declaration each
 * (src/config/Setting.ts): flag > `TALON_ORIGIN_*` > config file > default.
 */
import * as K from "../config/kinds.js"
import { component, setting } from "../config/Setting.js"
import { nonNegative, notBlank } from "../config/checks.js"

/** Unfinished multipart uploads and uncommitted blocks live this long. */
export const DEFAULT_UPLOAD_TTL_MS = 24 * 3600 * 1000

export interface OriginSettings {
  readonly root: string
  readonly host: string
  readonly port: number
  readonly seed: boolean
  readonly latencyMs: number
  readonly latencyTail: "none" | "lognormal" | "pareto"
  readonly failureRate: number
  readonly failureMode: "503" | "reset" | "truncate"
  readonly bandwidth: number
  readonly faultSeed: number
  readonly uploadTtlMs: number
}

export const OriginSchema = component<OriginSettings>({
  name: "origin stub",
  summary: "`talon origin`: a local S3 and Azure Blob server over a directory, with injectable faults (for tests and demos).",
  settings: {
    root: setting(K.text, {
      env: "TALON_ORIGIN_ROOT",
      flag: "root",
      default: ".talon/origin",
      help: "Directory holding buckets/containers (one subdirectory each)",
      example: "/srv/origin",
      check: notBlank
    }),
    host: setting(K.text, {
      env: "TALON_ORIGIN_HOST",
      flag: "host",
      default: "127.0.0.1",
      help: "Interface to listen on",
      example: "0.0.0.0"
    }),
    port: setting(K.integer, {
      env: "TALON_ORIGIN_PORT",
      flag: "port",
      default: 9100,
      help: "TCP port; 0 picks a free one",
      example: "9100",
      check: (p) => (p >= 0 && p <= 65535 ? undefined : "must be in 0..65535")
    }),
    seed: setting(K.boolean, {
      env: "TALON_ORIGIN_SEED",
      flag: "seed",
      presence: true,
      default: false,
      help: "Create bucket/container `talon` with sample objects (kept if already present)",
      example: "true"
    }),
    latencyMs: setting(K.number, {
      env: "TALON_ORIGIN_LATENCY_MS",
      flag: "latency-ms",
      default: 0,
      help: "Injected per-request latency: the fixed delay, or the median/minimum of --latency-tail, in ms",
      example: "20",
      check: nonNegative
    }),
    latencyTail: setting(K.oneOf("none", "lognormal", "pareto"), {
      env: "TALON_ORIGIN_LATENCY_TAIL",
      flag: "latency-tail",
      default: "none",
      help: "Heavy-tailed latency: lognormal (sigma 1) or pareto (alpha 1.5) around --latency-ms",
      example: "lognormal"
    }),
    failureRate: setting(K.number, {
      env: "TALON_ORIGIN_FAILURE_RATE",
      flag: "failure-rate",
      default: 0,
      help: "Fraction of requests that fail",
      example: "0.01",
      check: (r) => (r >= 0 && r <= 1 ? undefined : "must be a fraction in 0..1")
    }),
    failureMode: setting(K.oneOf("503", "reset", "truncate"), {
      env: "TALON_ORIGIN_FAILURE_MODE",
      flag: "failure-mode",
      default: "503",
      help: "503 SlowDown/ServerBusy, a TCP reset, or (GETs) a body cut off halfway",
      example: "reset"
    }),
    bandwidth: setting(K.size, {
      env: "TALON_ORIGIN_BANDWIDTH",
      flag: "bandwidth",
      default: 0,
      help: "Per-response body rate cap in bytes/s (0 = unlimited; K/M/G suffixes)",
      example: "100M"
    }),
    faultSeed: setting(K.integer, {
      env: "TALON_ORIGIN_FAULT_SEED",
      flag: "fault-seed",
      default: 1,
      help: "Seed of the fault injection's random choices",
      example: "7"
    }),
    uploadTtlMs: setting(K.integer, {
      env: "TALON_ORIGIN_UPLOAD_TTL_MS",
      flag: "upload-ttl-ms",
      default: DEFAULT_UPLOAD_TTL_MS,
      help: "Unfinished multipart uploads and uncommitted blocks are dropped after this long, in ms",
      example: "3600000",
      check: (n) => (n > 0 ? undefined : "must be positive")
    })
  }
})
