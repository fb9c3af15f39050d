/**
 * `talon coordinator`: runs a coordinator until interrupted. Flags override
 * `TALON_COORDINATOR_*`, which override the defaults.
 */
import { Command, Options } from "@effect/cli"
import { Effect, Layer, Option } from "effect"
import { coordinatorBackendLayer } from "./backend.js"
import type { CoordinatorOptions } from "./config.js"
import type { StateStoreSettings } from "./state/config.js"
import { Coordinator } from "./Coordinator.js"

const opt = <A>(o: Options.Options<A>, description: string) =>
  o.pipe(Options.withDescription(description), Options.optional)

export const coordinatorOptions = {
  listen: opt(
    Options.text("listen"),
    "Control listener host:port for workers and clients (env TALON_COORDINATOR_LISTEN, default 127.0.0.1:7000)."
  ),
  adminListen: opt(
    Options.text("admin-listen"),
    "Admin HTTP host:port serving /healthz, /readyz, /api/v1/cluster, /metrics (env TALON_COORDINATOR_ADMIN_LISTEN, default 127.0.0.1:8000)."
  ),
  heartbeatIntervalMs: opt(
    Options.integer("heartbeat-interval-ms"),
    "Heartbeat interval workers are expected to keep, in ms (env TALON_COORDINATOR_HEARTBEAT_INTERVAL_MS, default 1000)."
  ),
  missedHeartbeats: opt(
    Options.integer("missed-heartbeats"),
    "A worker silent for this many intervals leaves the membership (env TALON_COORDINATOR_MISSED_HEARTBEATS, default 3)."
  ),
  readTimeoutMs: opt(
    Options.integer("read-timeout-ms"),
    "A partly received frame idle this long closes its connection, in ms (env TALON_COORDINATOR_READ_TIMEOUT_MS, default 10000)."
  ),
  adminTlsCert: opt(
    Options.text("admin-tls-cert"),
    "PEM certificate for HTTPS on the admin endpoint, with --admin-tls-key; re-read on SIGHUP or when the file changes (env TALON_COORDINATOR_ADMIN_TLS_CERT, default none: plain HTTP)."
  ),
  adminTlsKey: opt(
    Options.text("admin-tls-key"),
    "PEM private key of --admin-tls-cert (env TALON_COORDINATOR_ADMIN_TLS_KEY, default none)."
  ),
  clusterId: opt(
    Options.text("cluster-id"),
    "Cluster this coordinator serves; status heartbeats naming another cluster are refused (env TALON_COORDINATOR_CLUSTER_ID, default default)."
  ),
  state: opt(
    Options.choice("state", ["memory", "etcd"]),
    "Cluster state store: memory (this process only) or etcd (shared by every coordinator of the cluster, active-active) (env TALON_STATE_BACKEND, default memory, or etcd when endpoints are given)."
  ),
  etcdEndpoints: opt(
    Options.text("etcd-endpoints"),
    "Comma-separated etcd client URLs, e.g. http://10.0.0.1:2379,http://10.0.0.2:2379 (env TALON_ETCD_ENDPOINTS)."
  ),
  etcdPrefix: opt(
    Options.text("etcd-prefix"),
    "etcd keyspace prefix for this cluster's records (env TALON_ETCD_PREFIX, default /talon)."
  ),
  unhealthyAfterMs: opt(
    Options.integer("unhealthy-after-ms"),
    "A node silent this long leaves placement (env TALON_STATE_UNHEALTHY_AFTER_MS, default heartbeat interval x missed heartbeats)."
  ),
  leaseTtlMs: opt(
    Options.integer("lease-ttl-ms"),
    "A node silent this long loses its stored record (etcd rounds up to whole seconds) (env TALON_STATE_LEASE_TTL_MS, default twice unhealthy-after)."
  ),
  stateRequestTimeoutMs: opt(
    Options.integer("state-request-timeout-ms"),
    "Deadline for one state-store operation (env TALON_STATE_REQUEST_TIMEOUT_MS, default 3000)."
  ),
  clusterTokenCheck: opt(
    Options.choice("cluster-token-check", ["every-write", "takeover-only"]),
    "With TALON_CLUSTER_TOKEN set: require it on every write, or only to take over another live incarnation's node id (env TALON_CLUSTER_TOKEN_CHECK, default every-write)."
  )
}

/** Flags that name state-store settings rather than coordinator options. */
const STATE_FLAGS = {
  state: "backend",
  etcdEndpoints: "etcdEndpoints",
  etcdPrefix: "etcdPrefix",
  unhealthyAfterMs: "unhealthyAfterMs",
  leaseTtlMs: "leaseTtlMs",
  stateRequestTimeoutMs: "requestTimeoutMs",
  clusterTokenCheck: "tokenCheck"
} as const satisfies Record<string, keyof StateStoreSettings>

/** Flags that were given, as explicit coordinator options (the rest resolve from env/defaults). */
export const explicitCoordinatorOptions = (
  flags: Readonly<Record<string, Option.Option<string | number>>>
): Partial<CoordinatorOptions> => {
  const out: Record<string, unknown> = {}
  const state: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(flags)) {
    if (Option.isNone(value)) continue
    const stateKey = STATE_FLAGS[key as keyof typeof STATE_FLAGS]
    if (stateKey === undefined) out[key] = value.value
    else state[stateKey] = stateKey === "etcdEndpoints" ? String(value.value).split(",").map((e) => e.trim()) : value.value
  }
  if (Object.keys(state).length > 0) out.state = state
  return out as Partial<CoordinatorOptions>
}

export const coordinator = Command.make("coordinator", coordinatorOptions, (flags) =>
  Layer.launch(Coordinator.layer(explicitCoordinatorOptions(flags)).pipe(Layer.provide(coordinatorBackendLayer))).pipe(
    Effect.asVoid
  )
).pipe(
  Command.withDescription(
    "Run the coordinator: worker membership with heartbeat liveness, served from a cluster state store (memory, or etcd shared by several active-active coordinators; the cluster token comes from TALON_CLUSTER_TOKEN), the placement epoch, object metadata (StatObject/ListObjects) from the origin, and an admin HTTP API. Origin endpoints and credentials come from TALON_S3_* and TALON_AZURE_* (see the backend docs)."
  )
)
