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
 */
import { randomBytes, randomUUID } from "node:crypto"
import * as http from "node:http"
import { Either, Schema } from "effect"
import { azureError } from "../http/azureErrors.js"
import { internalError, s3Address, stampResponse, targetOrReject } from "../http/frontEnd.js"
import { s3Error } from "../http/s3Errors.js"
import { listenHttp, type RunningServer } from "../http/server.js"
import { handleAzure } from "./azure.js"
import { gcsError, gcsKind, handleGcs, isGcsPath } from "./gcs.js"
import { handleIdentity, isIdentityRequest } from "./identity.js"
import { TokenSettingsPatch } from "./tokens.js"
import type { Ctx, StubState } from "./context.js"
import { FaultsPatch, type RequestKind } from "./faults.js"
import { handleS3 } from "./s3.js"
import { readBounded } from "./upload.js"

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

const sendJson = (res: http.ServerResponse, status: number, value: unknown) => {
  const body = Buffer.from(JSON.stringify(value, null, 2) + "\n")
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": body.length })
  res.end(body)
}

const readJson = async (req: http.IncomingMessage): Promise<unknown> => {
  const body = await readBounded(req, 64 * 1024)
  if (body === undefined) throw new Error("body too large")
  const text = body.toString("utf8").trim()
  return text === "" ? {} : JSON.parse(text)
}

const decodePatch = Schema.decodeUnknownEither(FaultsPatch)
const decodeTokensPatch = Schema.decodeUnknownEither(TokenSettingsPatch)

const admin = async (state: StubState, req: http.IncomingMessage, res: http.ServerResponse, route: string) => {
  const method = req.method ?? "GET"
  if (route === "/_talon/health") return sendJson(res, 200, { ok: true })
  if (route === "/_talon/stats") {
    if (method === "GET") return sendJson(res, 200, state.stats.snapshot())
    if (method === "DELETE") {
      state.stats.clear()
      return sendJson(res, 200, state.stats.snapshot())
    }
  }
  if (route === "/_talon/stats/reset" && method === "POST") {
    state.stats.clear()
    return sendJson(res, 200, state.stats.snapshot())
  }
  if (route === "/_talon/faults") {
    if (method === "GET") return sendJson(res, 200, state.faults.faults)
    if (method === "POST" || method === "PUT") {
      let body: unknown
      try {
        body = await readJson(req)
      } catch (e) {
        return sendJson(res, 400, { error: `faults body must be JSON: ${(e as Error).message}` })
      }
      const patch = decodePatch(body)
      if (Either.isLeft(patch)) return sendJson(res, 400, { error: String(patch.left) })
      return sendJson(res, 200, state.faults.update(patch.right))
    }
  }
  if (route === "/_talon/tokens") {
    if (method === "GET") return sendJson(res, 200, state.tokens.snapshot())
    if (method === "POST" || method === "PUT") {
      let body: unknown
      try {
        body = await readJson(req)
      } catch (e) {
        return sendJson(res, 400, { error: `tokens body must be JSON: ${(e as Error).message}` })
      }
      const patch = decodeTokensPatch(body)
      if (Either.isLeft(patch)) return sendJson(res, 400, { error: String(patch.left) })
      return sendJson(res, 200, state.tokens.update(patch.right))
    }
  }
  if (route === "/_talon/tokens/expire" && method === "POST") {
    state.tokens.expireAll()
    return sendJson(res, 200, state.tokens.snapshot())
  }
  return sendJson(res, 404, {
    error: `unknown admin route ${method} ${route}`,
    routes: [
      "GET /_talon/health",
      "GET|DELETE /_talon/stats",
      "POST /_talon/stats/reset",
      "GET|POST /_talon/faults",
      "GET|POST /_talon/tokens",
      "POST /_talon/tokens/expire"
    ]
  })
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export const handleRequest = (state: StubState) => async (req: http.IncomingMessage, res: http.ServerResponse) => {
  const method = req.method ?? "GET"
  const target = targetOrReject(req, res)
  if (target === undefined) return
  // Identity endpoints are not storage: never faulted or counted, like the admin routes.
  if (isIdentityRequest(target.pathname, req.headers)) {
    const ctx: Ctx = { req, res, method, query: target.query, requestId: randomUUID(), state, kind: "other" }
    return handleIdentity(ctx, target.pathname).catch((e) => internalError(ctx, false, "the origin stub", e))
  }
  if (target.pathname.startsWith("/_talon/")) return admin(state, req, res, target.pathname)

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

  try {
    if (state.faults.applies(kind)) {
      const delay = state.faults.latencyMs()
      if (delay > 0) {
        state.stats.delayed++
        await sleep(delay)
      }
      if (state.faults.shouldFail()) {
        state.stats.failed++
        const mode = state.faults.faults.failureMode
        if (mode === "truncate" && kind === "get") {
          ctx.truncateBody = 0.5
          return await run(ctx)
        }
        if (mode === "reset" || mode === "truncate") {
          state.stats.reset++
          req.socket.resetAndDestroy()
          return
        }
        if (gcs) return gcsError(ctx, 503, "backendError", "Backend Error (injected fault).")
        return azure
          ? azureError(ctx, 503, "ServerBusy", "The server is busy (injected fault).")
          : s3Error(ctx, 503, "SlowDown", "Please reduce your request rate. (injected fault)")
      }
    }
    // Session credentials the stub issued (STS, IMDS) stop working when they expire, as AWS's do.
    const session = !gcs && !azure ? req.headers["x-amz-security-token"] : undefined
    if (typeof session === "string" && state.tokens.issuedHere(session) && state.tokens.checkToken(session) !== "ok") {
      return s3Error(ctx, 400, "ExpiredToken", "The provided token has expired.")
    }
    const bearer = azure ? /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? "")?.[1] : undefined
    if (bearer !== undefined && state.tokens.issuedHere(bearer) && state.tokens.checkToken(bearer) !== "ok") {
      return azureError(ctx, 401, "InvalidAuthenticationInfo", "Server failed to authenticate the request. Lifetime validation failed. The token is expired.")
    }
    await run(ctx)
  } catch (e) {
    internalError(ctx, azure, "the origin stub", e)
  }
}

export const listen = (state: StubState, host: string, port: number): Promise<RunningServer> => {
  const server = http.createServer(handleRequest(state))
  // Large uploads and deliberately slow readers are normal here; no whole-request deadline.
  server.requestTimeout = 0
  server.keepAliveTimeout = 30_000
  return listenHttp(server, host, port, (url) => (state.url = url))
}
