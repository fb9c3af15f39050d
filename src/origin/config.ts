/**
 * Settings of `talon origin` (the origin stub), one declaration each
 * (src/config/Setting.ts): flag > `TALON_ORIGIN_*` > config file > default.
 */
import * as S from "../config/declare.js"
import { component } from "../config/Setting.js"
import { nonNegative, notBlank, positive, range } from "../config/checks.js"

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
  prefix: "TALON_ORIGIN",
  settings: {
    root: S.text(".talon/origin", "Directory holding buckets/containers (one subdirectory each)", { example: "/srv/origin", check: notBlank }),
    host: S.text("127.0.0.1", "Interface to listen on", { example: "0.0.0.0" }),
    port: S.integer(9100, "TCP port; 0 picks a free one", range(0, 65535)),
    seed: S.toggle("Create bucket/container `talon` with sample objects (kept if already present)"),
    latencyMs: S.number(0, "Injected per-request latency: the fixed delay, or the median/minimum of --latency-tail, in ms", {
      example: "20",
      check: nonNegative
    }),
    latencyTail: S.oneOf(["none", "lognormal", "pareto"], "Heavy-tailed latency: lognormal (sigma 1) or pareto (alpha 1.5) around --latency-ms", {
      example: "lognormal"
    }),
    failureRate: S.number(0, "Fraction of requests that fail", { example: "0.01", check: range(0, 1, "must be a fraction in 0..1") }),
    failureMode: S.oneOf(["503", "reset", "truncate"], "503 SlowDown/ServerBusy, a TCP reset, or (GETs) a body cut off halfway", { example: "reset" }),
    bandwidth: S.size(0, "Per-response body rate cap in bytes/s (0 = unlimited; K/M/G suffixes)", { example: "100M" }),
    faultSeed: S.integer(1, "Seed of the fault injection's random choices", { example: "7" }),
    uploadTtlMs: S.integer(DEFAULT_UPLOAD_TTL_MS, "Unfinished multipart uploads and uncommitted blocks are dropped after this long, in ms", {
      example: "3600000",
      check: positive
    })
  }
})
