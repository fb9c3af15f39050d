/**
 * The gateway's HTTP server: one port, both protocols, told apart by the origin
 * stub's rule (any `x-ms-*` header or an Azure query → Azure; else S3, virtual-host
 * when the Host is `<bucket>.localhost`). Per request: an id, the concurrency limit,
 * the signature check, a deadline for the response head, then the front end.
 */
import { randomUUID } from "node:crypto"
import * as http from "node:http"
import * as https from "node:https"
import { azureError } from "../http/azureErrors.js"
import { internalError, s3Address, stampResponse, targetOrReject } from "../http/frontEnd.js"
import { s3Error } from "../http/s3Errors.js"
import { listenHttp, type RunningServer } from "../http/server.js"
import { type AuthResult, verifySharedKey, verifySigV4 } from "./auth.js"
import { handleAzure } from "./azureApi.js"
import { measure, operationOf, startWatch, TimedResponse, watchResponse } from "./metrics.js"
import { type GwCtx, RequestAbort, RequestContext, type Services } from "./context.js"
import { handleS3 } from "./s3Api.js"
import { loadTls, watchTls } from "../http/tls.js"
import { type AuditRecord } from "./audit.js"
import { authenticateAzure, authenticateS3, azureAccesses, refusedAccess, s3Accesses } from "./identities.js"
import type { Access } from "./principals.js"
import { traceRequest } from "./spans.js"
import { installRawFront } from "./front/rawFront.js"
import { s3RequestId } from "./front/requestId.js"

const SERVER = "TalonGateway"


const authorize = (g: Services, ctx: GwCtx, azure: boolean, account: string | undefined): AuthResult => {
  const { options } = g
  if (!options.auth) return { ok: true }
  const received = { method: ctx.method, rawPath: ctx.rawPath, rawQuery: ctx.rawQuery, headers: ctx.req.headers }
  const nowMs = g.now()
  // A protocol with an identity file authenticates against its principals (judged by grants in handleRequest).
  const principals = g.principals
  if (principals !== undefined && (azure ? options.azureClientIdentitiesPath : options.s3ClientIdentitiesPath) !== undefined) {
    const who = azure
      ? authenticateAzure(principals.current(), received, account ?? "", { nowMs, clockSkewMs: options.clockSkewMs })
      : authenticateS3(principals.current(), received, { region: options.region, nowMs, clockSkewMs: options.clockSkewMs })
    if (who.ok) ctx.principal = who.principal
    return who.ok ? { ok: true } : who
  }
  if (azure) {
    const cred = options.credentials.azure
    if (cred === undefined) {
      return { ok: false, status: 403, code: "AuthenticationFailed", message: "Server failed to authenticate the request. This gateway accepts no Azure credentials (set TALON_GATEWAY_AZURE_ACCOUNT/KEY)." }
    }
    if (account !== cred.account) {
      return { ok: false, status: 403, code: "AuthenticationFailed", message: `Server failed to authenticate the request. Unknown account '${account ?? ""}'.` }
    }
    return verifySharedKey(received, { account: cred.account, key: cred.key, nowMs, clockSkewMs: options.clockSkewMs })
  }
  const cred = options.credentials.s3
  if (cred === undefined) {
    return { ok: false, status: 403, code: "AccessDenied", message: "This gateway accepts no S3 credentials (set TALON_GATEWAY_ACCESS_KEY_ID/SECRET_ACCESS_KEY)." }
  }
  return verifySigV4(received, {
    accessKeyId: cred.accessKeyId,
    secretAccessKey: cred.secretAccessKey,
    region: options.region,
    nowMs,
    clockSkewMs: options.clockSkewMs
  })
}

/** Whether the request names an object (a key, a blob): a read or stat rather than a list. */
const namesObject = (azure: boolean, segments: ReadonlyArray<string>, address: { readonly rawKey: string | undefined } | undefined): boolean =>
  azure || address === undefined ? segments.length >= 3 && segments[2] !== "" : (address.rawKey ?? "") !== ""

const hasBody = (req: http.IncomingMessage): boolean => {
  const length = req.headers["content-length"]
  return (length !== undefined && length !== "0") || req.headers["transfer-encoding"] !== undefined
}

