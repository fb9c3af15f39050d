/**
 * Coordinator settings. Resolution order: an explicit option (a CLI flag, or a
 * program embedding the layer) > `TALON_COORDINATOR_*` through Effect Config
 * (environment, or whatever ConfigProvider the program installs, e.g. a file) >
 * the default here.
 */
import { Config, ConfigError, Effect, Option } from "effect"
import { resolveStateStoreSettings, type StateStoreSettings, type StateTiming } from "./state/config.js"

export interface CoordinatorOptions {
  /** Control listener `host:port` (framed protocol). */
  readonly listen: string
  /** Admin HTTP `host:port`. */
  readonly adminListen: string
  /** How often workers are expected to heartbeat. */
  readonly heartbeatIntervalMs: number
  /** A worker silent for `missedHeartbeats × heartbeatIntervalMs` leaves the membership. */
  readonly missedHeartbeats: number
  /** A partially received frame left idle this long closes its connection. */
  readonly readTimeoutMs: number
  /** Cluster this coordinator serves; a NodeStatusHeartbeat naming another cluster is refused. */
  readonly clusterId: string
  /**
   * The cluster state store every control operation is served from. Unset
   * fields come from TALON_STATE_* / TALON_ETCD_* / TALON_CLUSTER_TOKEN; unset
   * timings derive from the heartbeat options (see `stateTiming`).
   */
  readonly state?: Partial<StateStoreSettings> | undefined
  /** PEM certificate and key for HTTPS on the admin endpoint; absent = plain HTTP. */
  readonly adminTlsCert?: string | undefined
  readonly adminTlsKey?: string | undefined
}

export const COORDINATOR_DEFAULTS: CoordinatorOptions = {
  listen: "127.0.0.1:7000",
  adminListen: "127.0.0.1:8000",
  heartbeatIntervalMs: 1000,
  missedHeartbeats: 3,
  readTimeoutMs: 10_000,
  clusterId: "default"
}

export const livenessWindowMs = (options: CoordinatorOptions): number =>
  options.heartbeatIntervalMs * options.missedHeartbeats

/**
 * Store timings implied by the coordinator's heartbeat options: a node is out
 * of placement after `missedHeartbeats` silent intervals (the liveness window)
 * and its record is gone after two windows.
 */
export const stateTiming = (options: CoordinatorOptions): Pick<StateTiming, "heartbeatIntervalMs" | "unhealthyAfterMs" | "leaseTtlMs"> => {
  const window = livenessWindowMs(options)
  const unhealthyAfterMs = Math.max(window, options.heartbeatIntervalMs + 1)
  return { heartbeatIntervalMs: options.heartbeatIntervalMs, unhealthyAfterMs, leaseTtlMs: 2 * unhealthyAfterMs }
}

const fromEnv = <A>(config: Config.Config<A>) => Effect.map(Config.option(config), Option.getOrUndefined)

/** Fills every option not given explicitly from `TALON_COORDINATOR_*`, then the defaults. */
export const resolveCoordinatorOptions = (
  explicit: Partial<CoordinatorOptions> = {}
): Effect.Effect<CoordinatorOptions, ConfigError.ConfigError> =>
  Effect.gen(function* () {
    const env = {
      listen: yield* fromEnv(Config.string("TALON_COORDINATOR_LISTEN")),
      adminListen: yield* fromEnv(Config.string("TALON_COORDINATOR_ADMIN_LISTEN")),
      heartbeatIntervalMs: yield* fromEnv(Config.integer("TALON_COORDINATOR_HEARTBEAT_INTERVAL_MS")),
      missedHeartbeats: yield* fromEnv(Config.integer("TALON_COORDINATOR_MISSED_HEARTBEATS")),
      readTimeoutMs: yield* fromEnv(Config.integer("TALON_COORDINATOR_READ_TIMEOUT_MS")),
      clusterId: yield* fromEnv(Config.string("TALON_COORDINATOR_CLUSTER_ID")),
      adminTlsCert: yield* fromEnv(Config.string("TALON_COORDINATOR_ADMIN_TLS_CERT")),
      adminTlsKey: yield* fromEnv(Config.string("TALON_COORDINATOR_ADMIN_TLS_KEY"))
    }
    const pick = <K extends Exclude<keyof CoordinatorOptions, "state">>(key: K): CoordinatorOptions[K] =>
      (explicit[key] ?? env[key] ?? COORDINATOR_DEFAULTS[key]) as CoordinatorOptions[K]
    const options: CoordinatorOptions = {
      listen: pick("listen"),
      adminListen: pick("adminListen"),
      heartbeatIntervalMs: pick("heartbeatIntervalMs"),
      missedHeartbeats: pick("missedHeartbeats"),
      readTimeoutMs: pick("readTimeoutMs"),
      clusterId: pick("clusterId"),
      state: explicit.state,
      adminTlsCert: pick("adminTlsCert"),
      adminTlsKey: pick("adminTlsKey")
    }
    if ((options.adminTlsCert === undefined) !== (options.adminTlsKey === undefined)) {
      return yield* Effect.fail(
        ConfigError.InvalidData(
          [options.adminTlsCert === undefined ? "TALON_COORDINATOR_ADMIN_TLS_CERT" : "TALON_COORDINATOR_ADMIN_TLS_KEY"],
          "admin HTTPS needs both a certificate and a key (--admin-tls-cert and --admin-tls-key)"
        )
      )
    }
    if (options.clusterId.trim() === "") {
      return yield* Effect.fail(
        ConfigError.InvalidData(["TALON_COORDINATOR_CLUSTER_ID"], "the cluster id must not be empty (default: default)")
      )
    }
    if (!(options.heartbeatIntervalMs > 0) || !(options.missedHeartbeats > 0)) {
      return yield* Effect.fail(
        ConfigError.InvalidData(
          ["TALON_COORDINATOR_HEARTBEAT_INTERVAL_MS"],
          "the heartbeat interval (ms) and the missed-heartbeat count must both be positive"
        )
      )
    }
    return options
  })

/**
 * The state-store settings a coordinator runs with: explicit `state` fields >
 * TALON_STATE_* / TALON_ETCD_* > timings derived from the heartbeat options >
 * the store's defaults.
 */
export const resolveCoordinatorState = (
  options: CoordinatorOptions
): Effect.Effect<StateStoreSettings, ConfigError.ConfigError> =>
  Effect.gen(function* () {
    const derived = stateTiming(options)
    const env = {
      heartbeatIntervalMs: yield* fromEnv(Config.integer("TALON_STATE_HEARTBEAT_INTERVAL_MS")),
      unhealthyAfterMs: yield* fromEnv(Config.integer("TALON_STATE_UNHEALTHY_AFTER_MS")),
      leaseTtlMs: yield* fromEnv(Config.integer("TALON_STATE_LEASE_TTL_MS"))
    }
    // An absent flag arrives as an undefined field; drop those so they do not hide the environment.
    const explicit = Object.fromEntries(
      Object.entries(options.state ?? {}).filter(([, v]) => v !== undefined)
    ) as Partial<StateStoreSettings>
    const timing = {
      heartbeatIntervalMs: explicit.heartbeatIntervalMs ?? env.heartbeatIntervalMs ?? derived.heartbeatIntervalMs,
      unhealthyAfterMs: explicit.unhealthyAfterMs ?? env.unhealthyAfterMs ?? derived.unhealthyAfterMs,
      leaseTtlMs: explicit.leaseTtlMs ?? env.leaseTtlMs ?? derived.leaseTtlMs
    }
    return yield* resolveStateStoreSettings({ ...explicit, ...timing })
  })
