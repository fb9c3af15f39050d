/**
 * Coordinator settings, one declaration each (src/config/Setting.ts): explicit option (a
 * flag, or a program embedding the layer) > `TALON_COORDINATOR_*` (environment, then
 * config file) > default.
 */
import { type ConfigError, Effect, type Redacted } from "effect"
import * as K from "../config/kinds.js"
import * as S from "../config/declare.js"
import { component, defaultsOf, resolve } from "../config/Setting.js"
import { resolveStateStoreSettings, type StateStoreSettings, type StateTiming } from "./state/config.js"
import { notBlank, positive } from "../config/checks.js"
import { TALON_COORDINATOR_REFUSED } from "./talonNames.js"
import { adminTokenSetting } from "../config/adminToken.js"

/** The coordinator's own settings (one declaration each in CoordinatorSchema). */
export interface CoordinatorSettings {
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
  /** PEM certificate and key for HTTPS on the admin endpoint; absent = plain HTTP. */
  readonly adminTlsCert?: string | undefined
  readonly adminTlsKey?: string | undefined
  /** TALON_ADMIN_TOKEN: the bearer token /api/v1 demands; absent = open. */
  readonly adminToken?: Redacted.Redacted<string> | undefined
  /**
   * Who answers StatObject/ListObjects: `workers` (Talon's design: a live worker asks the
   * origin, the coordinator holds no credentials), `origin` (this coordinator's own), `auto`
   * (the origin when credentials are configured, else workers).
   */
  readonly objectMetadata: "auto" | "workers" | "origin"
  /** Control listener over TLS (Talon's control TLS settings): certificate, key, client CA (mTLS), trust domain. */
  readonly controlTlsCertPath?: string | undefined
  readonly controlTlsKeyPath?: string | undefined
  readonly controlTlsCaCertPath?: string | undefined
  readonly controlTlsTrustDomain?: string | undefined
  /** Workers serve their data ports over TLS (--data-tls): stats and listings asked of them go over TLS with the control TLS files. */
  readonly dataTls: boolean
}

export interface CoordinatorOptions extends CoordinatorSettings {
  /**
   * The cluster state store every control operation is served from. Unset
   * fields come from TALON_STATE_* / TALON_ETCD_* / TALON_CLUSTER_TOKEN (or
   * the file's [state]/[etcd] tables); unset timings derive from the heartbeat
   * settings (see `stateTiming`).
   */
  readonly state?: Partial<StateStoreSettings> | undefined
}

