/**
 * Worker settings: explicit value (CLI flag, embedding code) > `TALON_WORKER_*`
 * environment (Effect Config) > default. Sizes accept K/M/G/T suffixes (binary).
 */
import * as os from "node:os"
import * as path from "node:path"
import { Config, ConfigError, Context, Effect, Either, Layer, Option } from "effect"
import { parseHostPortList } from "../client/address.js"
import { DEFAULT_BLOCK_SIZE, DEFAULT_PAGE_SIZE } from "../core/ids.js"

export type DataPlaneName = "auto" | "native" | "portable"
export type ServeModeName = "pipelined" | "multiplexed"

export interface WorkerSettings {
  /** Node id registered with the coordinator; empty = `worker-<data address>` once bound. */
  readonly id: string
  /** Data listener `host:port` (port 0 = ephemeral). */
  readonly dataAddress: string
  /** Admin HTTP `host:port`. */
  readonly adminAddress: string
  /**
   * Coordinator control `host:port`, or a comma-separated list of them; the
   * worker heartbeats to one and fails over to the next. Empty = standalone
   * (ready at once, no membership).
   */
  readonly coordinator: string
  /** Cluster the worker's status heartbeats name; the coordinator refuses another cluster's. */
  readonly clusterId: string
  /** Deployment zone, sent as the `zone` label of the status (empty = none). */
  readonly zone: string
  /** Address announced to the coordinator; empty = the bound data address. */
  readonly advertiseAddress: string
  readonly cacheDirs: ReadonlyArray<string>
  /** Bytes per cache dir. */
  readonly capacity: number
  readonly blockSize: number
  /** 0 = whole blocks. */
  readonly pageSize: number
  /** How long an object's version (ETag) is trusted before a new HEAD. */
  readonly versionTtlMs: number
  /** Concurrent origin fetches (range GETs) at most. */
  readonly originConcurrency: number
  readonly heartbeatIntervalMs: number
  readonly dataPlane: DataPlaneName
  readonly serveMode: ServeModeName
  /** A connection holding a partial frame this long without progress is dropped. */
  readonly readTimeoutMs: number
  /** Block files kept open for serving at most (fd cache). */
  readonly maxOpenFiles: number
  /** Requests a connection may have in flight before the worker stops reading from it. */
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

export const WORKER_DEFAULTS: WorkerSettings = {
  id: "",
  dataAddress: "127.0.0.1:7001",
  adminAddress: "127.0.0.1:8001",
  coordinator: "127.0.0.1:7000",
  clusterId: "default",
  zone: "",
  advertiseAddress: "",
  cacheDirs: [path.join(os.tmpdir(), "talon-worker-cache")],
  capacity: 8 * 1024 ** 3,
  blockSize: DEFAULT_BLOCK_SIZE,
  pageSize: DEFAULT_PAGE_SIZE,
  versionTtlMs: 2000,
  originConcurrency: 16,
  heartbeatIntervalMs: 1000,
  dataPlane: "auto",
  serveMode: "pipelined",
  readTimeoutMs: 30_000,
  maxOpenFiles: 4096,
  maxInflightPerConnection: 256,
  loops: 1,
  hitTable: true,
  sendBuffer: 0,
  scrubRate: 16 * 1024 ** 2,
  adminTlsCert: "",
  adminTlsKey: ""
}

/** Environment variable of each setting. */
export const WORKER_ENV: Record<keyof WorkerSettings, string> = {
  id: "TALON_WORKER_ID",
  dataAddress: "TALON_WORKER_DATA_ADDR",
  adminAddress: "TALON_WORKER_ADMIN_ADDR",
  coordinator: "TALON_WORKER_COORDINATOR",
  clusterId: "TALON_WORKER_CLUSTER_ID",
  zone: "TALON_WORKER_ZONE",
  advertiseAddress: "TALON_WORKER_ADVERTISE_ADDR",
  cacheDirs: "TALON_WORKER_CACHE_DIRS",
  capacity: "TALON_WORKER_CAPACITY",
  blockSize: "TALON_WORKER_BLOCK_SIZE",
  pageSize: "TALON_WORKER_PAGE_SIZE",
  versionTtlMs: "TALON_WORKER_VERSION_TTL_MS",
  originConcurrency: "TALON_WORKER_ORIGIN_CONCURRENCY",
  heartbeatIntervalMs: "TALON_WORKER_HEARTBEAT_INTERVAL_MS",
  dataPlane: "TALON_WORKER_DATA_PLANE",
  serveMode: "TALON_WORKER_SERVE_MODE",
  readTimeoutMs: "TALON_WORKER_READ_TIMEOUT_MS",
  maxOpenFiles: "TALON_WORKER_MAX_OPEN_FILES",
  maxInflightPerConnection: "TALON_WORKER_MAX_INFLIGHT",
  loops: "TALON_WORKER_LOOPS",
  hitTable: "TALON_WORKER_HIT_TABLE",
  sendBuffer: "TALON_WORKER_SEND_BUFFER",
  scrubRate: "TALON_WORKER_SCRUB_RATE",
  adminTlsCert: "TALON_WORKER_ADMIN_TLS_CERT",
  adminTlsKey: "TALON_WORKER_ADMIN_TLS_KEY"
}

const SIZE_UNITS: Record<string, number> = { "": 1, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 }

/** `1048576`, `1M`, `256MiB`, `10G` → bytes; undefined when malformed. */
export const parseSize = (text: string): number | undefined => {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(text) ?? /^\s*(\d+)\s*(b)\s*$/i.exec(text)
  if (m === null) return undefined
  const n = Number(m[1]) * SIZE_UNITS[m[2]!.toLowerCase()]!
  return Number.isSafeInteger(Math.round(n)) ? Math.round(n) : undefined
}

const sizeConfig = (name: string) =>
  Config.string(name).pipe(
    Config.mapOrFail((s) => {
      const n = parseSize(s)
      return n === undefined
        ? Either.left(ConfigError.InvalidData([name], `expected a size like 1048576, 64K, 256M or 10G, got ${JSON.stringify(s)}`))
        : Either.right(n)
    })
  )

const oneOf = <T extends string>(name: string, values: ReadonlyArray<T>) =>
  Config.string(name).pipe(
    Config.mapOrFail((s) =>
      (values as ReadonlyArray<string>).includes(s)
        ? Either.right(s as T)
        : Either.left(ConfigError.InvalidData([name], `expected one of ${values.join(", ")}, got ${JSON.stringify(s)}`))
    )
  )

const listConfig = (name: string) =>
  Config.string(name).pipe(
    Config.map((s) =>
      s
        .split(/[,:]/)
        .map((p) => p.trim())
        .filter((p) => p.length > 0)
    )
  )

/** The Config of each setting (environment names as in WORKER_ENV). */
export const workerConfigs = {
  id: Config.string(WORKER_ENV.id),
  dataAddress: Config.string(WORKER_ENV.dataAddress),
  adminAddress: Config.string(WORKER_ENV.adminAddress),
  coordinator: Config.string(WORKER_ENV.coordinator),
  clusterId: Config.string(WORKER_ENV.clusterId),
  zone: Config.string(WORKER_ENV.zone),
  advertiseAddress: Config.string(WORKER_ENV.advertiseAddress),
  cacheDirs: listConfig(WORKER_ENV.cacheDirs),
  capacity: sizeConfig(WORKER_ENV.capacity),
  blockSize: sizeConfig(WORKER_ENV.blockSize),
  pageSize: sizeConfig(WORKER_ENV.pageSize),
  versionTtlMs: Config.integer(WORKER_ENV.versionTtlMs),
  originConcurrency: Config.integer(WORKER_ENV.originConcurrency),
  heartbeatIntervalMs: Config.integer(WORKER_ENV.heartbeatIntervalMs),
  dataPlane: oneOf<DataPlaneName>(WORKER_ENV.dataPlane, ["auto", "native", "portable"]),
  serveMode: oneOf<ServeModeName>(WORKER_ENV.serveMode, ["pipelined", "multiplexed"]),
  readTimeoutMs: Config.integer(WORKER_ENV.readTimeoutMs),
  maxOpenFiles: Config.integer(WORKER_ENV.maxOpenFiles),
  maxInflightPerConnection: Config.integer(WORKER_ENV.maxInflightPerConnection),
  loops: Config.integer(WORKER_ENV.loops),
  hitTable: Config.boolean(WORKER_ENV.hitTable),
  sendBuffer: sizeConfig(WORKER_ENV.sendBuffer),
  scrubRate: sizeConfig(WORKER_ENV.scrubRate),
  adminTlsCert: Config.string(WORKER_ENV.adminTlsCert),
  adminTlsKey: Config.string(WORKER_ENV.adminTlsKey)
} satisfies { [K in keyof WorkerSettings]: Config.Config<unknown> }

const invalid = (key: keyof WorkerSettings, why: string) => ConfigError.InvalidData([WORKER_ENV[key]], `${key} ${why}`)

/** Checks cross-field rules; returns the first violation. */
export const validateWorkerSettings = (s: WorkerSettings): ConfigError.ConfigError | undefined => {
  if (s.coordinator.trim() !== "" && parseHostPortList(s.coordinator) === undefined) {
    return invalid("coordinator", `must be host:port or a comma-separated list of them (got ${JSON.stringify(s.coordinator)})`)
  }
  if (s.clusterId.trim() === "") return invalid("clusterId", "must not be empty (default: default)")
  if (s.cacheDirs.length === 0) return invalid("cacheDirs", "needs at least one directory")
  if (!(s.capacity > 0)) return invalid("capacity", "must be positive")
  if (!(s.blockSize > 0) || s.blockSize > 0xffffffff) return invalid("blockSize", "must be in 1..4 GiB-1 (a u32)")
  if (s.pageSize < 0 || s.pageSize > s.blockSize) return invalid("pageSize", "must be 0 (whole blocks) or at most the block size")
  if (!(s.versionTtlMs >= 0)) return invalid("versionTtlMs", "must be zero or positive")
  if (!(s.originConcurrency > 0)) return invalid("originConcurrency", "must be positive")
  if (!(s.heartbeatIntervalMs > 0)) return invalid("heartbeatIntervalMs", "must be positive")
  if (!(s.readTimeoutMs > 0)) return invalid("readTimeoutMs", "must be positive")
  if (!(s.maxOpenFiles > 0)) return invalid("maxOpenFiles", "must be positive")
  if (!(s.maxInflightPerConnection > 0)) return invalid("maxInflightPerConnection", "must be positive")
  if (!Number.isInteger(s.sendBuffer) || s.sendBuffer < 0 || s.sendBuffer > 0x7fffffff) {
    return invalid("sendBuffer", "must be 0 (the kernel's default) or a size up to 2 GiB")
  }
  if (!Number.isInteger(s.loops) || s.loops < 1 || s.loops > 64) return invalid("loops", "must be an integer in 1..64")
  if ((s.adminTlsCert === "") !== (s.adminTlsKey === "")) {
    return invalid(s.adminTlsCert === "" ? "adminTlsCert" : "adminTlsKey", "is missing: admin HTTPS needs both a certificate and a key")
  }
  if (!(s.scrubRate >= 0)) return invalid("scrubRate", "must be zero (off) or a rate in bytes per second")
  return undefined
}

/** explicit > environment > default, validated. */
export const resolveWorkerSettings = (
  explicit: Partial<WorkerSettings> = {}
): Effect.Effect<WorkerSettings, ConfigError.ConfigError> =>
  Effect.gen(function* () {
    const resolved: Record<string, unknown> = {}
    for (const key of Object.keys(WORKER_DEFAULTS) as Array<keyof WorkerSettings>) {
      if (explicit[key] !== undefined) {
        resolved[key] = explicit[key]
        continue
      }
      const fromEnv = yield* Config.option(workerConfigs[key] as Config.Config<unknown>)
      resolved[key] = Option.getOrElse(fromEnv, () => WORKER_DEFAULTS[key])
    }
    const settings = resolved as unknown as WorkerSettings
    const error = validateWorkerSettings(settings)
    if (error !== undefined) return yield* Effect.fail(error)
    return settings
  })

export class WorkerConfig extends Context.Tag("talon/worker/WorkerConfig")<WorkerConfig, WorkerSettings>() {
  /** Settings from explicit values > `TALON_WORKER_*` > defaults. */
  static readonly layer = (explicit: Partial<WorkerSettings> = {}) =>
    Layer.effect(WorkerConfig, resolveWorkerSettings(explicit))
  /** Exactly these settings over the defaults, ignoring the environment (tests, embedding). */
  static readonly layerOf = (settings: Partial<WorkerSettings>) =>
    Layer.effect(
      WorkerConfig,
      Effect.suspend(() => {
        const s = { ...WORKER_DEFAULTS, ...settings }
        const error = validateWorkerSettings(s)
        return error === undefined ? Effect.succeed(s) : Effect.fail(error)
      })
    )
}

/** `host:port` → parts; the port must be 0..65535. */
export const parseHostPort = (address: string): { readonly host: string; readonly port: number } | undefined => {
  const i = address.lastIndexOf(":")
  if (i <= 0) return undefined
  let host = address.slice(0, i)
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1)
  const port = Number(address.slice(i + 1))
  if (!Number.isInteger(port) || port < 0 || port > 65535) return undefined
  return { host, port }
}
