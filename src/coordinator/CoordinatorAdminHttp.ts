/**
 * The coordinator's admin HTTP surface: liveness, readiness, Prometheus metrics, and Talon's
 * read-only management API under /api/v1 (bodies encoded with the schemas its OpenAPI
 * document is generated from, src/protocol/adminApi.ts). With an admin token every route but
 * health and metrics needs it (src/http/adminToken.ts). It never mutates membership.
 */
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { ConfigError, Effect, type Redacted, type Schema, type Scope } from "effect"
import { adminServer, type TlsFiles } from "../http/tls.js"
import { guardAdmin } from "../http/adminToken.js"
import type { ServeError } from "@effect/platform/HttpServerError"
import { formatHostPort } from "../transport/address.js"
import type { ClusterStatus } from "../protocol/clusterStatus.js"
import { ApiError, BackendStatus, CapabilitiesView, ClusterView, coordinatorOpenApi, NodeList, NodesUrlParams, NodeView } from "../protocol/adminApi.js"
import { OBJECT_LISTING_PATH } from "../protocol/objectListing.js"
import type { ObjectListingAnswer, ObjectListingQuery } from "./objectListing.js"
import { isUiPath, type UiSource, uiRouter } from "./ui/routes.js"
import * as M from "./managementApi.js"

export interface AdminSource {
  readonly cluster: Effect.Effect<ClusterStatus>
  readonly metrics: Effect.Effect<string>
  readonly ready: Effect.Effect<boolean>
  /** The registry's view with what Talon's views need around it. */
  readonly management: Effect.Effect<M.ManagementContext>
  /** The paginated JSON object listing (./objectListing.ts); absent = no route. */
  readonly listObjects?: (query: ObjectListingQuery) => Effect.Effect<ObjectListingAnswer>
  /** The management page at /ui (./ui/routes.ts); absent = no page. */
  readonly ui?: UiSource
  /** TALON_ADMIN_TOKEN; absent = the API is open. */
  readonly token?: Redacted.Redacted<string> | undefined
}

const json = <A, I>(schema: Schema.Schema<A, I>, body: A, status = 200) =>
  Effect.orDie(HttpServerResponse.schemaJson(schema)(body, { status, headers: { "cache-control": "no-store" } }))

const apiError = (status: number, error: ApiError) => json(ApiError, error, status)

/** Talon's 503 while the store is not followed, else the view. */
const whenReady = (source: AdminSource, f: (c: M.ManagementContext) => Effect.Effect<HttpServerResponse.HttpServerResponse>) =>
  Effect.flatMap(source.management, (c) => {
    const down = M.unavailable(c)
    return down === undefined ? f(c) : apiError(503, down)
  })

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

const nodesRoute = (source: AdminSource) =>
  HttpServerRequest.schemaSearchParams(NodesUrlParams).pipe(
    Effect.matchEffect({
      onFailure: (e) => apiError(400, { error: "bad_request", message: `${e.message}; role is coordinator|worker, health healthy|degraded|unhealthy|unknown, offset ≥ 0, limit 1..500` }),
      onSuccess: (query) => whenReady(source, (c) => json(NodeList, M.nodeList(c, query)))
    })
  )

const nodeRoute = (source: AdminSource) =>
  Effect.flatMap(HttpRouter.params, (params) =>
    whenReady(source, (c) => {
      const found = M.nodeById(c, params["node_id"] ?? "")
      return "error" in found ? apiError(404, found) : json(NodeView, found)
    })
  )

export const adminRouter = (source: AdminSource) => {
  const router = HttpRouter.empty.pipe(
    HttpRouter.get("/healthz", Effect.succeed(HttpServerResponse.text("ok\n"))),
    HttpRouter.get(
      "/readyz",
      Effect.map(source.ready, (ready) =>
        HttpServerResponse.text(ready ? "ready\n" : "not ready\n", { status: ready ? 200 : 503 })
      )
    ),
    // Served while the store is down too (with ready: false): `talon cluster` shows why.
    HttpRouter.get(
      "/api/v1/cluster",
      Effect.flatMap(Effect.zip(source.cluster, source.management), ([status, c]) => json(ClusterView, { ...M.clusterSummary(c), ...status }))
    ),
    HttpRouter.get("/api/v1/nodes", nodesRoute(source)),
    HttpRouter.get("/api/v1/nodes/:node_id", nodeRoute(source)),
    HttpRouter.get("/api/v1/backend", Effect.flatMap(source.management, (c) => json(BackendStatus, M.backendStatus(c)))),
    HttpRouter.get("/api/v1/capabilities", whenReady(source, (c) => json(CapabilitiesView, M.capabilities(c)))),
    HttpRouter.get("/api/v1/openapi.json", Effect.sync(() => HttpServerResponse.unsafeJson(coordinatorOpenApi()))),
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
      guardAdmin(source.token, isUiPath)(
        adminRouter(source).pipe(
          Effect.catchTag("RouteNotFound", () =>
            Effect.succeed(
              HttpServerResponse.text(
                "not found; try /healthz, /readyz, /metrics, /api/v1/cluster, /api/v1/nodes, /api/v1/nodes/<id>, /api/v1/capabilities, /api/v1/objects?prefix=/s3/<bucket>/, /api/v1/openapi.json, /ui\n",
                { status: 404 }
              )
            )
          )
        )
      )
    )
    const address = server.address
    const boundPort = address._tag === "TcpAddress" ? address.port : port
    return formatHostPort(host, boundPort)
  })
