/**
 * State-store settings. Resolution: explicit option (flag, embedding program)
 * > `TALON_STATE_*` / `TALON_ETCD_*` / `TALON_CLUSTER_TOKEN` through Effect
 * Config (environment, then the config file), one declaration each (StateStoreSchema)
 * > the defaults here (Talon's: 5 s heartbeat, 15 s unhealthy, 30 s lease).
 */
import { ConfigError, Effect, Redacted } from "effect"
import * as K from "../../config/kinds.js"
import { component, invalid, resolve, setting, withDefaults } from "../../config/Setting.js"
import { clusterTokenSetting } from "../../config/clusterToken.js"

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
  /** etcd over TLS: the CA its server certificates chain to, and this coordinator's client certificate and key (Talon's etcd TLS settings). */
  readonly etcdCaCertPath?: string | undefined
  readonly etcdClientCertPath?: string | undefined
  readonly etcdClientKeyPath?: string | undefined
  readonly clusterToken: Redacted.Redacted<string> | undefined
  /**
   * With a token configured: `every-write` refuses any put without it;
   * `takeover-only` demands it only to replace another live incarnation's record.
   */
  readonly tokenCheck: TokenCheck
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
    if ((s.etcdClientCertPath === undefined) !== (s.etcdClientKeyPath === undefined)) {
      return { path: "TALON_ETCD_CLIENT_KEY_PATH", message: "an etcd client certificate needs both TALON_ETCD_CLIENT_CERT_PATH and TALON_ETCD_CLIENT_KEY_PATH" }
    }
    if (s.etcdClientCertPath !== undefined && s.etcdCaCertPath === undefined) {
      return { path: "TALON_ETCD_CA_CERT_PATH", message: "an etcd client certificate is used over TLS, which needs the CA of etcd's server certificates (TALON_ETCD_CA_CERT_PATH)" }
    }
    if ((s.etcdUsername === undefined) !== (s.etcdPassword === undefined)) {
      return { path: "TALON_ETCD_PASSWORD", message: "etcd authentication needs both TALON_ETCD_USERNAME and TALON_ETCD_PASSWORD" }
    }
  }
  if (s.clusterToken !== undefined && Redacted.value(s.clusterToken).length < 16) {
    return { path: "TALON_CLUSTER_TOKEN", message: "the cluster token must be at least 16 characters (generate one with `openssl rand -hex 32`)" }
  }
  return null
}

const positiveMs = (n: number) => (Number.isSafeInteger(n) && n > 0 ? undefined : "must be a positive whole number of milliseconds")

/** What the settings are read as: the backend may be left to follow from the endpoints. */
type StateStoreInput = Omit<StateStoreSettings, "backend"> & { readonly backend: StateStoreSettings["backend"] | undefined }

/** What the settings are read as (exported for the coordinator's flags). */
export type { StateStoreInput }

