/**
 * Answers a request by forwarding it to the origin (forward.ts) and relaying the origin's
 * answer: its status, code and body as they were, so a client sees the origin's 4xx (a bad
 * key, a conflict, a missing upload) rather than a retryable 503. Only an origin the gateway
 * could not reach is a 503. Objects the request may change are invalidated whatever the
 * outcome (a failed write may still have happened).
 */
import type { IncomingMessage } from "node:http"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import { header as originHeader } from "../backend/http.js"
import { errorDocument } from "../backend/xml.js"
import type { ObjectId } from "../core/ids.js"
import { header } from "../http/context.js"
import { rawQueryPairs } from "./auth.js"
import { BodyGuard, BodyLimit, BodyTimeout, PayloadHashMismatch } from "./bodyGuard.js"
import type { GwCtx } from "./context.js"
import type { ForwardRequest } from "./forward.js"
import { NotConfigured } from "./forward.js"
import { COMMIT_STATE, type Dialect } from "./objectOps.js"
import { credentialFailure } from "./originIdentity.js"

/** Part and block bodies: S3's part limit. */
export const MAX_PART_BYTES = 5 * 1024 * 1024 * 1024

const DROPPED_REQUEST_HEADERS = new Set([
  "host",
  "authorization",
  "connection",
  "keep-alive",
  "expect",
  "transfer-encoding",
  "te",
  "upgrade",
  "proxy-authorization",
  "x-amz-date",
  "x-amz-security-token",
  "x-ms-date",
  "date"
])

const DROPPED_RESPONSE_HEADERS = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "server",
  "date",
  "x-amz-request-id",
  "x-amz-id-2",
  "x-ms-request-id",
  "x-ms-version",
  "x-ms-client-request-id"
])

/** The origin's word for a temporary credential that no longer works (S3 session, Entra token). */
const EXPIRED_CODES = new Set(["ExpiredToken", "TokenRefreshRequired", "InvalidToken", "InvalidAuthenticationInfo"])
const CREDENTIAL_CODES = new Set(["SignatureDoesNotMatch", "InvalidAccessKeyId", "AuthenticationFailed", "InvalidSecurity", "AuthorizationFailure"])

export interface PassOptions {
  readonly provider: "s3" | "azure"
  readonly bucket: string
  readonly key: string | undefined
  /** Objects this request may change (invalidated when it is done). */
  readonly invalidate?: ReadonlyArray<ObjectId>
  /** Largest body accepted; `undefined` means no body is expected. */
  readonly maxBody?: number | undefined
  /** A body already read (small XML documents the gateway had to inspect). */
  readonly body?: Buffer | undefined
  /** Headers to set or (undefined) remove after the client's are copied. */
  readonly headers?: Record<string, string | undefined>
  /** Rewrites a small successful XML answer (endpoints that must name the gateway). */
  readonly rewrite?: (xml: string) => string
}

const hasBody = (ctx: GwCtx) => {
  const length = header(ctx, "content-length")
  return (length !== undefined && length !== "0") || header(ctx, "transfer-encoding") !== undefined
}

const forwardedQuery = (ctx: GwCtx, provider: "s3" | "azure"): Array<[string, string]> => {
  const pairs = rawQueryPairs(ctx.rawQuery) ?? [...ctx.query]
  return provider === "s3" ? pairs.filter(([k]) => !/^x-amz-/i.test(k) && k !== "x-id") : pairs
}

