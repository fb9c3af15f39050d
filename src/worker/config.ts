/**
 * Worker settings, one declaration each (src/config/Setting.ts): explicit value (a flag,
 * embedding code) > `TALON_WORKER_*` (environment, then config file) > default.
 */
import * as os from "node:os"
import * as path from "node:path"
import { type ConfigError, Context, Effect, Layer, type Redacted } from "effect"
import * as K from "../config/kinds.js"
import * as S from "../config/declare.js"
import { component, defaultsOf, envNamesOf, resolve, resolveOnly } from "../config/Setting.js"
import { DEFAULT_BLOCK_SIZE, DEFAULT_PAGE_SIZE } from "../core/ids.js"
import { blockSizeRange, nonNegative, notBlank, positive, range } from "../config/checks.js"
import { clusterTokenSetting } from "../config/clusterToken.js"
import { TALON_WORKER_REFUSED } from "./talonNames.js"
import { adminTokenSetting } from "../config/adminToken.js"
import { NO_RATE_LIMITS, parsePolicy, type RateLimitPolicy, showPolicy } from "./tenants/policy.js"

const rateLimitsKind: K.Kind<RateLimitPolicy> = { type: "table", parse: parsePolicy, show: showPolicy }

export type DataPlaneName = "auto" | "native" | "portable"
export type ServeModeName = "pipelined" | "multiplexed"

export interface WorkerSettings {
  /** Node id registered with the coordinator; empty = `worker-<data address>` once bound. */
  readonly id: string
  readonly dataAddress: string
  readonly adminAddress: string
  /** Coordinator control addresses (comma-separated, tried in turn); empty = standalone. */
  readonly coordinator: string
  /** Cluster the worker's status heartbeats name; the coordinator refuses another cluster's. */
  readonly clusterId: string
  /** Deployment zone, sent as the `zone` label of the status (empty = none). */
  readonly zone: string
  /** Status heartbeats over TLS (Talon's control TLS settings): this worker's certificate and key, the coordinators' CA, their trust domain. */
  readonly controlTlsCertPath?: string | undefined
  readonly controlTlsKeyPath?: string | undefined
  readonly controlTlsCaCertPath?: string | undefined
  readonly controlTlsTrustDomain?: string | undefined
  /** Serve the data port over TLS with the control TLS files (an option: plain TCP keeps sendfile). */
  readonly dataTls: boolean
  /** The cluster token (the coordinators' TALON_CLUSTER_TOKEN): each status carries an HMAC made with it. */
  readonly clusterToken?: Redacted.Redacted<string> | undefined
  /** TALON_ADMIN_TOKEN: the bearer token /api/v1 demands; absent = open. */
  readonly adminToken?: Redacted.Redacted<string> | undefined
  /** Address announced to the coordinator; empty = the bound data address. */
  readonly advertiseAddress: string
  readonly cacheDirs: ReadonlyArray<string>
  /** Bytes per cache dir. */
  readonly capacity: number
  /** Bytes across all cache dirs (Talon's `capacity_bytes`): when set, each dir gets an equal share and `capacity` is that share. */
  readonly capacityTotal?: number | undefined
  readonly blockSize: number
  /** 0 = whole blocks. */
  readonly pageSize: number
  readonly versionTtlMs: number
  readonly originConcurrency: number
  /** Origin range fetches of one object in flight at most. */
  readonly originConcurrencyPerObject: number
  /** Bytes one origin range GET fetches at most (page-aligned runs of missing pages are cut into pieces of this size). */
  readonly originFetchSize: number
  /** Bytes fetched ahead of a sequential reader of an object, at most; 0 = no read-ahead. */
  readonly readAhead: number
  /** Origin fetches read-ahead may hold at once (the rest of originConcurrency is left to readers' misses). */
  readonly readAheadConcurrency: number
  /**
   * How fills receive plain-HTTP origin bodies: natively into the page's staging buffer off the
   * JS thread (content-length bodies, the addon built), into each connection's reused buffer, or node:http streams.
   */
  readonly originReceive: "native" | "reused" | "stream"
  readonly heartbeatIntervalMs: number
  readonly dataPlane: DataPlaneName
  readonly serveMode: ServeModeName
  readonly readTimeoutMs: number
  readonly maxOpenFiles: number
  readonly maxInflightPerConnection: number
  /** Processes serving the one data port (1 = this process; N ≥ 2 = an index-owning primary plus N loops). */
  readonly loops: number
  /** How `--loops N` connections reach a loop: each loop accepts on its own SO_REUSEPORT socket, or the primary deals them. */
  readonly loopsAccept: "reuseport" | "dealt"
  /** Let the native plane answer repeated hits of idle connections itself (native/hits.c). */
  readonly hitTable: boolean
  /** SO_SNDBUF of each data connection in bytes; 0 = the kernel's default (autotuned). */
  readonly sendBuffer: number
  /** fdatasync each filled unit before it is indexed (off: a crash costs a refetch, never wrong bytes: units are verified before first serve). */
  readonly syncFills: boolean
  /** Bytes per second the background scrub re-hashes resident units at; 0 = no periodic re-verify. */
  readonly scrubRate: number
  /** Longest a scrub pass waits, in all, for fills in flight to finish before it hashes anyway, in ms; 0 = never waits. */
  readonly scrubMaxDeferMs: number
  /** Shortest a scrub pass over every resident unit lasts, in ms (a small cache is not re-read in a tight loop). */
  readonly scrubMinPassMs: number
  /** PEM certificate and key for HTTPS on the admin endpoint; both empty = plain HTTP. */
  readonly adminTlsCert: string
  readonly adminTlsKey: string
  /** Per-tenant read limits (Talon's `[rate_limits]`); off unless `enabled`. */
  readonly rateLimits: RateLimitPolicy
  /** Largest object body a Put on the data port may carry, in bytes; 0 = Put and Delete are refused. */
  readonly maxPutBytes: number
}

