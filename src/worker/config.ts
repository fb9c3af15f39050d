/**
 * Worker settings, one declaration each (src/config/Setting.ts): explicit value (a flag,
 * embedding code) > `TALON_WORKER_*` (environment, then config file) > default.
 */
import * as os from "node:os"
import * as path from "node:path"
import { type ConfigError, Context, Effect, Layer, type Redacted } from "effect"
import * as K from "../config/kinds.js"
import { component, defaultsOf, resolve, resolveOnly, setting } from "../config/Setting.js"
import { DEFAULT_BLOCK_SIZE, DEFAULT_PAGE_SIZE } from "../core/ids.js"
import { blockSizeRange, nonNegative, notBlank, positive } from "../config/checks.js"
import { clusterTokenSetting } from "../config/clusterToken.js"

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
  /** The cluster token (the coordinators' TALON_CLUSTER_TOKEN): each status carries an HMAC made with it. */
  readonly clusterToken?: Redacted.Redacted<string> | undefined
  /** Address announced to the coordinator; empty = the bound data address. */
  readonly advertiseAddress: string
  readonly cacheDirs: ReadonlyArray<string>
  /** Bytes per cache dir. */
  readonly capacity: number
  readonly blockSize: number
  /** 0 = whole blocks. */
  readonly pageSize: number
  readonly versionTtlMs: number
  readonly originConcurrency: number
  readonly heartbeatIntervalMs: number
  readonly dataPlane: DataPlaneName
  readonly serveMode: ServeModeName
  readonly readTimeoutMs: number
  readonly maxOpenFiles: number
  readonly maxInflightPerConnection: number
  /** Processes serving the one data port (1 = this process; N ≥ 2 = an index-owning primary plus N loops). */
  readonly loops: number
  /** Let the native plane answer repeated hits of idle connections itself (native/hits.c). */
  readonly hitTable: boolean
  /** SO_SNDBUF of each data connection in bytes; 0 = the kernel's default (autotuned). */
  readonly sendBuffer: number
  /** Bytes per second the background scrub re-hashes resident units at; 0 = no periodic re-verify. */
  readonly scrubRate: number
  /** PEM certificate and key for HTTPS on the admin endpoint; both empty = plain HTTP. */
  readonly adminTlsCert: string
  readonly adminTlsKey: string
}

