/**
 * The worker's admin HTTP surface: `/healthz` (the process serves HTTP),
 * `/readyz` (503 until registered with the coordinator, or standalone),
 * `/metrics` in the Prometheus text format, and Talon's `/api/v1/status` (the
 * status the worker reports, as Talon's JSON) with its OpenAPI document.
 * With TALON_ADMIN_TOKEN set, /api/v1 needs the token. Read-only.
 */
import { adminServer } from "../../http/tls.js"
import { HttpRouter, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Data, Effect, Layer, Option, Ref } from "effect"
import { guardAdmin } from "../../http/adminToken.js"
import { ApiError, WorkerStatus, workerOpenApi, workerStatusJson } from "../../protocol/adminApi.js"
import type { NodeStatus } from "../../protocol/status.js"
import { DataPlane } from "../plane/DataPlane.js"
import { parseHostPort } from "../../transport/address.js"
import { WorkerConfig } from "../config.js"
import { renderPrometheus, WorkerMetrics } from "../metrics.js"
import { WorkerReadiness } from "../membership/Readiness.js"
import { ServeMode } from "../server/ServeMode.js"
import { BlockStore } from "../store/BlockStore.js"

export class AdminListenError extends Data.TaggedError("AdminListenError")<{
  readonly address: string
  readonly detail: string
}> {
  override get message() {
    return `cannot serve the worker admin API on ${this.address}: ${this.detail}`
  }
}

export interface AdminHttpShape {
  /** Bound `host:port`. */
  readonly address: string
  readonly port: number
  /** Where /api/v1/status reads the worker's current status from (Membership builds it; it needs this address first). */
  readonly statusFrom: (build: Effect.Effect<NodeStatus>) => Effect.Effect<void>
}

export class AdminHttp extends Context.Tag("talon/worker/AdminHttp")<AdminHttp, AdminHttpShape>() {
  static readonly layer = Layer.scoped(
    AdminHttp,
    Effect.gen(function* () {
      const [cfg, stats, store, state, plane, mode] = yield* Effect.all([WorkerConfig, WorkerMetrics, BlockStore, WorkerReadiness, DataPlane, ServeMode])
      const hp = parseHostPort(cfg.adminAddress, { allowPortZero: true })
      if (hp === undefined) {
        return yield* Effect.fail(new AdminListenError({ address: cfg.adminAddress, detail: "expected host:port" }))
      }
      const metrics = Effect.sync(() => {
        const s = store.stats()
        return renderPrometheus(stats, {
          residentBytes: s.residentBytes,
          capacityBytes: s.perDir.reduce((n, d) => n + d.capacity, 0),
          blocks: s.blocks,
          units: s.units,
          openFiles: s.openFiles,
          dataPlane: plane.name,
          serveMode: mode.name,
          ready: state.ready,
          registered: state.registered
        })
      })
      const statusSource = yield* Ref.make(Option.none<Effect.Effect<NodeStatus>>())
      const statusRoute = Effect.flatMap(Ref.get(statusSource), (build) =>
        Option.match(build, {
          onNone: () =>
            HttpServerResponse.schemaJson(ApiError)({ error: "starting", message: "the worker has not built its first status yet; retry shortly" }, { status: 503 }),
          onSome: (status) => Effect.flatMap(status, (s) => HttpServerResponse.schemaJson(WorkerStatus)(workerStatusJson(s), { headers: { "cache-control": "no-store" } }))
        })
      ).pipe(Effect.orDie)
      const router = HttpRouter.empty.pipe(
        HttpRouter.get("/healthz", Effect.succeed(HttpServerResponse.text("ok\n"))),
        HttpRouter.get(
          "/readyz",
          Effect.sync(() =>
            HttpServerResponse.text(`${state.ready ? "ready" : "not ready"}: ${state.detail}\n`, {
              status: state.ready ? 200 : 503
            })
          )
        ),
        HttpRouter.get(
          "/metrics",
          Effect.map(metrics, (body) => HttpServerResponse.text(body, { contentType: "text/plain; version=0.0.4; charset=utf-8" }))
        ),
        HttpRouter.get("/api/v1/status", statusRoute),
        HttpRouter.get("/api/v1/openapi.json", Effect.sync(() => HttpServerResponse.unsafeJson(workerOpenApi()))),
        Effect.catchTag("RouteNotFound", () =>
          Effect.succeed(HttpServerResponse.text("not found; try /healthz, /readyz, /metrics, /api/v1/status, /api/v1/openapi.json\n", { status: 404 }))
        ),
        guardAdmin(cfg.adminToken)
      )
      const files = cfg.adminTlsCert === "" ? undefined : { cert: cfg.adminTlsCert, key: cfg.adminTlsKey }
      const makeServer = yield* adminServer(files, "worker").pipe(
        Effect.mapError((e) => new AdminListenError({ address: cfg.adminAddress, detail: e.message }))
      )
      const server = yield* NodeHttpServer.make(makeServer, { host: hp.host, port: hp.port }).pipe(
        Effect.mapError((e) => new AdminListenError({ address: cfg.adminAddress, detail: String(e.cause ?? e) }))
      )
      yield* server.serve(router)
      const port = server.address._tag === "TcpAddress" ? server.address.port : hp.port
      const address = `${hp.host.includes(":") ? `[${hp.host}]` : hp.host}:${port}`
      yield* Effect.logInfo(`worker admin HTTP on http://${address} (/healthz, /readyz, /metrics, /api/v1/status)`)
      return { address, port, statusFrom: (build) => Ref.set(statusSource, Option.some(build)) }
    })
  )
}