export const passThrough = async (ctx: GwCtx, d: Dialect, o: PassOptions): Promise<void> => {
  const g = ctx.g
  const headers: Record<string, string> = {}
  for (const [k, v] of Object.entries(ctx.req.headers)) {
    if (v === undefined || DROPPED_REQUEST_HEADERS.has(k)) continue
    headers[k] = Array.isArray(v) ? v.join(",") : v
  }
  for (const [k, v] of Object.entries(o.headers ?? {})) {
    if (v === undefined) delete headers[k]
    else headers[k] = v
  }
  const limit = o.maxBody ?? 0
  let guard: BodyGuard | undefined
  let body: Readable | undefined
  if (o.body !== undefined) {
    headers["content-length"] = String(o.body.length)
    body = Readable.from([o.body])
  } else if (hasBody(ctx)) {
    const declared = Number(header(ctx, header(ctx, "x-amz-decoded-content-length") !== undefined ? "x-amz-decoded-content-length" : "content-length") ?? 0)
    if (declared > limit) return tooLarge(ctx, d, limit)
    const sha = header(ctx, "x-amz-content-sha256")
    guard = new BodyGuard({
      // aws-chunked framing adds a few bytes per chunk to the decoded size.
      maxBytes: header(ctx, "x-amz-decoded-content-length") !== undefined ? limit + Math.ceil(limit / 1024) + 65536 : limit,
      idleMs: g.options.bodyIdleMs,
      minBytesPerSec: g.options.minBodyBytesPerSec,
      now: g.now,
      sha256: sha !== undefined && /^[0-9a-f]{64}$/.test(sha) ? sha : undefined
    })
    body = guard
    ctx.req.pipe(guard)
    ctx.req.on("error", (e) => guard?.destroy(e))
  } else {
    ctx.req.resume()
  }

  const controller = new AbortController()
  const onClose = () => {
    if (!ctx.res.writableFinished) controller.abort()
  }
  ctx.res.once("close", onClose)
  // The deadline for the origin's answer starts once the whole body has been sent.
  let headTimer: NodeJS.Timeout | undefined
  const armHeadDeadline = () => {
    headTimer = setTimeout(() => controller.abort(), g.options.responseTimeoutMs)
  }
  if (body === undefined) armHeadDeadline()
  else body.once("end", armHeadDeadline)

  const request: ForwardRequest = {
    method: ctx.method,
    bucket: o.bucket,
    key: o.key,
    query: forwardedQuery(ctx, o.provider),
    headers,
    body
  }
  let answer: IncomingMessage
  try {
    answer = await (o.provider === "s3" ? g.origin.forward.s3(request, controller.signal) : g.origin.forward.azure(request, controller.signal))
  } catch (e) {
    clearTimeout(headTimer)
    invalidate(ctx, o)
    return failed(ctx, d, e, guard)
  } finally {
    ctx.res.off("close", onClose)
  }
  clearTimeout(headTimer)
  invalidate(ctx, o)
  return relay(ctx, d, answer, o)
}

const invalidate = (ctx: GwCtx, o: PassOptions) => {
  for (const object of o.invalidate ?? []) ctx.g.stats.written(object)
}

const tooLarge = (ctx: GwCtx, d: Dialect, limit: number) => {
  ctx.res.setHeader("Connection", "close")
  const s3 = d.codes.busy === "SlowDown"
  return s3
    ? d.error(ctx, 400, "EntityTooLarge", `Your proposed upload exceeds the maximum allowed object size (${limit} bytes through this gateway)`)
    : d.error(ctx, 413, "RequestBodyTooLarge", `The request body is too large and exceeds the maximum permissible limit (${limit} bytes through this gateway).`)
}

