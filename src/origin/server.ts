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
 *
 * Signatures are never verified (see s3.ts / azure.ts): any credentials are accepted.
 */
import { randomBytes, randomUUID } from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { Either, Schema } from "effect"
import { handleAzure, azureError, AZURE_API_VERSION } from "./azure.js"
import type { Ctx, StubState } from "./context.js"
import { FaultsPatch, type RequestKind } from "./faults.js"
import { s3Error, handleS3 } from "./s3.js"

const SERVER = "TalonOriginStub"
const VHOST_SUFFIX = ".localhost"

export interface Target {
  readonly protocol: "s3" | "azure"
  readonly pathname: string
  readonly query: URLSearchParams
  /** S3 only: the bucket named by a virtual-host Host header. */
  readonly vhostBucket: string | undefined
}

/** Protocol, path and query of a request, by the routing rule above (shared with the gateway). */
export const splitTarget = (req: http.IncomingMessage): Target | undefined => {
  let raw = req.url ?? "/"
  // Absolute-form request targets (proxies): drop scheme and authority without letting
  // a URL parser normalise away `..` segments.
  const abs = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/[^/?#]*/.exec(raw)
  if (abs) raw = raw.slice(abs[0].length) || "/"
  if (!raw.startsWith("/")) return undefined
  const q = raw.indexOf("?")
  const pathname = q < 0 ? raw : raw.slice(0, q)
  const query = new URLSearchParams(q < 0 ? "" : raw.slice(q + 1))
  // (A loop rather than Object.keys(…).some: no array per request.)
  let azure = query.has("restype") || query.has("comp")
  for (const h in req.headers) {
    if (azure) break
    azure = h.startsWith("x-ms-")
  }
  let vhostBucket: string | undefined
  if (!azure) {
    const host = (req.headers.host ?? "").replace(/:\d+$/, "").toLowerCase()
    if (host.endsWith(VHOST_SUFFIX) && host.length > VHOST_SUFFIX.length) vhostBucket = host.slice(0, -VHOST_SUFFIX.length)
  }
  return { protocol: azure ? "azure" : "s3", pathname, query, vhostBucket }
}

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
  const chunks: Buffer[] = []
  let size = 0
  for await (const c of req) {
    size += (c as Buffer).length
    if (size > 64 * 1024) throw new Error("body too large")
    chunks.push(c as Buffer)
  }
  const text = Buffer.concat(chunks).toString("utf8").trim()
  return text === "" ? {} : JSON.parse(text)
}

const decodePatch = Schema.decodeUnknownEither(FaultsPatch)

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
  return sendJson(res, 404, {
    error: `unknown admin route ${method} ${route}`,
    routes: ["GET /_talon/health", "GET|DELETE /_talon/stats", "POST /_talon/stats/reset", "GET|POST /_talon/faults"]
  })
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export const handleRequest = (state: StubState) => async (req: http.IncomingMessage, res: http.ServerResponse) => {
  const method = req.method ?? "GET"
  const target = splitTarget(req)
  if (target === undefined) {
    res.writeHead(400, { "Content-Type": "text/plain" })
    res.end("bad request target\n")
    return
  }
  if (target.pathname.startsWith("/_talon/")) return admin(state, req, res, target.pathname)

  const azure = target.protocol === "azure"
  const requestId = azure ? randomUUID() : randomBytes(8).toString("hex").toUpperCase()
  res.setHeader("Server", SERVER)
  if (azure) {
    res.setHeader("x-ms-request-id", requestId)
    res.setHeader("x-ms-version", req.headers["x-ms-version"] ?? AZURE_API_VERSION)
    const clientId = req.headers["x-ms-client-request-id"]
    if (typeof clientId === "string") res.setHeader("x-ms-client-request-id", clientId)
  } else {
    res.setHeader("x-amz-request-id", requestId)
    res.setHeader("x-amz-id-2", requestId)
  }

  const segments = target.pathname.split("/").slice(1)
  let kind: RequestKind
  let run: (ctx: Ctx) => Promise<void>
  if (azure) {
    const hasBlob = segments.length > 2 && segments.slice(2).join("/") !== ""
    kind = classify(method, hasBlob, target.query.get("comp") === "list")
    run = (ctx) => handleAzure(ctx, segments)
  } else {
    const [bucket, rawKey] =
      target.vhostBucket !== undefined
        ? [target.vhostBucket, target.pathname.slice(1)]
        : [segments[0] ?? "", segments.length > 1 ? segments.slice(1).join("/") : undefined]
    kind = classify(method, rawKey !== undefined && rawKey !== "", bucket !== "" && !target.query.has("location"))
    run = (ctx) => handleS3(ctx, bucket === "" ? undefined : bucket, rawKey)
  }
  const ctx: Ctx = { req, res, method, query: target.query, requestId, state, kind }

  state.stats.requests[kind]++
  if (azure) state.stats.azure++
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
        return azure
          ? azureError(ctx, 503, "ServerBusy", "The server is busy (injected fault).")
          : s3Error(ctx, 503, "SlowDown", "Please reduce your request rate. (injected fault)")
      }
    }
    await run(ctx)
  } catch (e) {
    if (res.headersSent) {
      res.destroy()
      return
    }
    const message = `internal error in the origin stub: ${(e as Error).message ?? String(e)}`
    if (azure) azureError(ctx, 500, "InternalError", message)
    else s3Error(ctx, 500, "InternalError", message)
  }
}

export interface RunningServer {
  readonly server: http.Server
  readonly host: string
  readonly port: number
  readonly url: string
  readonly close: () => Promise<void>
}

export const urlFor = (host: string, port: number): string => {
  const h = host === "0.0.0.0" || host === "" ? "127.0.0.1" : host === "::" ? "[::1]" : host.includes(":") ? `[${host}]` : host
  return `http://${h}:${port}`
}

/** Binds `server` (ephemeral port when 0); `onUrl` learns the URL before anyone can reach it. */
export const listenHttp = (server: http.Server, host: string, port: number, onUrl: (url: string) => void = () => {}): Promise<RunningServer> =>
  new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(port, host, () => {
      server.off("error", reject)
      const actual = (server.address() as AddressInfo).port
      const url = urlFor(host, actual)
      onUrl(url)
      resolve({
        server,
        host,
        port: actual,
        url,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done())
            server.closeAllConnections()
          })
      })
    })
  })

export const listen = (state: StubState, host: string, port: number): Promise<RunningServer> => {
  const server = http.createServer(handleRequest(state))
  // Large uploads and deliberately slow readers are normal here; no whole-request deadline.
  server.requestTimeout = 0
  server.keepAliveTimeout = 30_000
  return listenHttp(server, host, port, (url) => (state.url = url))
}
