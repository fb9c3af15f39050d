/** The request context and response helpers every S3/Azure REST front end uses (origin stub and gateway). */
import type { IncomingMessage, ServerResponse } from "node:http"

/** What the response helpers need: the origin stub's and the gateway's request contexts both extend it. */
export interface HttpCtx {
  readonly req: IncomingMessage
  readonly res: ServerResponse
  readonly method: string
  readonly requestId: string
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
