/**
 * Client settings: explicit option > `TALON_CLIENT_*` (Effect Config) > default.
 * `blockSize` must equal the workers' block size: placement is computed per block.
 */
import { Config, ConfigError, Effect, Option } from "effect"
import { DEFAULT_BLOCK_SIZE } from "../core/ids.js"

export interface TalonClientOptions {
  /** Coordinator control address `host:port`. */
  readonly coordinator: string
  readonly blockSize: number
  /** Replicas tried per block, in Maglev rank order. */
  readonly replicas: number
  /** Block segments fetched concurrently ahead of the consumer. */
  readonly parallelism: number
  /** How long a membership list is trusted before it is fetched again. */
  readonly membershipTtlMs: number
  /** How long an object's size and version are trusted. */
  readonly statTtlMs: number
  /**
   * How long the last membership (and, when no worker answers a stat either, the last
   * stat of an object) is still used while the coordinator does not answer or lists no
   * workers, counted from when it last confirmed them.
   */
  readonly staleLimitMs: number
  readonly requestTimeoutMs: number
  /** Bound on one coordinator request; past it the coordinator counts as down and reads fall back (see CoordinatorView). */
  readonly controlTimeoutMs: number
  readonly connectTimeoutMs: number
  readonly connectionsPerWorker: number
  /** Largest single GetRange; longer segments are split (bounds per-request memory). */
  readonly maxRequestBytes: number
}

export const CLIENT_DEFAULTS: TalonClientOptions = {
  coordinator: "127.0.0.1:7000",
  blockSize: DEFAULT_BLOCK_SIZE,
  replicas: 2,
  parallelism: 4,
  membershipTtlMs: 5000,
  statTtlMs: 2000,
  staleLimitMs: 120_000,
  requestTimeoutMs: 30_000,
  controlTimeoutMs: 5000,
  connectTimeoutMs: 3000,
  connectionsPerWorker: 4,
  maxRequestBytes: 8 * 1024 * 1024
}

const fromEnv = <A>(config: Config.Config<A>) => Effect.map(Config.option(config), Option.getOrUndefined)

export const resolveClientOptions = (
  explicit: Partial<TalonClientOptions> = {}
): Effect.Effect<TalonClientOptions, ConfigError.ConfigError> =>
  Effect.gen(function* () {
    const env: Partial<Record<keyof TalonClientOptions, unknown>> = {
      coordinator: yield* fromEnv(Config.string("TALON_CLIENT_COORDINATOR")),
      blockSize: yield* fromEnv(Config.integer("TALON_CLIENT_BLOCK_SIZE")),
      replicas: yield* fromEnv(Config.integer("TALON_CLIENT_REPLICAS")),
      parallelism: yield* fromEnv(Config.integer("TALON_CLIENT_PARALLELISM")),
      membershipTtlMs: yield* fromEnv(Config.integer("TALON_CLIENT_MEMBERSHIP_TTL_MS")),
      statTtlMs: yield* fromEnv(Config.integer("TALON_CLIENT_STAT_TTL_MS")),
      staleLimitMs: yield* fromEnv(Config.integer("TALON_CLIENT_STALE_LIMIT_MS")),
      requestTimeoutMs: yield* fromEnv(Config.integer("TALON_CLIENT_REQUEST_TIMEOUT_MS")),
      controlTimeoutMs: yield* fromEnv(Config.integer("TALON_CLIENT_CONTROL_TIMEOUT_MS")),
      connectTimeoutMs: yield* fromEnv(Config.integer("TALON_CLIENT_CONNECT_TIMEOUT_MS")),
      connectionsPerWorker: yield* fromEnv(Config.integer("TALON_CLIENT_CONNECTIONS_PER_WORKER")),
      maxRequestBytes: yield* fromEnv(Config.integer("TALON_CLIENT_MAX_REQUEST_BYTES"))
    }
    const resolved = {} as Record<keyof TalonClientOptions, unknown>
    for (const key of Object.keys(CLIENT_DEFAULTS) as Array<keyof TalonClientOptions>) {
      resolved[key] = explicit[key] ?? env[key] ?? CLIENT_DEFAULTS[key]
    }
    const options = resolved as unknown as TalonClientOptions
    for (const key of [
      "blockSize",
      "replicas",
      "parallelism",
      "requestTimeoutMs",
      "controlTimeoutMs",
      "connectTimeoutMs",
      "connectionsPerWorker",
      "maxRequestBytes"
    ] as const) {
      if (!(options[key] > 0)) {
        return yield* Effect.fail(
          ConfigError.InvalidData([`TALON_CLIENT_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`], `${key} must be positive`)
        )
      }
    }
    return options
  })
