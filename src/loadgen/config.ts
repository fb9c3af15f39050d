/**
 * Settings of `talon loadgen`, one declaration each (src/config/Setting.ts):
 * flag > `TALON_LOADGEN_*` > config file > default.
 */
import * as K from "../config/kinds.js"
import * as S from "../config/declare.js"
import { component } from "../config/Setting.js"
import { nonNegative, positive, positiveInteger, whenSet } from "../config/checks.js"

export interface LoadgenSettings {
  readonly addr: string
  readonly conns: ReadonlyArray<number>
  readonly depth: number
  readonly range: number
  readonly seconds: number
  readonly warmup: number
  readonly ramp: number | undefined
  readonly object: string | undefined
  readonly backend: "s3" | "az"
  readonly container: string | undefined
  readonly size: number | undefined
  readonly coordinator: string | undefined
  readonly serverPid: ReadonlyArray<number> | undefined
  readonly json: boolean
  readonly threads: number | undefined
  readonly missShare: number
  readonly missObject: string | undefined
  readonly missSize: number | undefined
  readonly missStride: number
  readonly hotBytes: number | undefined
  readonly seed: number
  readonly verify: string | undefined
  readonly drainTimeout: number
  readonly failFast: boolean
}

const optionalPositive = whenSet(positive)

export const LoadgenSchema = component<LoadgenSettings>({
  name: "load generator",
  summary: "`talon loadgen`: pipelined GetRange load against a worker.",
  prefix: "TALON_LOADGEN",
  settings: {
    addr: S.of(K.dialAddress, "127.0.0.1:7001", "Worker data-plane address host:port"),
    conns: S.of(K.integerList, [1, 64, 256, 1024], "Connections; a comma list is a sweep, one run per value", { example: "64" }),
    depth: S.integer(1, "Requests in flight per connection (pipelined)", { example: "8", check: positiveInteger }),
    range: S.size(65536, "Bytes per GetRange (K/M/G suffixes); offsets are random multiples of it", { example: "64K", check: positive }),
    seconds: S.number(10, "Measured window per run, seconds", { example: "5", check: positive }),
    warmup: S.number(3, "Warmup before the window, seconds (excluded from every number)", { example: "1", check: nonNegative }),
    ramp: S.unset(
      K.number,
      "Seconds at the start of the warmup over which requests in flight per connection grow from 1 to --depth, so TCP receive windows open before full load",
      { shownDefault: "half the warmup, at most 1", example: "0.5", check: whenSet(nonNegative) }
    ),
    object: S.unset(K.text, "Object to read: s3://bucket/key, az://container/key, or a key with --backend/--container", {
      shownDefault: "none (required)",
      example: "s3://talon/datasets/sample-64m.bin"
    }),
    backend: S.oneOf(["s3", "az"], "Backend of a bare --object key", { example: "az" }),
    container: S.unset(K.text, "Bucket/container of a bare --object key", { example: "talon" }),
    size: S.unset(K.size, "Object size in bytes (K/M/G); asked of --coordinator with StatObject when omitted", {
      shownDefault: "asked of --coordinator",
      example: "64M",
      check: optionalPositive
    }),
    coordinator: S.unset(K.coordinatorList(), "Coordinator control address(es) host:port, comma-separated for failover, to ask object sizes", {
      example: "127.0.0.1:7000"
    }),
    serverPid: S.unset(K.integerList, "Server PID(s), comma-separated, sampled from /proc for CPU, kernel share and RSS", { example: "4242" }),
    json: S.toggle("Print one JSON line per run"),
    threads: S.unset(K.integer, "Generator threads; connections are spread over them", {
      shownDefault: "usable cores",
      example: "2",
      check: whenSet(positiveInteger)
    }),
    missShare: S.number(0, "Share of requests sent to never-read offsets (cache misses), 0 ≤ share < 1", {
      example: "0.1",
      check: (n) => (n >= 0 && n < 1 ? undefined : "must be a share in [0, 1)")
    }),
    missObject: S.unset(K.text, "Object the misses read", { shownDefault: "--object past --hot-bytes", example: "s3://talon/datasets/other.bin" }),
    missSize: S.unset(K.size, "Size of --miss-object", { shownDefault: "asked of --coordinator", example: "1G", check: optionalPositive }),
    missStride: S.size(1024 * 1024, "Distance between miss offsets; at least the worker's fill unit so no two misses share one", positive),
    hotBytes: S.unset(K.size, "Hits read [0, hot-bytes) of --object", {
      shownDefault: "all, or the first half with misses",
      example: "32M",
      check: optionalPositive
    }),
    seed: S.integer(1, "Seed of the per-connection offset streams", { example: "7", check: nonNegative }),
    verify: S.unset(K.text, "Local copy of --object: every payload byte is compared with it (slower)", {
      shownDefault: "off",
      example: "/tmp/sample-64m.bin"
    }),
    drainTimeout: S.number(5, "Seconds to wait for in-flight replies after the window", positive),
    failFast: S.toggle("Stop sending at the first error")
  },
  check: (s) =>
    s.ramp !== undefined && s.ramp > s.warmup
      ? { key: "ramp", message: `must be between 0 and --warmup (${s.warmup} s), got ${s.ramp}` }
      : undefined
})
