/**
 * The origin stub's HTTP server: one port, two protocols.
 *
 * How a request is routed (the rule, in order):
 *  1. `/_talon/...` is the admin API (stats, faults, health); never faulted or counted.
 *  2. Azure Blob if the request carries any `x-ms-*` header (every Azure SDK request
 *     sends `x-ms-version`) or an Azure query parameter (`restype`, `comp`). The path
 *     is then `/<account>/<container>/<blob>` (Azurite-style; any account name, one
 *     shared namespace, `devstoreaccount1` by convention).
 *  3. Otherwise S3. Virtual-host style when the Host is `<bucket>.localhost[:port]`
 *     (path = key); path style `/<bucket>/<key>` for any other host (IPs, `localhost`).
 *  (2 and 3 are splitTarget in src/http/target.ts, which the gateway routes by too.)
 *
 * Signatures are never verified (see s3.ts / azure.ts): any credentials are accepted.
 *
 * The server is the platform's (HttpServer, with an HttpRouter for the admin API); the
 * storage front ends answer on the node response itself, because the object body path
 * (objectRead.ts: two reused buffers, a rate schedule, a truncation fault) is fenced as
 * hot (docs/decisions/hot-path.md). Faults and counters are applied here, in Effect.
 */
import { randomBytes, randomUUID } from "node:crypto"
import * as http from "node:http"
import { HttpIncomingMessage, HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import type { HttpServer } from "@effect/platform/HttpServer"
import type { ServeError } from "@effect/platform/HttpServerError"
import { NodeHttpServer, NodeHttpServerRequest } from "@effect/platform-node"
import { Effect, Either, Option, type ParseResult, Schema, type Scope } from "effect"
import { azureError } from "../http/azureErrors.js"
import { internalError, s3Address, stampResponse, targetOrReject } from "../http/frontEnd.js"
import { s3Error } from "../http/s3Errors.js"
import { urlFor } from "../http/server.js"
import { handleAzure } from "./azure.js"
import { gcsError, gcsKind, handleGcs, isGcsPath } from "./gcs.js"
import { handleIdentity, isIdentityRequest } from "./identity.js"
import { TokenSettingsPatch } from "./tokens.js"
import type { Ctx, StubState } from "./context.js"
import { FaultsPatch, type RequestKind } from "./faults.js"
import { handleS3 } from "./s3.js"

const SERVER = "TalonOriginStub"

const classify = (method: string, hasObject: boolean, isList: boolean): RequestKind => {
  if (hasObject) {
    if (method === "HEAD") return "head"
    if (method === "GET") return "get"
    if (method === "PUT") return "put"
    if (method === "DELETE") return "delete"
    return "other"
  }
  return method === "GET" && isList ? "list" : "other"
}

const ADMIN_ROUTES = [
  "GET /_talon/health",
  "GET|DELETE /_talon/stats",
  "POST /_talon/stats/reset",
  "GET|POST /_talon/faults",
  "GET|POST /_talon/tokens",
  "POST /_talon/tokens/expire"
]

const MAX_ADMIN_BODY = 64 * 1024

const json = (value: unknown, status = 200) =>
  HttpServerResponse.text(JSON.stringify(value, null, 2) + "\n", { status, contentType: "application/json" })

/** A JSON body of at most 64 KiB (empty = `{}`) decoded by `schema`; a 400 saying what was wrong otherwise. */
const patchBody = <A, I>(what: string, schema: Schema.Schema<A, I>) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    // A declared length over the limit is refused unread: reading past the limit would reset the connection.
    Number(request.headers["content-length"] ?? 0) > MAX_ADMIN_BODY
      ? Effect.fail("body too large")
      : request.text.pipe(
          HttpIncomingMessage.withMaxBodySize(Option.some(MAX_ADMIN_BODY)),
          Effect.mapError((e) => (String(e.cause).includes("maxBytes") ? "body too large" : e.message))
        )
  ).pipe(
    Effect.flatMap((text) =>
      Effect.try({ try: (): unknown => (text.trim() === "" ? {} : JSON.parse(text)), catch: (e) => (e as Error).message })
    ),
    Effect.mapError((why) => json({ error: `${what} body must be JSON: ${why}` }, 400)),
    Effect.flatMap((body) =>
      Either.match(Schema.decodeUnknownEither(schema)(body), {
        onLeft: (e: ParseResult.ParseError) => Effect.fail(json({ error: String(e) }, 400)),
        onRight: Effect.succeed
      })
    )
  )

