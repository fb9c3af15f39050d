/**
 * Coordinator settings. Resolution order: an explicit option (a CLI flag, or a
 * program embedding the layer) > `TALON_COORDINATOR_*` through Effect Config
 * (environment, or whatever ConfigProvider the program installs, e.g. a file) >
 * the default here.
 */
import { Config, ConfigError, Effect, Option } from "effect"

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
  /** First epoch; default is the wall clock in ms at start (see Membership.ts). */
  readonly epochBase?: number | undefined
  /** PEM certificate and key for HTTPS on the admin endpoint; absent = plain HTTP. */
  readonly adminTlsCert?: string | undefined
  readonly adminTlsKey?: string | undefined
}

export const COORDINATOR_DEFAULTS: CoordinatorOptions = {
  listen: "127.0.0.1:7000",
  adminListen: "127.0.0.1:8000",
  heartbeatIntervalMs: 1000,
  missedHeartbeats: 3,
  readTimeoutMs: 10_000
}

export const livenessWindowMs = (options: CoordinatorOptions): number =>
  options.heartbeatIntervalMs * options.missedHeartbeats

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
      epochBase: yield* fromEnv(Config.integer("TALON_COORDINATOR_EPOCH_BASE")),
      adminTlsCert: yield* fromEnv(Config.string("TALON_COORDINATOR_ADMIN_TLS_CERT")),
      adminTlsKey: yield* fromEnv(Config.string("TALON_COORDINATOR_ADMIN_TLS_KEY"))
    }
    const pick = <K extends keyof CoordinatorOptions>(key: K): CoordinatorOptions[K] =>
      (explicit[key] ?? env[key] ?? COORDINATOR_DEFAULTS[key]) as CoordinatorOptions[K]
    const options: CoordinatorOptions = {
      listen: pick("listen"),
      adminListen: pick("adminListen"),
      heartbeatIntervalMs: pick("heartbeatIntervalMs"),
      missedHeartbeats: pick("missedHeartbeats"),
      readTimeoutMs: pick("readTimeoutMs"),
      epochBase: pick("epochBase"),
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
