/**
 * State-store settings. Resolution: explicit option (flag, embedding program)
 * > `TALON_STATE_*` / `TALON_ETCD_*` / `TALON_CLUSTER_TOKEN` through Effect
 * Config (environment or the installed ConfigProvider, e.g. the config file)
 * > the defaults here (Talon's: 5 s heartbeat, 15 s unhealthy, 30 s lease).
 */
import { Config, ConfigError, Effect, Option, Redacted } from "effect"

export interface StateTiming {
  /** How often nodes send their status. */
  readonly heartbeatIntervalMs: number
  /** A node whose last accepted write is older than this is reported unhealthy. */
  readonly unhealthyAfterMs: number
  /** A node whose last accepted write is older than this disappears (lease expiry). */
  readonly leaseTtlMs: number
  /** Deadline for one backend operation. */
  readonly requestTimeoutMs: number
}

export type TokenCheck = "every-write" | "takeover-only"

export interface StateStoreSettings extends StateTiming {
  readonly backend: "memory" | "etcd"
  /** etcd client URLs (`http://host:port`); a bare `host:port` gets `http://`. */
  readonly etcdEndpoints: ReadonlyArray<string>
  /** Keyspace prefix; records live under `<prefix>/clusters/<cluster>/nodes/<role>/<node>`. */
  readonly etcdPrefix: string
  /** etcd password authentication; both or neither. */
  readonly etcdUsername: string | undefined
  readonly etcdPassword: Redacted.Redacted<string> | undefined
  readonly clusterToken: Redacted.Redacted<string> | undefined
  /**
   * With a token configured: `every-write` refuses any put without it;
   * `takeover-only` demands it only to replace another live incarnation's record.
   */
  readonly tokenCheck: TokenCheck
}

export const STATE_DEFAULTS: StateStoreSettings = {
  backend: "memory",
  heartbeatIntervalMs: 5_000,
  unhealthyAfterMs: 15_000,
  leaseTtlMs: 30_000,
  requestTimeoutMs: 3_000,
  etcdEndpoints: [],
  etcdPrefix: "/talon",
  etcdUsername: undefined,
  etcdPassword: undefined,
  clusterToken: undefined,
  tokenCheck: "every-write"
}

/** Why a settings value is unusable, or null. */
export const settingsProblem = (s: StateStoreSettings): { readonly path: string; readonly message: string } | null => {
  const timings: Array<[string, number]> = [
    ["TALON_STATE_HEARTBEAT_INTERVAL_MS", s.heartbeatIntervalMs],
    ["TALON_STATE_UNHEALTHY_AFTER_MS", s.unhealthyAfterMs],
    ["TALON_STATE_LEASE_TTL_MS", s.leaseTtlMs],
    ["TALON_STATE_REQUEST_TIMEOUT_MS", s.requestTimeoutMs]
  ]
  for (const [path, v] of timings) {
    if (!Number.isSafeInteger(v) || v <= 0) return { path, message: `must be a positive whole number of milliseconds, got ${v}` }
  }
  if (!(s.heartbeatIntervalMs < s.unhealthyAfterMs && s.unhealthyAfterMs < s.leaseTtlMs)) {
    return {
      path: "TALON_STATE_UNHEALTHY_AFTER_MS",
      message: `lease timing must satisfy heartbeat interval < unhealthy-after < lease TTL; got ${s.heartbeatIntervalMs} < ${s.unhealthyAfterMs} < ${s.leaseTtlMs} ms`
    }
  }
  if (s.backend === "etcd") {
    if (s.etcdEndpoints.length === 0) return { path: "TALON_ETCD_ENDPOINTS", message: "the etcd backend needs at least one endpoint, e.g. http://127.0.0.1:2379" }
    if (s.etcdEndpoints.some((e) => e.trim() === "")) return { path: "TALON_ETCD_ENDPOINTS", message: "an etcd endpoint is empty (check for a stray comma)" }
    if (s.etcdPrefix.replace(/\/+$/, "") === "") return { path: "TALON_ETCD_PREFIX", message: "the etcd keyspace prefix must not be empty" }
    if ((s.etcdUsername === undefined) !== (s.etcdPassword === undefined)) {
      return { path: "TALON_ETCD_PASSWORD", message: "etcd authentication needs both TALON_ETCD_USERNAME and TALON_ETCD_PASSWORD" }
    }
  }
  if (s.clusterToken !== undefined && Redacted.value(s.clusterToken).length < 16) {
    return { path: "TALON_CLUSTER_TOKEN", message: "the cluster token must be at least 16 characters (generate one with `openssl rand -hex 32`)" }
  }
  return null
}

const opt = <A>(config: Config.Config<A>) => Effect.map(Config.option(config), Option.getOrUndefined)

/** Fills every setting not given explicitly from the environment/ConfigProvider, then the defaults; validated. */
export const resolveStateStoreSettings = (
  explicit: Partial<StateStoreSettings> = {}
): Effect.Effect<StateStoreSettings, ConfigError.ConfigError> =>
  Effect.gen(function* () {
    const endpoints = yield* opt(Config.array(Config.string(), "TALON_ETCD_ENDPOINTS"))
    const env: Partial<StateStoreSettings> = {
      backend: yield* opt(Config.literal("memory", "etcd")("TALON_STATE_BACKEND")),
      heartbeatIntervalMs: yield* opt(Config.integer("TALON_STATE_HEARTBEAT_INTERVAL_MS")),
      unhealthyAfterMs: yield* opt(Config.integer("TALON_STATE_UNHEALTHY_AFTER_MS")),
      leaseTtlMs: yield* opt(Config.integer("TALON_STATE_LEASE_TTL_MS")),
      requestTimeoutMs: yield* opt(Config.integer("TALON_STATE_REQUEST_TIMEOUT_MS")),
      etcdEndpoints: endpoints?.map((e) => e.trim()),
      etcdPrefix: yield* opt(Config.string("TALON_ETCD_PREFIX")),
      etcdUsername: yield* opt(Config.string("TALON_ETCD_USERNAME")),
      etcdPassword: yield* opt(Config.redacted("TALON_ETCD_PASSWORD")),
      clusterToken: yield* opt(Config.redacted("TALON_CLUSTER_TOKEN")),
      tokenCheck: yield* opt(Config.literal("every-write", "takeover-only")("TALON_CLUSTER_TOKEN_CHECK"))
    }
    const pick = <K extends keyof StateStoreSettings>(key: K): StateStoreSettings[K] =>
      (key in explicit ? explicit[key] : (env[key] ?? STATE_DEFAULTS[key])) as StateStoreSettings[K]
    const settings: StateStoreSettings = {
      // Naming endpoints without naming a backend selects etcd.
      backend: explicit.backend ?? env.backend ?? ((explicit.etcdEndpoints ?? env.etcdEndpoints ?? []).length > 0 ? "etcd" : "memory"),
      heartbeatIntervalMs: pick("heartbeatIntervalMs"),
      unhealthyAfterMs: pick("unhealthyAfterMs"),
      leaseTtlMs: pick("leaseTtlMs"),
      requestTimeoutMs: pick("requestTimeoutMs"),
      etcdEndpoints: pick("etcdEndpoints"),
      etcdPrefix: pick("etcdPrefix"),
      etcdUsername: pick("etcdUsername"),
      etcdPassword: pick("etcdPassword"),
      clusterToken: pick("clusterToken"),
      tokenCheck: pick("tokenCheck")
    }
    const problem = settingsProblem(settings)
    if (problem !== null) return yield* Effect.fail(ConfigError.InvalidData([problem.path], problem.message))
    return settings
  })