export const CoordinatorSchema = component<CoordinatorSettings>({
  name: "coordinator",
  summary: "`talon coordinator`: membership, the placement epoch, object metadata and the admin API.",
  prefix: "TALON_COORDINATOR",
  settings: {
    listen: S.listen("127.0.0.1:7000", "Control listener host:port for workers and clients", { example: "0.0.0.0:7000" }),
    adminListen: S.listen("127.0.0.1:8000", "Admin HTTP host:port serving /healthz, /readyz, /api/v1/cluster, /metrics", { example: "0.0.0.0:8000" }),
    heartbeatIntervalMs: S.integer(1000, "Heartbeat interval workers are expected to keep, in ms", positive),
    missedHeartbeats: S.integer(3, "A worker silent for this many intervals leaves the membership", positive),
    readTimeoutMs: S.integer(10_000, "A partly received frame idle this long closes its connection, in ms", positive),
    clusterId: S.text("default", "Cluster this coordinator serves; status heartbeats naming another cluster are refused", {
      example: "prod",
      check: notBlank
    }),
    adminTlsCert: S.unset(
      K.text,
      "PEM certificate for HTTPS on the admin endpoint, with --admin-tls-key; re-read on SIGHUP or when the file changes",
      { shownDefault: "none: plain HTTP", example: "/etc/talon/admin.pem" }
    ),
    adminTlsKey: S.unset(K.text, "PEM private key of --admin-tls-cert", { example: "/etc/talon/admin-key.pem" }),
    adminToken: adminTokenSetting,
    objectMetadata: S.oneOf(
      ["auto", "workers", "origin"],
      "Who answers StatObject/ListObjects: workers (a live worker asks the origin; the coordinator needs no origin credentials), origin (the coordinator's own TALON_S3_*/TALON_AZURE_* credentials), auto (origin when those are set, else workers)",
      { example: "workers" }
    ),
    controlTlsCertPath: S.unset(K.text, "PEM certificate of the control listener: serve TLS (re-read when the file changes; new connections use the new one)", {
      shownDefault: "none: plain TCP",
      example: "/etc/talon/tls/tls.crt"
    }),
    controlTlsKeyPath: S.unset(K.text, "PEM private key of --control-tls-cert-path", { example: "/etc/talon/tls/tls.key" }),
    controlTlsCaCertPath: S.unset(K.text, "PEM CA bundle: require client certificates signed by it on the control listener (mTLS)", {
      example: "/etc/talon/tls/ca.crt"
    }),
    controlTlsTrustDomain: S.unset(K.text, "With mTLS, peers must carry a URI SAN spiffe://<this>/talon/<cluster>/<role>/<node>", {
      example: "cluster.local"
    }),
    dataTls: S.toggle(
      "Workers serve their data ports over TLS (worker --data-tls): the stats and listings this coordinator asks of them go over TLS with the control TLS files"
    )
  },
  refused: TALON_COORDINATOR_REFUSED,
  check: (o) =>
    (o.adminTlsCert === undefined) !== (o.adminTlsKey === undefined)
      ? {
          key: o.adminTlsCert === undefined ? "adminTlsCert" : "adminTlsKey",
          message: "is missing: admin HTTPS needs both a certificate and a key (--admin-tls-cert and --admin-tls-key)"
        }
      : (o.controlTlsCertPath === undefined) !== (o.controlTlsKeyPath === undefined)
        ? { key: o.controlTlsCertPath === undefined ? "controlTlsCertPath" : "controlTlsKeyPath", message: "is missing: control TLS needs both a certificate and a key" }
        : o.controlTlsCertPath === undefined && (o.controlTlsCaCertPath !== undefined || o.controlTlsTrustDomain !== undefined)
          ? { key: "controlTlsCertPath", message: "is missing: a control client CA or trust domain needs TLS on (--control-tls-cert-path and --control-tls-key-path)" }
          : o.controlTlsTrustDomain !== undefined && o.controlTlsCaCertPath === undefined
            ? { key: "controlTlsCaCertPath", message: "is missing: a trust domain checks client certificates, which only mTLS asks for (--control-tls-ca-cert-path)" }
            : o.dataTls && o.controlTlsCertPath === undefined
              ? { key: "dataTls", message: "needs --control-tls-cert-path and --control-tls-key-path: workers' data ports are dialed with the control TLS files" }
              : undefined
})

export const COORDINATOR_DEFAULTS: CoordinatorSettings = defaultsOf(CoordinatorSchema)

export const livenessWindowMs = (options: CoordinatorSettings): number =>
  options.heartbeatIntervalMs * options.missedHeartbeats

/** Fills every option not given explicitly from `TALON_COORDINATOR_*` (environment, file), then the defaults. */
export const resolveCoordinatorOptions = (
  explicit: Partial<CoordinatorOptions> = {}
): Effect.Effect<CoordinatorOptions, ConfigError.ConfigError> => {
  const { state, ...own } = explicit
  return Effect.map(resolve(CoordinatorSchema, own), (settings) => (state === undefined ? settings : { ...settings, state }))
}

/**
 * Store timings implied by the coordinator's heartbeat settings: a node is out
 * of placement after `missedHeartbeats` silent intervals (the liveness window)
 * and its record is gone after two windows.
 */
export const stateTiming = (options: CoordinatorSettings): Pick<StateTiming, "heartbeatIntervalMs" | "unhealthyAfterMs" | "leaseTtlMs"> => {
  const window = livenessWindowMs(options)
  const unhealthyAfterMs = Math.max(window, options.heartbeatIntervalMs + 1)
  return { heartbeatIntervalMs: options.heartbeatIntervalMs, unhealthyAfterMs, leaseTtlMs: 2 * unhealthyAfterMs }
}

/**
 * The state-store settings a coordinator runs with: explicit `state` fields >
 * TALON_STATE_* / TALON_ETCD_* (environment, file) > timings derived from the
 * heartbeat settings > the store's defaults.
 */
export const resolveCoordinatorState = (options: CoordinatorOptions): Effect.Effect<StateStoreSettings, ConfigError.ConfigError> => {
  // An absent flag arrives as an undefined field; drop those so they do not hide the environment.
  const explicit = Object.fromEntries(Object.entries(options.state ?? {}).filter(([, v]) => v !== undefined)) as Partial<StateStoreSettings>
  return resolveStateStoreSettings(explicit, stateTiming(options))
}
