/**
 * The gateway's admin port: `/healthz` (the process serves HTTP), `/readyz` (Talon's
 * `{ready, reasons}`; 503 while the origin does not answer, or, on the cache route, the
 * cluster has no worker), `/metrics` (Talon's gateway families). Apart from the S3/Azure
 * port so a scraper or a probe never takes a request slot or needs a signature.
 */
import { HttpRouter, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Data, Duration, Effect, Either, type Scope } from "effect"
import { adminServer } from "../http/tls.js"
import { formatHostPort } from "../transport/address.js"
import type { OriginHttpShape } from "./OriginHttp.js"
import type { RouteShape } from "./Route.js"

export class GatewayAdminError extends Data.TaggedError("GatewayAdminError")<{ readonly address: string; readonly detail: string }> {
  override get message() {
    return `cannot serve the gateway admin API on ${this.address}: ${this.detail} (pick another --admin-addr, or "" for none)`
  }
}

/** A probe that gets no answer within this long counts as unreachable. */
const PROBE_TIMEOUT = Duration.seconds(2)
/** Any bucket name: a 404 or 403 still proves the origin answers. */
const PROBE_BUCKET = "talon-readiness-probe"

/** Why the gateway cannot serve now (empty when it can). */
export const readinessReasons = (route: RouteShape, origin: OriginHttpShape): Effect.Effect<ReadonlyArray<string>> => {
  const probe = origin.s3Configured ? origin.headBucket(PROBE_BUCKET) : origin.azureConfigured ? origin.headContainer(PROBE_BUCKET) : undefined
  const originReason: Effect.Effect<string | undefined> =
    probe === undefined
      ? Effect.succeed("no origin is configured (TALON_S3_* or TALON_AZURE_*)")
      : probe.pipe(
          Effect.timeout(PROBE_TIMEOUT),
          Effect.either,
          Effect.map((r) =>
            Either.isRight(r) || typeof (r.left as { status?: unknown }).status === "number"
              ? undefined
              : `the origin does not answer: ${r.left.message}`
          )
        )
  const workerReason: Effect.Effect<string | undefined> =
    route.workers === undefined
      ? Effect.succeed(undefined)
      : Effect.map(route.workers, (n) => (n > 0 ? undefined : "no cache worker is reachable (the coordinator lists none, or does not answer)"))
  return Effect.map(Effect.all([originReason, workerReason], { concurrency: 2 }), (rs) => rs.filter((r): r is string => r !== undefined))
}

export const serveGatewayAdmin = (
  host: string,
  port: number,
  source: { readonly reasons: Effect.Effect<ReadonlyArray<string>>; readonly metrics: () => string }
): Effect.Effect<string, GatewayAdminError, Scope.Scope> =>
  Effect.gen(function* () {
    const address = formatHostPort(host, port)
    const make = yield* adminServer(undefined, "gateway").pipe(Effect.mapError((e) => new GatewayAdminError({ address, detail: e.message })))
    const server = yield* NodeHttpServer.make(make, { host, port }).pipe(
      Effect.mapError((e) => new GatewayAdminError({ address, detail: String(e.cause ?? e) }))
    )
    const router = HttpRouter.empty.pipe(
      HttpRouter.get("/healthz", Effect.succeed(HttpServerResponse.text("ok\n"))),
      HttpRouter.get(
        "/readyz",
        Effect.map(source.reasons, (reasons) => HttpServerResponse.unsafeJson({ ready: reasons.length === 0, reasons }, { status: reasons.length === 0 ? 200 : 503 }))
      ),
      HttpRouter.get(
        "/metrics",
        Effect.sync(() => HttpServerResponse.text(source.metrics(), { contentType: "text/plain; version=0.0.4; charset=utf-8" }))
      ),
      Effect.catchTag("RouteNotFound", () => Effect.succeed(HttpServerResponse.text("not found; try /healthz, /readyz, /metrics\n", { status: 404 })))
    )
    yield* server.serve(router)
    return formatHostPort(host, server.address._tag === "TcpAddress" ? server.address.port : port)
  })
