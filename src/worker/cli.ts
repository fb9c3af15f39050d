/**
 * `talon worker`: runs one worker until interrupted. Flags override
 * `TALON_WORKER_*`, which override the defaults.
 */
import { Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import { Effect, Layer, Option } from "effect"
import * as Router from "../backend/Router.js"
import { parseSize, WORKER_DEFAULTS, WORKER_ENV, type WorkerSettings } from "./config.js"
import { workerProcessLayer } from "./loops/WorkerLoops.js"

const opt = <A>(o: Options.Options<A>, key: keyof WorkerSettings, description: string, shownDefault: string) =>
  o.pipe(Options.withDescription(`${description} (env ${WORKER_ENV[key]}, default ${shownDefault}).`), Options.optional)

const size = (name: string) =>
  Options.text(name).pipe(
    Options.mapEffect((s) => {
      const n = parseSize(s)
      return n === undefined
        ? Effect.fail(
            ValidationError.invalidValue(
              HelpDoc.p(`--${name}: expected a size like 1048576, 64K, 256M or 10G, got ${JSON.stringify(s)}`)
            )
          )
        : Effect.succeed(n)
    })
  )

export const workerOptions = {
  id: opt(Options.text("id"), "id", "Node id registered with the coordinator", "worker-<data address>"),
  dataAddress: opt(
    Options.text("data-addr"),
    "dataAddress",
    "Data listener host:port serving GetRange, Get and Ping (port 0 = any free port)",
    WORKER_DEFAULTS.dataAddress
  ),
  adminAddress: opt(
    Options.text("admin-addr"),
    "adminAddress",
    "Admin HTTP host:port serving /healthz, /readyz and /metrics",
    WORKER_DEFAULTS.adminAddress
  ),
  coordinator: opt(
    Options.text("coordinator"),
    "coordinator",
    "Coordinator control host:port to send status heartbeats to, or a comma-separated list (heartbeats go to one; on failure the next takes over); empty string = standalone (ready at once)",
    WORKER_DEFAULTS.coordinator
  ),
  clusterId: opt(
    Options.text("cluster-id"),
    "clusterId",
    "Cluster this worker joins; the coordinator refuses status heartbeats naming another cluster",
    WORKER_DEFAULTS.clusterId
  ),
  zone: opt(Options.text("zone"), "zone", "Deployment zone, reported to the coordinator as the status label zone", "none"),
  advertiseAddress: opt(
    Options.text("advertise-addr"),
    "advertiseAddress",
    "Data address announced to the coordinator, when clients reach the worker by another name",
    "the bound data address"
  ),
  cacheDirs: opt(
    Options.text("cache-dir").pipe(Options.repeated),
    "cacheDirs",
    "Cache directory; repeat for several (each has its own --capacity). The env form separates dirs with commas",
    WORKER_DEFAULTS.cacheDirs.join(",")
  ),
  capacity: opt(size("capacity"), "capacity", "Bytes of blocks kept per cache dir before LRU eviction (K/M/G/T suffixes)", "8G"),
  blockSize: opt(
    size("block-size"),
    "blockSize",
    "Block size; every client and worker of a cluster must agree on it, as placement is per block",
    "256M"
  ),
  pageSize: opt(
    size("page-size"),
    "pageSize",
    "Page size of paged blocks, so a cold point read fetches one page; 0 = whole blocks as Talon does by default",
    "1M"
  ),
  versionTtlMs: opt(
    Options.integer("version-ttl-ms"),
    "versionTtlMs",
    "How long an object's version (ETag) from a HEAD is trusted; a changed object is served new after at most this long",
    String(WORKER_DEFAULTS.versionTtlMs)
  ),
  originConcurrency: opt(
    Options.integer("origin-concurrency"),
    "originConcurrency",
    "Origin range fetches in flight at most",
    String(WORKER_DEFAULTS.originConcurrency)
  ),
  heartbeatIntervalMs: opt(
    Options.integer("heartbeat-interval-ms"),
    "heartbeatIntervalMs",
    "Interval of heartbeats to the coordinator, in ms",
    String(WORKER_DEFAULTS.heartbeatIntervalMs)
  ),
  dataPlane: opt(
    Options.choice("data-plane", ["auto", "native", "portable"]),
    "dataPlane",
    "How reply bytes reach sockets: native sendfile(2), portable pooled-buffer copies, or auto (native where it loads, else portable; the choice is logged)",
    WORKER_DEFAULTS.dataPlane
  ),
  serveMode: opt(
    Options.choice("serve-mode", ["pipelined", "multiplexed"]),
    "serveMode",
    "Reply order per connection: pipelined (request order) or multiplexed (as ready; clients match request ids)",
    WORKER_DEFAULTS.serveMode
  ),
  readTimeoutMs: opt(
    Options.integer("read-timeout-ms"),
    "readTimeoutMs",
    "A connection holding a partial frame this long without progress is dropped, in ms",
    String(WORKER_DEFAULTS.readTimeoutMs)
  ),
  maxOpenFiles: opt(
    Options.integer("max-open-files"),
    "maxOpenFiles",
    "Block files kept open for serving at most",
    String(WORKER_DEFAULTS.maxOpenFiles)
  ),
  maxInflightPerConnection: opt(
    Options.integer("max-inflight"),
    "maxInflightPerConnection",
    "Requests one connection may have in flight before the worker stops reading from it",
    String(WORKER_DEFAULTS.maxInflightPerConnection)
  ),
  loops: opt(
    Options.integer("loops"),
    "loops",
    "Processes (event loops) serving the one data port: N ≥ 2 forks N serving loops under a primary that alone owns the cache index and fills; connections are spread round-robin (NODE_CLUSTER_SCHED_POLICY=none: the kernel picks)",
    String(WORKER_DEFAULTS.loops)
  ),
  sendBuffer: opt(
    size("send-buffer"),
    "sendBuffer",
    "SO_SNDBUF of each data connection (K/M suffixes); 0 keeps the kernel's autotuned default. A small buffer bounds the memory many slow readers pin in the kernel",
    "0"
  ),
  scrubRate: opt(
    size("scrub-rate"),
    "scrubRate",
    "Bytes per second the background scrub re-reads and re-hashes cached pages at, so a byte corrupted on disk is dropped and refetched instead of served (0 = off; start-up verify and truncation checks stay on)",
    "16M"
  ),
  adminTlsCert: opt(
    Options.text("admin-tls-cert"),
    "adminTlsCert",
    "PEM certificate for HTTPS on the admin endpoint (with --admin-tls-key; re-read on SIGHUP or when the file changes)",
    "none: plain HTTP"
  ),
  adminTlsKey: opt(Options.text("admin-tls-key"), "adminTlsKey", "PEM private key of --admin-tls-cert", "none"),
  // A boolean flag is never absent (false when not given): only its presence is a setting.
  hitTable: Options.boolean("no-hit-table").pipe(
    Options.withDescription(
      `Native plane: serve every request through the JS serve loop, instead of letting the addon answer repeated cache hits of idle connections itself (env ${WORKER_ENV.hitTable}, default true: the addon answers them).`
    ),
    Options.map((off) => (off ? Option.some(false) : Option.none()))
  )
}

type Flags = { readonly [K in keyof typeof workerOptions]: Option.Option<unknown> }

/** Flags that were given, as explicit settings (the rest resolve from env/defaults). */
export const explicitWorkerSettings = (flags: Flags): Partial<WorkerSettings> => {
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(flags)) {
    // An absent repeated flag (--cache-dir) parses as an empty list: leave it to env/default.
    if (Option.isSome(value) && !(Array.isArray(value.value) && value.value.length === 0)) out[key] = value.value
  }
  return out as Partial<WorkerSettings>
}

/** The origin the `talon worker` command fills from: S3 and/or Azure from the environment (TALON_S3_*, TALON_AZURE_*). */
export const workerBackendLayer = Router.layerConfig

export const worker = Command.make("worker", workerOptions, (flags) =>
  Layer.launch(workerProcessLayer(explicitWorkerSettings(flags)).pipe(Layer.provide(workerBackendLayer))).pipe(Effect.asVoid)
).pipe(
  Command.withDescription(
    "Run a cache worker: a block cache on local disk (whole or paged blocks, LRU under --capacity), filled from the origin on a miss and served over the Talon data protocol; registers and heartbeats with the coordinator; admin HTTP with health and Prometheus metrics. Origin endpoints and credentials come from TALON_S3_* and TALON_AZURE_* (see the backend docs)."
  )
)