export const WorkerSchema = component<WorkerSettings>({
  name: "worker",
  summary: "`talon worker`: the block cache, its miss path and data plane.",
  settings: {
    id: setting(K.text, {
      env: "TALON_WORKER_ID",
      flag: "id",
      default: "",
      shownDefault: "worker-<data address>",
      help: "Node id registered with the coordinator",
      example: "worker-1"
    }),
    dataAddress: setting(K.listenAddress, {
      env: "TALON_WORKER_DATA_ADDR",
      flag: "data-addr",
      default: "127.0.0.1:7001",
      help: "Data listener host:port serving GetRange, Get and Ping (port 0 = any free port)",
      example: "0.0.0.0:7001"
    }),
    adminAddress: setting(K.listenAddress, {
      env: "TALON_WORKER_ADMIN_ADDR",
      flag: "admin-addr",
      default: "127.0.0.1:8001",
      help: "Admin HTTP host:port serving /healthz, /readyz and /metrics",
      example: "0.0.0.0:8001"
    }),
    coordinator: setting(K.coordinatorList({ standalone: true }), {
      env: "TALON_WORKER_COORDINATOR",
      flag: "coordinator",
      default: "127.0.0.1:7000",
      help: "Coordinator control host:port to send status heartbeats to; a comma-separated list sends to one and fails over to the next; empty string = standalone (ready at once)",
      example: "10.0.0.1:7000,10.0.0.2:7000"
    }),
    clusterId: setting(K.text, {
      env: "TALON_WORKER_CLUSTER_ID",
      flag: "cluster-id",
      default: "default",
      help: "Cluster this worker joins; the coordinator refuses status heartbeats naming another cluster",
      example: "prod",
      check: notBlank
    }),
    zone: setting(K.text, {
      env: "TALON_WORKER_ZONE",
      flag: "zone",
      default: "",
      shownDefault: "none",
      help: "Deployment zone, reported to the coordinator as the status label zone",
      example: "us-east-1a"
    }),
    clusterToken: clusterTokenSetting,
    advertiseAddress: setting(K.text, {
      env: "TALON_WORKER_ADVERTISE_ADDR",
      flag: "advertise-addr",
      default: "",
      shownDefault: "the bound data address",
      help: "Data address announced to the coordinator, when clients reach the worker by another name",
      example: "worker-1.talon:7001",
      check: (a) => (a === "" || K.dialAddress.parse(a)._tag === "Right" ? undefined : "must be host:port with a port in 1..65535")
    }),
    cacheDirs: setting(K.list("directories", /[,:]/), {
      env: "TALON_WORKER_CACHE_DIRS",
      flag: "cache-dir",
      default: [path.join(os.tmpdir(), "talon-worker-cache")],
      shownDefault: "$TMPDIR/talon-worker-cache",
      help: "Cache directory; repeat the flag for several (each has its own --capacity). The variable and file separate dirs with commas",
      example: "/var/cache/talon",
      check: (dirs) => (dirs.length > 0 ? undefined : "needs at least one directory")
    }),
    capacity: setting(K.size, {
      env: "TALON_WORKER_CAPACITY",
      flag: "capacity",
      default: 8 * 1024 ** 3,
      help: "Bytes of blocks kept per cache dir before LRU eviction (K/M/G/T suffixes)",
      example: "100G",
      check: positive
    }),
    blockSize: setting(K.size, {
      env: "TALON_WORKER_BLOCK_SIZE",
      flag: "block-size",
      default: DEFAULT_BLOCK_SIZE,
      help: "Block size; every client and worker of a cluster must agree on it, as placement is per block",
      example: "8M",
      check: blockSizeRange
    }),
    pageSize: setting(K.size, {
      env: "TALON_WORKER_PAGE_SIZE",
      flag: "page-size",
      default: DEFAULT_PAGE_SIZE,
      help: "Page size of paged blocks, so a cold point read fetches one page; 0 = whole blocks as Talon does by default",
      example: "1M",
      check: nonNegative
    }),
    versionTtlMs: setting(K.integer, {
      env: "TALON_WORKER_VERSION_TTL_MS",
      flag: "version-ttl-ms",
      default: 2000,
      help: "How long an object's version (ETag) from a HEAD is trusted; a changed object is served new after at most this long, in ms",
      example: "2000",
      check: nonNegative
    }),
    originConcurrency: setting(K.integer, {
      env: "TALON_WORKER_ORIGIN_CONCURRENCY",
      flag: "origin-concurrency",
      default: 16,
      help: "Origin range fetches in flight at most",
      example: "16",
      check: positive
    }),
    heartbeatIntervalMs: setting(K.integer, {
      env: "TALON_WORKER_HEARTBEAT_INTERVAL_MS",
      flag: "heartbeat-interval-ms",
      default: 1000,
      help: "Interval of heartbeats to the coordinator, in ms",
      example: "1000",
      check: positive
    }),
    dataPlane: setting(K.oneOf("auto", "native", "portable"), {
      env: "TALON_WORKER_DATA_PLANE",
      flag: "data-plane",
      default: "auto",
      help: "How reply bytes reach sockets: native sendfile(2), portable pooled-buffer copies, or auto (native where it loads, else portable; the choice is logged)",
      example: "portable"
    }),
    serveMode: setting(K.oneOf("pipelined", "multiplexed"), {
      env: "TALON_WORKER_SERVE_MODE",
      flag: "serve-mode",
      default: "pipelined",
      help: "Reply order per connection: pipelined (request order) or multiplexed (as ready; clients match request ids)",
      example: "multiplexed"
    }),
    readTimeoutMs: setting(K.integer, {
      env: "TALON_WORKER_READ_TIMEOUT_MS",
      flag: "read-timeout-ms",
      default: 30_000,
      help: "A connection holding a partial frame this long without progress is dropped, in ms",
      example: "30000",
      check: positive
    }),
    maxOpenFiles: setting(K.integer, {
      env: "TALON_WORKER_MAX_OPEN_FILES",
      flag: "max-open-files",
      default: 4096,
      help: "Block files kept open for serving at most",
      example: "4096",
      check: positive
    }),
    maxInflightPerConnection: setting(K.integer, {
      env: "TALON_WORKER_MAX_INFLIGHT",
      flag: "max-inflight",
      default: 256,
      help: "Requests one connection may have in flight before the worker stops reading from it",
      example: "256",
      check: positive
    }),
    loops: setting(K.integer, {
      env: "TALON_WORKER_LOOPS",
      flag: "loops",
      default: 1,
      help: "Processes (event loops) serving the one data port: N ≥ 2 forks N serving loops under a primary that alone owns the cache index and fills; connections are spread round-robin (NODE_CLUSTER_SCHED_POLICY=none: the kernel picks)",
      example: "2",
      check: (n) => (n >= 1 && n <= 64 ? undefined : "must be an integer in 1..64")
    }),
    hitTable: setting(K.boolean, {
      env: "TALON_WORKER_HIT_TABLE",
      flag: "no-hit-table",
      presence: false,
      default: true,
      shownDefault: "true: the addon answers them",
      help: "Native plane: serve every request through the JS serve loop, instead of letting the addon answer repeated cache hits of idle connections itself",
      example: "false"
    }),
    sendBuffer: setting(K.size, {
      env: "TALON_WORKER_SEND_BUFFER",
      flag: "send-buffer",
      default: 0,
      help: "SO_SNDBUF of each data connection (K/M suffixes); 0 keeps the kernel's autotuned default. A small buffer bounds the memory many slow readers pin in the kernel",
      example: "256K",
      check: (n) => (n >= 0 && n <= 0x7fffffff ? undefined : "must be 0 (the kernel's default) or a size up to 2 GiB")
    }),
    scrubRate: setting(K.size, {
      env: "TALON_WORKER_SCRUB_RATE",
      flag: "scrub-rate",
      default: 16 * 1024 ** 2,
      help: "Bytes per second the background scrub re-reads and re-hashes cached pages at, so a byte corrupted on disk is dropped and refetched instead of served (0 = off; start-up verify and truncation checks stay on)",
      example: "16M",
      check: nonNegative
    }),
    adminTlsCert: setting(K.text, {
      env: "TALON_WORKER_ADMIN_TLS_CERT",
      flag: "admin-tls-cert",
      default: "",
      shownDefault: "none: plain HTTP",
      help: "PEM certificate for HTTPS on the admin endpoint (with --admin-tls-key; re-read on SIGHUP or when the file changes)",
      example: "/etc/talon/admin.pem"
    }),
    adminTlsKey: setting(K.text, {
      env: "TALON_WORKER_ADMIN_TLS_KEY",
      flag: "admin-tls-key",
      default: "",
      shownDefault: "none",
      help: "PEM private key of --admin-tls-cert",
      example: "/etc/talon/admin-key.pem"
    })
  },
  check: (s) => {
    if (s.pageSize > s.blockSize) return { key: "pageSize", message: `must be 0 (whole blocks) or at most the block size ${s.blockSize}, got ${s.pageSize}` }
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
export const WORKER_ENV = Object.fromEntries(
  Object.entries(WorkerSchema.settings).map(([key, s]) => [key, s.env])
) as { readonly [K in keyof WorkerSettings]: string }

/** explicit > environment > config file > default, validated. */
export const resolveWorkerSettings = (
  explicit: Partial<WorkerSettings> = {}
): Effect.Effect<WorkerSettings, ConfigError.ConfigError> => resolve(WorkerSchema, explicit)

export class WorkerConfig extends Context.Tag("talon/worker/WorkerConfig")<WorkerConfig, WorkerSettings>() {
  /** Settings from explicit values > `TALON_WORKER_*` > file > defaults. */
  static readonly layer = (explicit: Partial<WorkerSettings> = {}) => Layer.effect(WorkerConfig, resolveWorkerSettings(explicit))
  /** Exactly these settings over the defaults, ignoring the environment (tests, embedding). */
  static readonly layerOf = (settings: Partial<WorkerSettings>) =>
    Layer.effect(WorkerConfig, Effect.suspend(() => resolveOnly(WorkerSchema, settings)))
}
