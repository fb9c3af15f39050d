/**
 * `talon coordinator`: runs a coordinator until interrupted. Flags override
 * `TALON_COORDINATOR_*`, which override the defaults.
 */
import { Command, Options } from "@effect/cli"
import { Effect, Layer, Option } from "effect"
import { coordinatorBackendLayer } from "./backend.js"
import type { CoordinatorOptions } from "./config.js"
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
  )
}

/** Flags that were given, as explicit coordinator options (the rest resolve from env/defaults). */
export const explicitCoordinatorOptions = (
  flags: Readonly<Record<string, Option.Option<string | number>>>
): Partial<CoordinatorOptions> => {
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(flags)) if (Option.isSome(value)) out[key] = value.value
  return out as Partial<CoordinatorOptions>
}

export const coordinator = Command.make("coordinator", coordinatorOptions, (flags) =>
  Layer.launch(Coordinator.layer(explicitCoordinatorOptions(flags)).pipe(Layer.provide(coordinatorBackendLayer))).pipe(
    Effect.asVoid
  )
).pipe(
  Command.withDescription(
    "Run the coordinator: worker membership with heartbeat liveness, the placement epoch, object metadata (StatObject/ListObjects) from the origin, and an admin HTTP API. Origin endpoints and credentials come from TALON_S3_* and TALON_AZURE_* (see the backend docs)."
  )
)