const adminRouter = (state: StubState) => {
  const stats = Effect.sync(() => json(state.stats.snapshot()))
  const clearStats = Effect.sync(() => {
    state.stats.clear()
    return json(state.stats.snapshot())
  })
  const faults = Effect.sync(() => json(state.faults.faults))
  const setFaults = patchBody("faults", FaultsPatch).pipe(
    Effect.map((patch) => json(state.faults.update(patch))),
    Effect.merge
  )
  const tokens = Effect.sync(() => json(state.tokens.snapshot()))
  const setTokens = patchBody("tokens", TokenSettingsPatch).pipe(
    Effect.map((patch) => json(state.tokens.update(patch))),
    Effect.merge
  )
  return HttpRouter.empty.pipe(
    HttpRouter.get("/_talon/health", Effect.succeed(json({ ok: true }))),
    HttpRouter.get("/_talon/stats", stats),
    HttpRouter.del("/_talon/stats", clearStats),
    HttpRouter.post("/_talon/stats/reset", clearStats),
    HttpRouter.get("/_talon/faults", faults),
    HttpRouter.post("/_talon/faults", setFaults),
    HttpRouter.put("/_talon/faults", setFaults),
    HttpRouter.get("/_talon/tokens", tokens),
    HttpRouter.post("/_talon/tokens", setTokens),
    HttpRouter.put("/_talon/tokens", setTokens),
    HttpRouter.post(
      "/_talon/tokens/expire",
      Effect.sync(() => {
        state.tokens.expireAll()
        return json(state.tokens.snapshot())
      })
    )
  )
}

/**
 * What the platform sends for a request a front end answered on the node response: nothing.
 * It waits for that response to finish (then the platform sees it ended and writes nothing);
 * a response closed before it finished interrupts the request's fiber instead.
 */
const answeredRaw = (res: http.ServerResponse) =>
  Effect.as(
    Effect.async<void>((resume) => {
      if (res.writableFinished) return resume(Effect.void)
      const done = () => resume(Effect.void)
      res.once("finish", done)
      res.once("close", done)
      return Effect.sync(() => {
        res.off("finish", done)
        res.off("close", done)
      })
    }),
    HttpServerResponse.empty()
  )

/** Identity endpoints, then S3/Azure/GCS storage with faults and counters; the front end writes the answer. */
const storage = (state: StubState) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const req = NodeHttpServerRequest.toIncomingMessage(request)
    const res = NodeHttpServerRequest.toServerResponse(request)
    return Effect.zipRight(routeStorage(state, req, res), answeredRaw(res))
  })