export const StateStoreSchema = component<StateStoreInput>({
  name: "coordinator state store",
  summary:
    "Where coordinators keep cluster state (membership records with leases), read by `talon coordinator`; set in the environment or the config file.",
  settings: {
    backend: setting(K.optional(K.oneOf("memory", "etcd")), {
      env: "TALON_STATE_BACKEND",
      flag: "state",
      default: undefined,
      shownDefault: "etcd when endpoints are set, else memory",
      aliases: ["TALON_COORDINATOR_STATE_BACKEND"],
      help: "memory: state lives in this coordinator only; etcd: shared by every coordinator of the cluster (active-active)",
      example: "etcd"
    }),
    heartbeatIntervalMs: setting(K.integer, {
      env: "TALON_STATE_HEARTBEAT_INTERVAL_MS",
      default: 5_000,
      shownDefault: "the coordinator's heartbeat interval",
      help: "How often nodes send their status, in ms",
      example: "5000",
      check: positiveMs
    }),
    unhealthyAfterMs: setting(K.integer, {
      env: "TALON_STATE_UNHEALTHY_AFTER_MS",
      flag: "unhealthy-after-ms",
      default: 15_000,
      shownDefault: "the coordinator's heartbeat interval x missed heartbeats",
      help: "A node whose last accepted write is older than this is reported unhealthy and leaves placement, in ms",
      example: "15000",
      check: positiveMs,
      aliases: ["TALON_COORDINATOR_UNHEALTHY_AFTER_MS"]
    }),
    leaseTtlMs: setting(K.integer, {
      env: "TALON_STATE_LEASE_TTL_MS",
      flag: "lease-ttl-ms",
      default: 30_000,
      shownDefault: "twice unhealthy-after",
      help: "A node whose last accepted write is older than this disappears (lease expiry; etcd rounds up to whole seconds), in ms",
      example: "30000",
      check: positiveMs,
      aliases: ["TALON_COORDINATOR_LEASE_TTL_MS"]
    }),
    requestTimeoutMs: setting(K.integer, {
      env: "TALON_STATE_REQUEST_TIMEOUT_MS",
      flag: "state-request-timeout-ms",
      default: 3_000,
      help: "Deadline for one state-store operation, in ms",
      example: "3000",
      check: positiveMs,
      aliases: ["TALON_COORDINATOR_REQUEST_TIMEOUT_MS"]
    }),
    etcdEndpoints: setting(K.list("URLs"), {
      env: "TALON_ETCD_ENDPOINTS",
      flag: "etcd-endpoints",
      default: [],
      shownDefault: "none",
      help: "etcd client URLs, comma-separated; a bare host:port gets http://",
      example: "http://10.0.0.1:2379,http://10.0.0.2:2379",
      aliases: ["TALON_COORDINATOR_ETCD_ENDPOINTS"]
    }),
    etcdPrefix: setting(K.text, {
      env: "TALON_ETCD_PREFIX",
      flag: "etcd-prefix",
      default: "/talon",
      help: "Keyspace prefix; records live under <prefix>/clusters/<cluster>/nodes/<role>/<node>",
      example: "/talon"
    }),
    etcdUsername: setting(K.optional(K.text), {
      env: "TALON_ETCD_USERNAME",
      flag: "etcd-username",
      default: undefined,
      shownDefault: "none",
      help: "etcd password authentication: the user (with TALON_ETCD_PASSWORD)",
      example: "talon",
      aliases: ["TALON_COORDINATOR_ETCD_USERNAME"]
    }),
    etcdPassword: setting(K.optional(K.secret), {
      env: "TALON_ETCD_PASSWORD",
      default: undefined,
      shownDefault: "none",
      help: "etcd password authentication: the password (with TALON_ETCD_USERNAME)",
      example: "<password>",
      aliases: ["TALON_COORDINATOR_ETCD_PASSWORD"]
    }),
    etcdCaCertPath: setting(K.optional(K.text), {
      env: "TALON_ETCD_CA_CERT_PATH",
      flag: "etcd-ca-cert-path",
      default: undefined,
      shownDefault: "none: plain etcd",
      help: "etcd over TLS: PEM CA bundle etcd's server certificates chain to (endpoints then use https://)",
      example: "/etc/talon/etcd/ca.crt"
    }),
    etcdClientCertPath: setting(K.optional(K.text), {
      env: "TALON_ETCD_CLIENT_CERT_PATH",
      flag: "etcd-client-cert-path",
      default: undefined,
      shownDefault: "none",
      help: "etcd over TLS: PEM client certificate this coordinator presents (etcd's --client-cert-auth)",
      example: "/etc/talon/etcd/client.crt"
    }),
    etcdClientKeyPath: setting(K.optional(K.text), {
      env: "TALON_ETCD_CLIENT_KEY_PATH",
      flag: "etcd-client-key-path",
      default: undefined,
      shownDefault: "none",
      help: "etcd over TLS: PEM private key of TALON_ETCD_CLIENT_CERT_PATH",
      example: "/etc/talon/etcd/client.key"
    }),
    clusterToken: clusterTokenSetting,
    tokenCheck: setting(K.oneOf("every-write", "takeover-only"), {
      env: "TALON_CLUSTER_TOKEN_CHECK",
      flag: "cluster-token-check",
      default: "every-write",
      help: "With a token: every-write refuses any write without it; takeover-only demands it only to replace another live incarnation's record",
      example: "takeover-only"
    })
  }
})

/**
 * Fills every setting not given explicitly from the environment, then the
 * config file, then `defaults`, then the schema's defaults; validated.
 */
export const resolveStateStoreSettings = (
  explicit: Partial<StateStoreSettings> = {},
  defaults: Partial<StateStoreSettings> = {}
): Effect.Effect<StateStoreSettings, ConfigError.ConfigError> =>
  Effect.gen(function* () {
    const input = yield* resolve(withDefaults<StateStoreInput>(StateStoreSchema, defaults), explicit)
    const settings: StateStoreSettings = {
      ...input,
      etcdEndpoints: input.etcdEndpoints.map((e) => e.trim()),
      // Naming endpoints without naming a backend selects etcd.
      backend: input.backend ?? (input.etcdEndpoints.length > 0 ? "etcd" : "memory")
    }
    const problem = settingsProblem(settings)
    if (problem === null) return settings
    const blamed = Object.values(StateStoreSchema.settings).find((s) => s.env === problem.path)
    return yield* Effect.fail(
      blamed === undefined ? ConfigError.InvalidData([problem.path], `${problem.path}: ${problem.message}`) : invalid(blamed, problem.message)
    )
  })