export const WorkerSchema = component<WorkerSettings>({
  name: "worker",
  summary: "`talon worker`: the block cache, its miss path and data plane.",
  prefix: "TALON_WORKER",
  settings: {
    id: S.text("", "Node id registered with the coordinator", { shownDefault: "worker-<data address>", example: "worker-1", aliases: ["TALON_WORKER_NODE_ID"] }),
    dataAddress: S.listen("127.0.0.1:7001", "Data listener host:port serving GetRange, Get and Ping (port 0 = any free port)", {
      name: "data-addr",
      example: "0.0.0.0:7001",
      aliases: ["TALON_WORKER_LISTEN"]
    }),
    adminAddress: S.listen("127.0.0.1:8001", "Admin HTTP host:port serving /healthz, /readyz and /metrics", {
      name: "admin-addr",
      example: "0.0.0.0:8001",
      aliases: ["TALON_WORKER_ADMIN_LISTEN"]
    }),
    coordinator: S.of(
      K.coordinatorList({ standalone: true }),
      "127.0.0.1:7000",
      "Coordinator control host:port to send status heartbeats to; a comma-separated list sends to one and fails over to the next; empty string = standalone (ready at once)",
      { example: "10.0.0.1:7000,10.0.0.2:7000" }
    ),
    clusterId: S.text("default", "Cluster this worker joins; the coordinator refuses status heartbeats naming another cluster", {
      example: "prod",
      check: notBlank
    }),
    zone: S.text("", "Deployment zone, reported to the coordinator as the status label zone", { shownDefault: "none", example: "us-east-1a" }),
    controlTlsCertPath: S.unset(K.text, "PEM certificate this worker presents to coordinators: status heartbeats go over TLS (files re-read for each new connection)", {
      shownDefault: "none: plain TCP",
      example: "/etc/talon/tls/tls.crt"
    }),
    controlTlsKeyPath: S.unset(K.text, "PEM private key of --control-tls-cert-path", { example: "/etc/talon/tls/tls.key" }),
    controlTlsCaCertPath: S.unset(K.text, "PEM CA bundle the coordinators' certificates must chain to", { example: "/etc/talon/tls/ca.crt" }),
    controlTlsTrustDomain: S.unset(K.text, "Coordinators must carry a URI SAN spiffe://<this>/talon/<cluster>/<role>/<node> (instead of a host-name check)", {
      example: "cluster.local"
    }),
    clusterToken: clusterTokenSetting,
    dataTls: S.toggle(
      "Serve the data port over TLS with the control TLS certificate and key (--control-tls-cert-path); with --control-tls-ca-cert-path clients must present a certificate (mTLS). Costs sendfile: bytes are copied through the portable plane and encrypted (see docs/security.md for the measured cost)"
    ),
    adminToken: adminTokenSetting,
    advertiseAddress: S.text("", "Data address announced to the coordinator, when clients reach the worker by another name", {
      name: "advertise-addr",
      shownDefault: "the bound data address",
      example: "worker-1.talon:7001",
      check: (a) => (a === "" || K.dialAddress.parse(a)._tag === "Right" ? undefined : "must be host:port with a port in 1..65535")
    }),
    cacheDirs: S.of(
      K.list("directories", /[,:]/),
      [path.join(os.tmpdir(), "talon-worker-cache")],
      "Cache directory; repeat the flag for several (each has its own --capacity). The variable separates dirs with commas or colons (Talon's form)",
      {
        flag: "cache-dir",
        shownDefault: "$TMPDIR/talon-worker-cache",
        example: "/var/cache/talon",
        check: (dirs) => (dirs.length > 0 ? undefined : "needs at least one directory")
      }
    ),
    capacity: S.size(8 * 1024 ** 3, "Bytes of blocks kept per cache dir before LRU eviction (K/M/G/T suffixes)", { example: "100G", check: positive }),
    capacityTotal: S.unset(
      K.size,
      "Bytes of blocks kept across all cache dirs, split equally among them (Talon's capacity_bytes); when set it replaces --capacity",
      { example: "400G", check: (n) => (n === undefined || n > 0 ? undefined : "must be positive"), aliases: ["TALON_WORKER_CAPACITY_BYTES"] }
    ),
    blockSize: S.size(DEFAULT_BLOCK_SIZE, "Block size; every client and worker of a cluster must agree on it, as placement is per block", {
      example: "8M",
      check: blockSizeRange
    }),
    pageSize: S.size(DEFAULT_PAGE_SIZE, "Page size of paged blocks, so a cold point read fetches one page; 0 = whole blocks as Talon does by default", {
      check: nonNegative,
      aliases: ["TALON_WORKER_L2_PAGE_SIZE_BYTES"]
    }),
    versionTtlMs: S.integer(
      2000,
      "How long an object's version (ETag) from a HEAD is trusted; a changed object is served new after at most this long, in ms",
      nonNegative
    ),
    originConcurrency: S.integer(32, "Origin range fetches in flight at most", positive),
    originConcurrencyPerObject: S.integer(16, "Origin range fetches of one object in flight at most, so one cold object cannot take every origin connection", positive),
    originFetchSize: S.size(
      4 * 1024 ** 2,
      "Bytes one origin range GET fetches at most (K/M suffixes): a longer run of missing pages becomes several concurrent GETs, as one origin connection streams at ~100 MB/s (rounded up to whole pages)",
      { example: "8M", check: positive }
    ),
    readAhead: S.size(
      64 * 1024 ** 2,
      "Bytes fetched from the origin ahead of a sequential reader of an object, within the block it reads (K/M suffixes); 0 = no read-ahead",
      { example: "128M", check: nonNegative }
    ),
    readAheadConcurrency: S.integer(8, "Origin fetches read-ahead may hold at once; the rest of --origin-concurrency stays free for readers' misses", positive),
    originReceive: S.oneOf(["native", "reused", "stream"], "How fills receive origin bodies: native (a content-length body from a plain-HTTP origin is received and each page hashed by the talon_fill addon's threads straight into the page's staging buffer, off the JS thread; reused when the addon is not built), reused (each plain-HTTP connection reads into one buffer of its own; no allocation per read) or stream (node:http, a fresh buffer per read); TLS origins always stream", { example: "reused" }),
    heartbeatIntervalMs: S.integer(1000, "Interval of heartbeats to the coordinator, in ms", positive),
    dataPlane: S.oneOf(
      ["auto", "native", "portable"],
      "How reply bytes reach sockets: native sendfile(2), portable pooled-buffer copies, or auto (native where it loads, else portable; the choice is logged)",
      { example: "portable" }
    ),
    serveMode: S.oneOf(
      ["pipelined", "multiplexed"],
      "Reply order per connection: pipelined (request order) or multiplexed (as ready; clients match request ids)",
      { example: "multiplexed" }
    ),
    readTimeoutMs: S.integer(30_000, "A connection holding a partial frame this long without progress is dropped, in ms", positive),
    maxOpenFiles: S.integer(4096, "Block files kept open for serving at most", positive),
    maxInflightPerConnection: S.integer(256, "Requests one connection may have in flight before the worker stops reading from it", {
      name: "max-inflight",
      check: positive
    }),
    loops: S.integer(
      1,
      "Processes (event loops) serving the one data port: N ≥ 2 forks N serving loops under a primary that alone owns the cache index and fills (how connections reach them: --loops-accept)",
      { example: "2", check: range(1, 64, "must be an integer in 1..64") }
    ),
    loopsAccept: S.oneOf(
      ["reuseport", "dealt"],
      "With --loops N: reuseport (each loop accepts on its own SO_REUSEPORT socket of the data port, the kernel spreads connections by a hash of their addresses; needs the native plane, else dealt) or dealt (the primary accepts and hands each connection to the loop with the fewest open); NODE_CLUSTER_SCHED_POLICY=rr or none picks node:cluster's own scheduling instead",
      { example: "dealt" }
    ),
    hitTable: S.of(
      K.boolean,
      true,
      "Native plane: serve every request through the JS serve loop, instead of letting the addon answer repeated cache hits of idle connections itself",
      { flag: "no-hit-table", presence: false, shownDefault: "true: the addon answers them", example: "false" }
    ),
    sendBuffer: S.size(
      0,
      "SO_SNDBUF of each data connection (K/M suffixes); 0 keeps the kernel's autotuned default. A small buffer bounds the memory many slow readers pin in the kernel",
      { example: "256K", check: range(0, 0x7fffffff, "must be 0 (the kernel's default) or a size up to 2 GiB") }
    ),
    syncFills: S.of(
      K.boolean,
      true,
      "fdatasync every filled page before it is served, so a unit on disk survives a power loss; without it a lost write is found by the checksum verify before a restarted worker serves the unit, and refetched",
      { flag: "no-sync-fills", presence: false, shownDefault: "true", example: "false" }
    ),
    scrubRate: S.size(
      16 * 1024 ** 2,
      "Bytes per second the background scrub re-reads and re-hashes cached pages at, so a byte corrupted on disk is dropped and refetched instead of served (0 = off; start-up verify and truncation checks stay on)",
      nonNegative
    ),
    scrubMaxDeferMs: S.integer(
      60_000,
      "Longest one scrub pass waits, in all, for origin fills to finish before it re-hashes anyway, so the scrub does not take a cold read's CPU and disk; every cached page is still re-hashed within two passes of being filled, a pass lasting at most max(cached bytes / scrub-rate, 10 s) + this, in ms (0 = never waits)",
      nonNegative
    ),
    scrubMinPassMs: S.integer(10_000, "Shortest one scrub pass over every cached page lasts, in ms, so a small cache is not re-read in a tight loop; a flipped byte is dropped within max(cached bytes / scrub-rate, this) + scrub-max-defer-ms", positive),
    adminTlsCert: S.text(
      "",
      "PEM certificate for HTTPS on the admin endpoint (with --admin-tls-key; re-read on SIGHUP or when the file changes)",
      { shownDefault: "none: plain HTTP", example: "/etc/talon/admin.pem" }
    ),
    adminTlsKey: S.text("", "PEM private key of --admin-tls-cert", { shownDefault: "none", example: "/etc/talon/admin-key.pem" }),
    rateLimits: S.of(
      rateLimitsKind,
      NO_RATE_LIMITS,
      "Per-tenant read limits, Talon's [rate_limits]: a [worker.rate_limits] table (enabled, default and overrides.<tenant>, each with read_iops and/or read_throughput = { rate, burst_ratio }), or the same as JSON; reads without a tenant count against default. Over a limit a read gets RateLimited with a retry hint",
      { shownDefault: "off", example: `{"enabled":true,"default":{"read_iops":{"rate":1000,"burst_ratio":2}}}` }
    ),
    maxPutBytes: S.size(5 * 1024 ** 3, "Largest object a Put on the data port may write through to the origin (K/M/G suffixes; S3's single-PUT limit by default); a longer Put is refused before any byte reaches the origin; 0 = this worker refuses Put and Delete", { name: "max-put-size", example: "1G", check: nonNegative })
  },
  derive: (s) => (s.capacityTotal === undefined ? s : { ...s, capacity: Math.floor(s.capacityTotal / Math.max(1, s.cacheDirs.length)) }),
  refused: TALON_WORKER_REFUSED,
  check: (s) => {
    if (s.pageSize > s.blockSize) return { key: "pageSize", message: `must be 0 (whole blocks) or at most the block size ${s.blockSize}, got ${s.pageSize}` }
    if (s.dataTls && (s.controlTlsCertPath === undefined || s.controlTlsKeyPath === undefined)) {
      return { key: "dataTls", message: "needs --control-tls-cert-path and --control-tls-key-path: the data port presents the control certificate" }
    }
    if (s.dataTls && s.loops > 1) return { key: "dataTls", message: "serves one loop: use --loops 1 with data-plane TLS" }
    if ((s.adminTlsCert === "") !== (s.adminTlsKey === "")) {
      return {
        key: s.adminTlsCert === "" ? "adminTlsCert" : "adminTlsKey",
        message: "is missing: admin HTTPS needs both a certificate and a key"
      }
    }
    return undefined
  }
})

export const WORKER_DEFAULTS: WorkerSettings = defaultsOf(WorkerSchema)

/** Environment variable of each setting. */
export const WORKER_ENV = envNamesOf(WorkerSchema)

/** explicit > environment > config file > default, validated. */
export const resolveWorkerSettings = (
  explicit: Partial<WorkerSettings> = {}
): Effect.Effect<WorkerSettings, ConfigError.ConfigError> => resolve(WorkerSchema, explicit)

export class WorkerConfig extends Context.Tag("talon/worker/WorkerConfig")<WorkerConfig, WorkerSettings>() {
  /** Settings from explicit values > `TALON_WORKER_*` > file > defaults. */
  static readonly layer = (explicit: Partial<WorkerSettings> = {}) => Layer.effect(WorkerConfig, resolveWorkerSettings(explicit))
  /** Exactly these settings over the defaults, ignoring the environment (tests, embedding). */
  static readonly layerSettings = (settings: Partial<WorkerSettings>) =>
    Layer.effect(WorkerConfig, Effect.suspend(() => resolveOnly(WorkerSchema, settings)))
}
