/** Per-request context and response helpers shared by the S3 and Azure front ends. */
import type { IncomingMessage, ServerResponse } from "node:http"
import type { FaultState, RequestKind } from "./faults.js"
import type { StatsCounter } from "./stats.js"

export interface StubState {
  readonly root: string
  readonly stats: StatsCounter
  readonly faults: FaultState
  /** Base URL the server answers on, for Azure's ServiceEndpoint attributes. */
  url: string
}

/** What the response helpers need: also satisfied by the gateway's own request context. */
export interface HttpCtx {
  readonly req: IncomingMessage
  readonly res: ServerResponse
  readonly method: string
  readonly requestId: string
}

export interface Ctx extends HttpCtx {
  readonly query: URLSearchParams
  readonly state: StubState
  /** Set once the request is classified; faults and stats key on it. */
  kind: RequestKind
  /** Fault injection: reset the connection after this fraction of a GET body. */
  truncateBody?: number
}

export const header = (ctx: HttpCtx, name: string): string | undefined => {
  const v = ctx.req.headers[name]
  return Array.isArray(v) ? v.join(",") : v
}

export const sendXml = (ctx: HttpCtx, status: number, body: string, headers: Record<string, string | number> = {}): void => {
  const buf = Buffer.from(body, "utf8")
  ctx.res.writeHead(status, { ...headers, "Content-Type": "application/xml", "Content-Length": buf.length })
  ctx.res.end(ctx.method === "HEAD" ? undefined : buf)
}

export const sendEmpty = (ctx: HttpCtx, status: number, headers: Record<string, string | number> = {}): void => {
  ctx.res.writeHead(status, { "Content-Length": 0, ...headers })
  ctx.res.end()
}

/** Drains an unused request body so the connection can be reused. */
export const discardBody = (ctx: HttpCtx): void => {
  ctx.req.resume()
}

/** S3/Azure-style decode of a raw path remainder; `undefined` for malformed escapes. */
export const decodePath = (raw: string): string | undefined => {
  try {
    return decodeURIComponent(raw)
  } catch {
    return undefined
  }
}
