/**
 * Client settings, one declaration each (src/config/Setting.ts): explicit option >
 * `TALON_CLIENT_*` (environment, then config file) > default. `blockSize` must equal
 * the workers' block size: placement is computed per block.
 */
import type { ConfigError, Effect } from "effect"
import * as K from "../config/kinds.js"
import { component, defaultsOf, resolve, setting } from "../config/Setting.js"
import { DEFAULT_BLOCK_SIZE } from "../core/ids.js"
import { blockSizeRange, nonNegative, positive } from "../config/checks.js"

export interface TalonClientOptions {
  /** Coordinator control addresses `host:port[,host:port…]`, tried in turn. */
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
  /** Bound on one coordinator request; past it the coordinator counts as down and reads fall back (see Coordinators.ts). */
  readonly controlTimeoutMs: number
  readonly connectTimeoutMs: number
  readonly connectionsPerWorker: number
  /** Largest single GetRange; longer segments are split (bounds per-request memory). */
  readonly maxRequestBytes: number
}

export const ClientSchema = component<TalonClientOptions>({
  name: "client",
  summary:
    "The cluster client: `talon read`, `talon cluster`, the gateway's cache route, and programs using TalonClient.",
  settings: {
    coordinator: setting(K.coordinatorList(), {
      env: "TALON_CLIENT_COORDINATOR",
      flag: "coordinator",
      default: "127.0.0.1:7000",
      help: "Coordinator control address host:port; a comma-separated list fails over between them",
      example: "10.0.0.1:7000,10.0.0.2:7000"
    }),
    blockSize: setting(K.size, {
      env: "TALON_CLIENT_BLOCK_SIZE",
      flag: "block-size",
      default: DEFAULT_BLOCK_SIZE,
      help: "Block size; must equal the workers' (K/M/G suffixes)",
      example: "8M",
      check: blockSizeRange
    }),
    replicas: setting(K.integer, {
      env: "TALON_CLIENT_REPLICAS",
      flag: "replicas",
      default: 2,
      help: "Workers tried per block, in placement order",
      example: "2",
      check: positive
    }),
    parallelism: setting(K.integer, {
      env: "TALON_CLIENT_PARALLELISM",
      flag: "parallelism",
      default: 4,
      help: "Block segments fetched concurrently ahead of the reader",
      example: "4",
      check: positive
    }),
    membershipTtlMs: setting(K.integer, {
      env: "TALON_CLIENT_MEMBERSHIP_TTL_MS",
      flag: "membership-ttl-ms",
      default: 5000,
      help: "How long a membership list is trusted before it is fetched again, in ms",
      example: "5000",
      check: nonNegative
    }),
    statTtlMs: setting(K.integer, {
      env: "TALON_CLIENT_STAT_TTL_MS",
      flag: "stat-ttl-ms",
      default: 2000,
      help: "How long an object's size and version are trusted, in ms",
      example: "2000",
      check: nonNegative
    }),
    staleLimitMs: setting(K.integer, {
      env: "TALON_CLIENT_STALE_LIMIT_MS",
      flag: "stale-limit-ms",
      default: 120_000,
      help: "While the coordinator is down, the last membership and object stats stay in use this long after it last confirmed them, in ms",
      example: "120000",
      check: nonNegative
    }),
    requestTimeoutMs: setting(K.integer, {
      env: "TALON_CLIENT_REQUEST_TIMEOUT_MS",
      flag: "request-timeout-ms",
      default: 30_000,
      help: "Deadline for one request to a worker, in ms",
      example: "30000",
      check: positive
    }),
    controlTimeoutMs: setting(K.integer, {
      env: "TALON_CLIENT_CONTROL_TIMEOUT_MS",
      flag: "control-timeout-ms",
      default: 5000,
      help: "Deadline for one coordinator request; past it the coordinator counts as down and reads fall back, in ms",
      example: "5000",
      check: positive
    }),
    connectTimeoutMs: setting(K.integer, {
      env: "TALON_CLIENT_CONNECT_TIMEOUT_MS",
      flag: "connect-timeout-ms",
      default: 3000,
      help: "Deadline for opening a connection, in ms",
      example: "3000",
      check: positive
    }),
    connectionsPerWorker: setting(K.integer, {
      env: "TALON_CLIENT_CONNECTIONS_PER_WORKER",
      flag: "connections-per-worker",
      default: 4,
      help: "Data connections kept open to each worker",
      example: "4",
      check: positive
    }),
    maxRequestBytes: setting(K.size, {
      env: "TALON_CLIENT_MAX_REQUEST_BYTES",
      flag: "max-request-bytes",
      default: 8 * 1024 * 1024,
      help: "Largest single range request; longer segments are split (bounds per-request memory)",
      example: "8M",
      check: positive
    })
  }
})

export const CLIENT_DEFAULTS: TalonClientOptions = defaultsOf(ClientSchema)

export const resolveClientOptions = (
  explicit: Partial<TalonClientOptions> = {}
): Effect.Effect<TalonClientOptions, ConfigError.ConfigError> => resolve(ClientSchema, explicit)

/** `talon cluster`'s own setting beside the client's. */
export const ClusterViewSchema = component<{ readonly admin: string | undefined }>({
  name: "cluster view",
  summary: "`talon cluster`: the membership table.",
  settings: {
    admin: setting(K.optional(K.dialAddress), {
      env: "TALON_CLUSTER_ADMIN",
      flag: "admin",
      default: undefined,
      shownDefault: "unset: ask the control address",
      help: "Coordinator admin HTTP host:port; the table then includes heartbeat ages and block counts",
      example: "127.0.0.1:8000"
    })
  }
})
