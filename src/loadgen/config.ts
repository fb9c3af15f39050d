/**
 * Settings of `talon loadgen`, one declaration each (src/config/Setting.ts):
 * flag > `TALON_LOADGEN_*` > config file > default.
 */
import * as K from "../config/kinds.js"
import { component, setting } from "../config/Setting.js"
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
  settings: {
    addr: setting(K.dialAddress, {
      env: "TALON_LOADGEN_ADDR",
      flag: "addr",
      default: "127.0.0.1:7001",
      help: "Worker data-plane address host:port",
      example: "127.0.0.1:7001"
    }),
    conns: setting(K.integerList, {
      env: "TALON_LOADGEN_CONNS",
      flag: "conns",
      default: [1, 64, 256, 1024],
      help: "Connections; a comma list is a sweep, one run per value",
      example: "64"
    }),
    depth: setting(K.integer, {
      env: "TALON_LOADGEN_DEPTH",
      flag: "depth",
      default: 1,
      help: "Requests in flight per connection (pipelined)",
      example: "8",
      check: positiveInteger
    }),
    range: setting(K.size, {
      env: "TALON_LOADGEN_RANGE",
      flag: "range",
      default: 65536,
      help: "Bytes per GetRange (K/M/G suffixes); offsets are random multiples of it",
      example: "64K",
      check: positive
    }),
    seconds: setting(K.number, {
      env: "TALON_LOADGEN_SECONDS",
      flag: "seconds",
      default: 10,
      help: "Measured window per run, seconds",
      example: "5",
      check: positive
    }),
    warmup: setting(K.number, {
      env: "TALON_LOADGEN_WARMUP",
      flag: "warmup",
      default: 3,
      help: "Warmup before the window, seconds (excluded from every number)",
      example: "1",
      check: nonNegative
    }),
    ramp: setting(K.optional(K.number), {
      env: "TALON_LOADGEN_RAMP",
      flag: "ramp",
      default: undefined,
      shownDefault: "half the warmup, at most 1",
      help: "Seconds at the start of the warmup over which requests in flight per connection grow from 1 to --depth, so TCP receive windows open before full load",
      example: "0.5",
      check: (n) => (n === undefined ? undefined : nonNegative(n))
    }),
    object: setting(K.optional(K.text), {
      env: "TALON_LOADGEN_OBJECT",
      flag: "object",
      default: undefined,
      shownDefault: "none (required)",
      help: "Object to read: s3://bucket/key, az://container/key, or a key with --backend/--container",
      example: "s3://talon/datasets/sample-64m.bin"
    }),
    backend: setting(K.oneOf("s3", "az"), {
      env: "TALON_LOADGEN_BACKEND",
      flag: "backend",
      default: "s3",
      help: "Backend of a bare --object key",
      example: "az"
    }),
    container: setting(K.optional(K.text), {
      env: "TALON_LOADGEN_CONTAINER",
      flag: "container",
      default: undefined,
      shownDefault: "none",
      help: "Bucket/container of a bare --object key",
      example: "talon"
    }),
    size: setting(K.optional(K.size), {
      env: "TALON_LOADGEN_SIZE",
      flag: "size",
      default: undefined,
      shownDefault: "asked of --coordinator",
      help: "Object size in bytes (K/M/G); asked of --coordinator with StatObject when omitted",
      example: "64M",
      check: optionalPositive
    }),
    coordinator: setting(K.optional(K.coordinatorList()), {
      env: "TALON_LOADGEN_COORDINATOR",
      flag: "coordinator",
      default: undefined,
      shownDefault: "none",
      help: "Coordinator control address(es) host:port, comma-separated for failover, to ask object sizes",
      example: "127.0.0.1:7000"
    }),
    serverPid: setting(K.optional(K.integerList), {
      env: "TALON_LOADGEN_SERVER_PID",
      flag: "server-pid",
      default: undefined,
      shownDefault: "none",
      help: "Server PID(s), comma-separated, sampled from /proc for CPU, kernel share and RSS",
      example: "4242"
    }),
    json: setting(K.boolean, {
      env: "TALON_LOADGEN_JSON",
      flag: "json",
      presence: true,
      default: false,
      help: "Print one JSON line per run",
      example: "true"
    }),
    threads: setting(K.optional(K.integer), {
      env: "TALON_LOADGEN_THREADS",
      flag: "threads",
      default: undefined,
      shownDefault: "usable cores",
      help: "Generator threads; connections are spread over them",
      example: "2",
      check: (n) => (n === undefined ? undefined : positiveInteger(n))
    }),
    missShare: setting(K.number, {
      env: "TALON_LOADGEN_MISS_SHARE",
      flag: "miss-share",
      default: 0,
      help: "Share of requests sent to never-read offsets (cache misses), 0 ≤ share < 1",
      example: "0.1",
      check: (n) => (n >= 0 && n < 1 ? undefined : "must be a share in [0, 1)")
    }),
    missObject: setting(K.optional(K.text), {
      env: "TALON_LOADGEN_MISS_OBJECT",
      flag: "miss-object",
      default: undefined,
      shownDefault: "--object past --hot-bytes",
      help: "Object the misses read",
      example: "s3://talon/datasets/other.bin"
    }),
    missSize: setting(K.optional(K.size), {
      env: "TALON_LOADGEN_MISS_SIZE",
      flag: "miss-size",
      default: undefined,
      shownDefault: "asked of --coordinator",
      help: "Size of --miss-object",
      example: "1G",
      check: optionalPositive
    }),
    missStride: setting(K.size, {
      env: "TALON_LOADGEN_MISS_STRIDE",
      flag: "miss-stride",
      default: 1024 * 1024,
      help: "Distance between miss offsets; at least the worker's fill unit so no two misses share one",
      example: "1M",
      check: positive
    }),
    hotBytes: setting(K.optional(K.size), {
      env: "TALON_LOADGEN_HOT_BYTES",
      flag: "hot-bytes",
      default: undefined,
      shownDefault: "all, or the first half with misses",
      help: "Hits read [0, hot-bytes) of --object",
      example: "32M",
      check: optionalPositive
    }),
    seed: setting(K.integer, {
      env: "TALON_LOADGEN_SEED",
      flag: "seed",
      default: 1,
      help: "Seed of the per-connection offset streams",
      example: "7",
      check: nonNegative
    }),
    verify: setting(K.optional(K.text), {
      env: "TALON_LOADGEN_VERIFY",
      flag: "verify",
      default: undefined,
      shownDefault: "off",
      help: "Local copy of --object: every payload byte is compared with it (slower)",
      example: "/tmp/sample-64m.bin"
    }),
    drainTimeout: setting(K.number, {
      env: "TALON_LOADGEN_DRAIN_TIMEOUT",
      flag: "drain-timeout",
      default: 5,
      help: "Seconds to wait for in-flight replies after the window",
      example: "5",
      check: positive
    }),
    failFast: setting(K.boolean, {
      env: "TALON_LOADGEN_FAIL_FAST",
      flag: "fail-fast",
      presence: true,
      default: false,
      help: "Stop sending at the first error",
      example: "true"
    })
  },
  check: (s) =>
    s.ramp !== undefined && s.ramp > s.warmup
      ? { key: "ramp", message: `must be between 0 and --warmup (${s.warmup} s), got ${s.ramp}` }
      : undefined
})