export const handleRequest = (g: Services) => {
  let inflight = 0
  let uploads = 0
  return async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const method = req.method ?? "GET"
    const target = targetOrReject(req, res)
    if (target === undefined) return
    const azure = target.protocol === "azure"
    const requestId = azure ? randomUUID() : s3RequestId()
    stampResponse(req, res, SERVER, azure, requestId)
    const raw = req.url ?? "/"
    const q = raw.indexOf("?")
    const segments = target.pathname.split("/").slice(1)
    // S3's bucket and key, worked out once for the metrics, the grants and the route.
    const address = azure ? undefined : s3Address(target, segments)
    // Refused before it reached a route (busy, unsigned): Talon's route "none".
    let routed = false
    const metrics = g.metrics
    const watch = metrics === undefined ? undefined : startWatch(res)
    const aborts = new RequestAbort()
    const ctx: GwCtx = new RequestContext(req, res, method, requestId, target.query, target.pathname, q < 0 ? "" : raw.slice(q + 1), g, aborts)
    if (g.spans !== undefined) {
      const s3 = address
      const bucket = s3 === undefined ? (segments[1] ?? "") : s3.bucket
      const operation = operationOf(method, namesObject(azure, segments, s3))
      traceRequest(g.spans, ctx, { api: azure ? "azure" : "s3", operation, bucket }, () =>
        !routed ? "none" : operation === "read" ? g.route.name : "origin"
      )
    }
    g.counters.requests++
    // Uploads hold their slot while the client sends; they get their own slots so slow
    // senders cannot take the ones readers need.
    const upload = hasBody(req)
    const limit = upload ? g.options.maxConcurrentUploads : g.options.maxConcurrentRequests
    const busy = (upload ? uploads : inflight) >= limit
    let deadline: ReturnType<typeof setTimeout> | undefined
    // One listener per request: its slot, its deadline and its metrics.
    res.once("close", () => {
      if (watch !== undefined) {
        const operation = operationOf(method, namesObject(azure, segments, address))
        measure(watch, (headersMs, totalMs, bytes) =>
          metrics!.observe({
            protocol: azure ? "azure" : "s3",
            operation,
            route: !routed ? "none" : operation === "read" ? g.route.name : "origin",
            status: res.statusCode,
            responseBytes: bytes,
            headersSeconds: headersMs / 1000,
            totalSeconds: totalMs / 1000
          })
        )
      }
      if (busy) return
      if (upload) uploads--
      else inflight--
      clearTimeout(deadline)
      if (!res.writableFinished) aborts.abort()
    })
    if (busy) {
      g.counters.rejectedBusy++
      res.setHeader("Connection", "close")
      const message = `The gateway is serving its limit of ${limit} ${upload ? "uploads" : "requests"}; retry shortly.`
      return azure ? azureError(ctx, 503, "ServerBusy", message) : s3Error(ctx, 503, "SlowDown", message)
    }
    if (upload) uploads++
    else inflight++
    // The deadline covers the response head; a body then streams at the client's pace.
    deadline = setTimeout(() => {
      if (!res.headersSent) aborts.abort()
    }, g.options.responseTimeoutMs)

    try {
      const accesses =
        g.principals === undefined && g.audit === undefined
          ? undefined
          : azure
            ? azureAccesses(method, segments, target.query, req.headers)
            : s3Accesses(method, address!.bucket, address!.rawKey, target.query, req.headers)
      const audited: { decision: "allow" | "deny"; reason?: string } = { decision: "allow" }
      if (g.audit !== undefined) auditWhenDone(g, ctx, azure, method, accesses, audited)
      const verdict = authorize(g, ctx, azure, azure ? segments[0] : undefined)
      if (g.options.auth) metrics?.authentication(verdict.ok)
      if (!verdict.ok) {
        audited.decision = "deny"
        audited.reason = verdict.code
        return azure
          ? azureError(ctx, verdict.status, verdict.code, verdict.message)
          : s3Error(ctx, verdict.status, verdict.code, verdict.message)
      }
      if (ctx.principal !== undefined) {
        const refused = accesses === undefined ? "unsupported" : refusedAccess(g.principals!.current(), ctx.principal, accesses, azure ? "azure" : "s3")
        if (refused !== undefined) {
          audited.decision = "deny"
          audited.reason = "no grant"
          const what = typeof refused === "string" ? (refused === "account" ? "any bucket" : "this request") : `${refused.operation} on ${refused.namespace}/${refused.key ?? ""}`
          const message = `Principal ${ctx.principal.name} has no grant for ${what}; ask for a grant in the gateway's authorization file.`
          return azure ? azureError(ctx, 403, "AuthorizationPermissionMismatch", `This request is not authorized to perform this operation using this permission. ${message}`) : s3Error(ctx, 403, "AccessDenied", `Access Denied. ${message}`)
        }
      }
      routed = true
      if (azure) return await handleAzure(ctx, segments)
      const { bucket, rawKey } = address!
      return await handleS3(ctx, bucket === "" ? undefined : bucket, rawKey)
    } catch (e) {
      g.counters.errors++
      internalError(ctx, azure, "the gateway", e)
    }
  }
}

