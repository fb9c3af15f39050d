/** The mount's admin HTTP: `/healthz` (the mount answers) and `/metrics` (Prometheus text), like the other components. */
import * as http from "node:http"
import { HttpRouter, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Data, Effect, type Scope } from "effect"
import { parseHostPort } from "../transport/address.js"

export class MountAdminError extends Data.TaggedError("MountAdminError")<{ readonly address: string; readonly detail: string }> {
  override get message() {
    return `cannot serve the mount's admin API on ${this.address}: ${this.detail} (choose another with --admin-listen, or 127.0.0.1:0 for any free port)`
  }
}

/** Serves until the scope closes; the bound `host:port`. */
export const serveMountAdmin = (
  listen: string,
  health: () => { readonly ok: boolean; readonly detail: string },
  metrics: () => string
): Effect.Effect<string, MountAdminError, Scope.Scope> =>
  Effect.gen(function* () {
    const hp = parseHostPort(listen, { allowPortZero: true })
    if (hp === undefined) return yield* new MountAdminError({ address: listen, detail: "expected host:port" })
    const router = HttpRouter.empty.pipe(
      HttpRouter.get(
        "/healthz",
        Effect.sync(() => {
          const h = health()
          return HttpServerResponse.text(`${h.ok ? "ok" : "unhealthy"}: ${h.detail}\n`, { status: h.ok ? 200 : 503 })
        })
      ),
      HttpRouter.get("/metrics", Effect.sync(() => HttpServerResponse.text(metrics(), { contentType: "text/plain; version=0.0.4; charset=utf-8" }))),
      Effect.catchTag("RouteNotFound", () => Effect.succeed(HttpServerResponse.text("not found; try /healthz, /metrics\n", { status: 404 })))
    )
    const server = yield* NodeHttpServer.make(() => http.createServer(), { host: hp.host, port: hp.port }).pipe(
      Effect.mapError((e) => new MountAdminError({ address: listen, detail: String(e.cause ?? e) }))
    )
    yield* server.serve(router)
    const port = server.address._tag === "TcpAddress" ? server.address.port : hp.port
    return `${hp.host.includes(":") ? `[${hp.host}]` : hp.host}:${port}`
  })
