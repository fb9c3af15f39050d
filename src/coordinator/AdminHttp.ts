/**
 * The coordinator's admin HTTP surface: liveness, readiness, the cluster view
 * and Prometheus metrics. Read-only; it never mutates membership.
 */
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { ConfigError, Effect, type Scope } from "effect"
import { adminServer, type TlsFiles } from "../http/tls.js"
import type { ServeError } from "@effect/platform/HttpServerError"
import { formatHostPort } from "../transport/address.js"
import type { ClusterStatus } from "../protocol/clusterStatus.js"
import { OBJECT_LISTING_PATH } from "../protocol/objectListing.js"
import type { ObjectListingAnswer, ObjectListingQuery } from "./objectListing.js"
import { type UiSource, uiRouter } from "./ui/routes.js"

export interface AdminSource {
  readonly cluster: Effect.Effect<ClusterStatus>
  readonly metrics: Effect.Effect<string>
  readonly ready: Effect.Effect<boolean>
  /** The paginated JSON object listing (./objectListing.ts); absent = no route. */
  readonly listObjects?: (query: ObjectListingQuery) => Effect.Effect<ObjectListingAnswer>
  /** The management page at /ui (./ui/routes.ts); absent = no page. */
  readonly ui?: UiSource
}

const listingRoute = (list: (query: ObjectListingQuery) => Effect.Effect<ObjectListingAnswer>) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const params = new URL(request.url, "http://admin").searchParams
    const one = (name: string) => params.get(name) ?? undefined
    return Effect.map(list({ prefix: one("prefix"), delimiter: one("delimiter"), cursor: one("cursor"), limit: one("limit") }), (answer) =>
      answer.status === 200
        ? HttpServerResponse.unsafeJson(answer.page)
        : HttpServerResponse.unsafeJson({ error: answer.error }, { status: answer.status })
    )
  })

export const adminRouter = (source: AdminSource) => {
  const router = HttpRouter.empty.pipe(
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
  const listed = source.listObjects === undefined ? router : router.pipe(HttpRouter.get(OBJECT_LISTING_PATH, listingRoute(source.listObjects)))
  return source.ui === undefined ? listed : HttpRouter.concat(listed, uiRouter(source.ui))
}

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
            HttpServerResponse.text("not found; try /healthz, /readyz, /api/v1/cluster, /api/v1/objects?prefix=/s3/<bucket>/, /metrics, /ui\n", { status: 404 })
          )
        )
      )
    )
    const address = server.address
    const boundPort = address._tag === "TcpAddress" ? address.port : port
    return formatHostPort(host, boundPort)
  })