const routeStorage = (state: StubState, req: http.IncomingMessage, res: http.ServerResponse): Effect.Effect<void> => {
  const method = req.method ?? "GET"
  const target = targetOrReject(req, res)
  if (target === undefined) return Effect.void
  // Identity endpoints are not storage: never faulted or counted, like the admin routes.
  if (isIdentityRequest(target.pathname, req.headers)) {
    const ctx: Ctx = { req, res, method, query: target.query, requestId: randomUUID(), state, kind: "other" }
    return Effect.promise(() => handleIdentity(ctx, target.pathname).catch((e) => internalError(ctx, false, "the origin stub", e)))
  }

  // GCS's JSON API is told apart by its path shape (`/storage/v1/…`), checked before the
  // S3 rule: the stub never serves an S3 bucket named `storage`, `download` or `upload`.
  const gcs = isGcsPath(target.pathname)
  const azure = !gcs && target.protocol === "azure"
  const requestId = azure ? randomUUID() : randomBytes(8).toString("hex").toUpperCase()
  stampResponse(req, res, SERVER, azure, requestId)

  const segments = target.pathname.split("/").slice(1)
  let kind: RequestKind
  let run: (ctx: Ctx) => Promise<void>
  if (gcs) {
    kind = gcsKind(method, target.pathname, target.query)
    run = (ctx) => handleGcs(ctx, target.pathname)
  } else if (azure) {
    const hasBlob = segments.length > 2 && segments.slice(2).join("/") !== ""
    kind = classify(method, hasBlob, target.query.get("comp") === "list")
    run = (ctx) => handleAzure(ctx, segments)
  } else {
    const { bucket, rawKey } = s3Address(target, segments)
    kind = classify(method, rawKey !== undefined && rawKey !== "", bucket !== "" && !target.query.has("location"))
    run = (ctx) => handleS3(ctx, bucket === "" ? undefined : bucket, rawKey)
  }
  const ctx: Ctx = { req, res, method, query: target.query, requestId, state, kind }

  state.stats.requests[kind]++
  state.stats.begin(kind)
  res.once("close", () => state.stats.end(kind))
  if (gcs) state.stats.gcs++
  else if (azure) state.stats.azure++
  else state.stats.s3++

  const answer = Effect.suspend((): Effect.Effect<void> => {
    // Session credentials the stub issued (STS, IMDS) stop working when they expire, as AWS's do.
    const session = !gcs && !azure ? req.headers["x-amz-security-token"] : undefined
    if (typeof session === "string" && state.tokens.issuedHere(session) && state.tokens.checkToken(session) !== "ok") {
      return Effect.sync(() => s3Error(ctx, 400, "ExpiredToken", "The provided token has expired."))
    }
    const bearer = azure ? /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? "")?.[1] : undefined
    if (bearer !== undefined && state.tokens.issuedHere(bearer) && state.tokens.checkToken(bearer) !== "ok") {
      return Effect.sync(() =>
        azureError(ctx, 401, "InvalidAuthenticationInfo", "Server failed to authenticate the request. Lifetime validation failed. The token is expired.")
      )
    }
    return Effect.promise(() => run(ctx))
  })

  const faulted = Effect.suspend((): Effect.Effect<void> => {
    if (!state.faults.applies(kind)) return answer
    const delay = state.faults.latencyMs()
    const failing = Effect.suspend((): Effect.Effect<void> => {
      if (!state.faults.shouldFail()) return answer
      state.stats.failed++
      const mode = state.faults.faults.failureMode
      if (mode === "truncate" && kind === "get") {
        ctx.truncateBody = 0.5
        return answer
      }
      if (mode === "reset" || mode === "truncate") {
        return Effect.sync(() => {
          state.stats.reset++
          req.socket.resetAndDestroy()
        })
      }
      return Effect.sync(() => {
        if (gcs) gcsError(ctx, 503, "backendError", "Backend Error (injected fault).")
        else if (azure) azureError(ctx, 503, "ServerBusy", "The server is busy (injected fault).")
        else s3Error(ctx, 503, "SlowDown", "Please reduce your request rate. (injected fault)")
      })
    })
    if (delay <= 0) return failing
    state.stats.delayed++
    return Effect.zipRight(Effect.sleep(delay), failing)
  })

  return faulted.pipe(Effect.catchAllDefect((e) => Effect.sync(() => internalError(ctx, azure, "the origin stub", e))))
}

/** The stub's HTTP app: the admin router, and every other request to the storage front ends. */
export const originApp = (state: StubState) =>
  adminRouter(state).pipe(
    Effect.catchTag("RouteNotFound", (e) =>
      e.request.url.startsWith("/_talon/") && !isIdentityRequest(new URL(e.request.url, "http://stub").pathname, e.request.headers)
        ? Effect.succeed(json({ error: `unknown admin route ${e.request.method} ${e.request.url.split("?")[0]}`, routes: ADMIN_ROUTES }, 404))
        : storage(state)
    )
  )

/** Binds the stub on `host:port` (0 = ephemeral) for the scope; returns its port. */
export const serveOrigin = (state: StubState, host: string, port: number): Effect.Effect<{ port: number; url: string }, ServeError, Scope.Scope> =>
  Effect.gen(function* () {
    const nodeServer = http.createServer()
    // Large uploads and deliberately slow readers are normal here; no whole-request deadline.
    nodeServer.requestTimeout = 0
    nodeServer.keepAliveTimeout = 30_000
    const server: HttpServer = yield* NodeHttpServer.make(() => nodeServer, { host, port })
    // Runs before the platform's close: kept-alive and streaming connections would hold it open.
    yield* Effect.addFinalizer(() => Effect.sync(() => nodeServer.closeAllConnections()))
    const bound = server.address._tag === "TcpAddress" ? server.address.port : port
    state.url = urlFor(host, bound)
    yield* server.serve(originApp(state))
    return { port: bound, url: state.url }
  })