const failed = (ctx: GwCtx, d: Dialect, e: unknown, guard: BodyGuard | undefined) => {
  if (ctx.res.headersSent || ctx.res.destroyed) return
  const cause = guard?.errored ?? e
  // The body was not read to its end: the connection cannot carry another request.
  if (guard !== undefined && !guard.writableFinished) ctx.res.setHeader("Connection", "close")
  if (cause instanceof BodyLimit) return tooLarge(ctx, d, cause.limit)
  if (cause instanceof BodyTimeout) {
    ctx.g.counters.errors++
    return d.error(ctx, 400, "RequestTimeout", `Your socket connection to the server was not read from or written to within the timeout period: ${cause.reason}.`)
  }
  if (cause instanceof PayloadHashMismatch) return d.error(ctx, 400, "XAmzContentSHA256Mismatch", cause.message)
  if (e instanceof NotConfigured) return d.error(ctx, 501, d.codes.notImplemented, e.message)
  ctx.g.counters.errors++
  // The workload identity gave no credentials: nothing reached the origin.
  const noCredentials = credentialFailure(e)
  if (noCredentials !== undefined) return d.error(ctx, 503, d.codes.unavailable, `The gateway could not sign for the origin: ${noCredentials.message}`)
  const code = (e as { code?: string }).code
  const sent = code !== "ECONNREFUSED" && code !== "ENOTFOUND" && code !== "EAI_AGAIN"
  const detail = e instanceof Error ? e.message : String(e)
  return d.error(
    ctx,
    503,
    d.codes.unavailable,
    sent
      ? `The origin connection failed after the request was sent; a write may or may not have been applied (read the object to find out): ${detail}`
      : `The origin is unavailable: ${detail}`,
    sent ? { [COMMIT_STATE]: "indeterminate" } : {}
  )
}

const SMALL = 1024 * 1024

const relay = async (ctx: GwCtx, d: Dialect, answer: IncomingMessage, o: PassOptions): Promise<void> => {
  const status = answer.statusCode ?? 502
  const temporary = ctx.g.origin.forward.temporaryCredentials(o.provider)
  if (status === 401 || status === 403 || (status === 400 && temporary)) {
    const text = await readSmall(answer)
    const code = errorDocument(text).code ?? originHeader(answer.headers, "x-ms-error-code") ?? ""
    if (temporary && EXPIRED_CODES.has(code)) {
      // Revoked or expired before the gateway renewed it: drop it; the client's retry signs with a new one.
      ctx.g.origin.forward.credentialsRefused(o.provider)
      return d.error(ctx, 503, d.codes.unavailable, `The origin refused the gateway's temporary credentials (${code}); new ones are fetched: retry.`)
    }
    if (status === 400) return send(ctx, answer, status, Buffer.from(text))
    if (CREDENTIAL_CODES.has(code) || code === "") {
      return d.error(ctx, 500, d.codes.internal, `The origin refused the gateway's own credentials (${code || status}); fix TALON_S3_*/TALON_AZURE_* on the gateway.`)
    }
    return send(ctx, answer, status, Buffer.from(text))
  }
  if (o.rewrite !== undefined && status < 300 && ctx.method !== "HEAD") {
    return send(ctx, answer, status, Buffer.from(o.rewrite(await readSmall(answer))))
  }
  copyHead(ctx, answer, status)
  try {
    await pipeline(answer, ctx.res)
  } catch {
    ctx.g.counters.aborted++
    ctx.res.destroy()
  }
}

const copyHead = (ctx: GwCtx, answer: IncomingMessage, status: number, length?: number) => {
  for (const [k, v] of Object.entries(answer.headers)) {
    if (v === undefined || DROPPED_RESPONSE_HEADERS.has(k)) continue
    ctx.res.setHeader(k, v)
  }
  if (length !== undefined) ctx.res.setHeader("content-length", length)
  ctx.res.writeHead(status)
}

const send = (ctx: GwCtx, answer: IncomingMessage, status: number, body: Buffer) => {
  copyHead(ctx, answer, status, ctx.method === "HEAD" ? undefined : body.length)
  ctx.res.end(ctx.method === "HEAD" ? undefined : body)
}

const readSmall = async (answer: IncomingMessage): Promise<string> => {
  const chunks: Array<Buffer> = []
  let size = 0
  for await (const c of answer) {
    size += (c as Buffer).length
    if (size > SMALL) break
    chunks.push(c as Buffer)
  }
  answer.destroy()
  return Buffer.concat(chunks).toString("utf8")
}
