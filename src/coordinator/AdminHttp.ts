/**
 * The coordinator's admin HTTP surface: liveness, readiness, the cluster view
 * and Prometheus metrics. Read-only; it never mutates membership.
 */
import { HttpRouter, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { ConfigError, Effect, type Scope } from "effect"
import { adminServer, type TlsFiles } from "../http/tls.js"
import type { ServeError } from "@effect/platform/HttpServerError"
import { formatHostPort } from "../transport/address.js"
import type { ClusterStatus } from "../protocol/clusterStatus.js"

export interface AdminSource {
  readonly cluster: Effect.Effect<ClusterStatus>
  readonly metrics: Effect.Effect<string>
  readonly ready: Effect.Effect<boolean>
}

export const adminRouter = (source: AdminSource) =>
  HttpRouter.empty.pipe(
    HttpRouter.get("/healthz", Effect.succeed(HttpServerResponse.text("ok\n"))),
    HttpRouter.get(
      "/readyz",
      Effect.map(source.ready, (ready) =>
        HttpServerResponse.text(ready ? "ready\n" : "not ready\n", { status: ready ? 200 : 503 })
      )
    ),
    HttpRouter.get(
      "/api/v1/cluster",
      Effect.map(source.cluster, (status) => HttpServerResponse.unsafeJson(status))
    ),
    HttpRouter.get(
      "/metrics",
      Effect.map(source.metrics, (body) =>
        HttpServerResponse.text(body, { contentType: "text/plain; version=0.0.4; charset=utf-8" })
      )
    )
  )

/** Binds the admin server; returns the `host:port` it listens on (port 0 resolved). */
export const serveAdmin = (
  host: string,
  port: number,
  source: AdminSource,
  tls?: TlsFiles
): Effect.Effect<string, ServeError | ConfigError.ConfigError, Scope.Scope> =>
  Effect.gen(function* () {
    const make = yield* adminServer(tls, "coordinator").pipe(
      Effect.mapError((e) => ConfigError.InvalidData(["TALON_COORDINATOR_ADMIN_TLS_CERT"], e.message))
    )
    const server = yield* NodeHttpServer.make(make, { host, port })
    yield* server.serve(
      adminRouter(source).pipe(
        Effect.catchTag("RouteNotFound", () =>
          Effect.succeed(
            HttpServerResponse.text("not found; try /healthz, /readyz, /api/v1/cluster, /metrics\n", { status: 404 })
          )
        )
      )
    )
    const address = server.address
    const boundPort = address._tag === "TcpAddress" ? address.port : port
    return formatHostPort(host, boundPort)
  })