/** Writes the request's audit line once its response has ended (status and bytes are known only then). */
const auditWhenDone = (
  g: Services,
  ctx: GwCtx,
  azure: boolean,
  method: string,
  accesses: ReadonlyArray<Access> | undefined,
  audited: { decision: "allow" | "deny"; reason?: string }
) => {
  const first = accesses?.[0]
  watchResponse(ctx.res, (_headersMs, _totalMs, bytes) => {
    const record: AuditRecord = {
      requestId: ctx.requestId,
      protocol: azure ? "azure" : "s3",
      principal: ctx.principal?.name ?? (g.options.auth ? "anonymous" : "unauthenticated"),
      operation: first?.operation ?? (accesses === undefined ? `unsupported ${method}` : "account"),
      bucket: first?.namespace ?? "",
      key: first?.key ?? "",
      status: ctx.res.statusCode,
      bytes,
      decision: audited.decision,
      ...(audited.reason === undefined ? {} : { reason: audited.reason })
    }
    g.audit!.write(record)
  })
}

export type RunningGateway = RunningServer

export const listen = async (g: Services, host: string, port: number): Promise<RunningGateway> => {
  const options = {
    ServerResponse: TimedResponse,
    requestTimeout: g.options.requestTimeoutMs,
    headersTimeout: Math.min(60_000, g.options.requestTimeoutMs),
    keepAliveTimeout: g.options.keepAliveTimeoutMs
  }
  const files = g.options.tlsCert !== undefined && g.options.tlsKey !== undefined ? { cert: g.options.tlsCert, key: g.options.tlsKey } : undefined
  const server = files === undefined ? http.createServer(options, handleRequest(g)) : https.createServer({ ...options, ...loadTls(files) }, handleRequest(g))
  // A connection silent in both directions this long (a reader that stopped reading) is closed.
  server.setTimeout(g.options.idleTimeoutMs, (socket) => socket.destroy())
  const scheme = (url: string) => (files === undefined ? url : url.replace(/^http:/, "https:"))
  // Plain HTTP only: the raw front sends by sendfile on the socket's fd, which TLS has not.
  const front = files === undefined && g.options.front === "raw" ? installRawFront(server as http.Server, g, options.headersTimeout) : undefined
  const running = await listenHttp(server as http.Server, host, port, (url) => (g.url = scheme(url)))
  if (front !== undefined) {
    return {
      ...running,
      close: () => {
        const closed = running.close()
        front.closeAll()
        return closed
      }
    }
  }
  if (files === undefined) return running
  const stopWatching = watchTls(server as https.Server, files)
  return {
    ...running,
    url: scheme(running.url),
    close: () => {
      stopWatching()
      return running.close()
    }
  }
}

/** Never logged in full: which credentials the gateway checks, for start-up messages. */
export const describeAuth = (g: Pick<Services, "options" | "principals">): string => {
  const { auth, credentials } = g.options
  if (!auth) return "auth OFF: any request is served unsigned (local demo only)"
  const parts: Array<string> = []
  if (g.principals !== undefined) parts.push(`principals from identity files (${g.principals.summary()}), default deny`)
  if (credentials.s3) parts.push(`S3 SigV4 for access key ${credentials.s3.accessKeyId}`)
  if (credentials.azure) parts.push(`Azure Shared Key for account ${credentials.azure.account}`)
  return `auth on: ${parts.join("; ")}`
}
