import * as http from "node:http"
import * as https from "node:https"
import type { Readable } from "node:stream"
import { Effect, Scope } from "effect"
import { BackendRequestError } from "./BackendStore.js"
import type { RequestPolicy } from "./policy.js"

/**
 * A minimal HTTP/1.1 client over node:http with keep-alive agents. The providers build the
 * exact path (already percent-encoded, identical to what they signed), so nothing here
 * re-encodes it.
 */
export interface OriginRequest {
  readonly method: "GET" | "HEAD" | "PUT" | "POST" | "DELETE"
  readonly protocol: "http:" | "https:"
  readonly hostname: string
  readonly port: number
  /** Encoded path plus `?query`, sent verbatim. */
  readonly path: string
  readonly headers: Record<string, string>
  readonly body?: Uint8Array | undefined
  /**
   * A body streamed as it arrives (its content-length is in `headers`). Sent once: a request
   * with one is never retried, and an error on the stream aborts the request mid-body, so the
   * origin discards what it got.
   */
  readonly stream?: Readable | undefined
}

export interface OriginResponse {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: http.IncomingMessage
}

/** Who a request is for, so every error names the object and the operation. */
export interface RequestLabel {
  readonly object: string
  readonly operation: string
}

const transientCodes = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "EAI_AGAIN",
  "ENETUNREACH",
  "EHOSTUNREACH",
  "ERR_STREAM_PREMATURE_CLOSE"
])

export const transportError = (label: RequestLabel, error: unknown): BackendRequestError => {
  const code = (error as { code?: unknown } | null)?.code
  const text = error instanceof Error ? error.message : String(error)
  return new BackendRequestError({
    object: label.object,
    operation: label.operation,
    retryable: typeof code === "string" && transientCodes.has(code),
    detail: typeof code === "string" && !text.includes(code) ? `${code}: ${text}` : text
  })
}

export const timeoutError = (label: RequestLabel, ms: number, phase: string): BackendRequestError =>
  new BackendRequestError({
    object: label.object,
    operation: label.operation,
    retryable: true,
    detail: `no ${phase} from the origin within ${ms} ms`
  })

export interface Transport {
  /**
   * Sends the request and waits (bounded by the policy's timeout) for the response head.
   * The body belongs to the scope: it is destroyed on close unless fully read, so an
   * abandoned read never pins a pooled socket.
   */
  readonly open: (request: OriginRequest, label: RequestLabel) => Effect.Effect<OriginResponse, BackendRequestError, Scope.Scope>
  /** Reads the whole body of an opened response (bounded; for error documents). */
  readonly readBody: (res: OriginResponse, label: RequestLabel) => Effect.Effect<Buffer, BackendRequestError>
  /** `open` and read the whole body (for small responses: errors, listings). */
  readonly fetch: (
    request: OriginRequest,
    label: RequestLabel
  ) => Effect.Effect<{ readonly status: number; readonly headers: http.IncomingHttpHeaders; readonly body: Buffer }, BackendRequestError>
}

/** Bodies we buffer whole (XML listings, error documents) never need more than this. */
const maxBufferedBody = 64 * 1024 * 1024

export const makeTransport = (policy: RequestPolicy): Effect.Effect<Transport, never, Scope.Scope> =>
  Effect.gen(function* () {
    const agentOptions = { keepAlive: true, maxSockets: policy.maxSockets, maxFreeSockets: 32, scheduling: "lifo" as const }
    const httpAgent = new http.Agent(agentOptions)
    const httpsAgent = new https.Agent(agentOptions)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        httpAgent.destroy()
        httpsAgent.destroy()
      })
    )

    const send = (request: OriginRequest, label: RequestLabel) =>
      Effect.async<OriginResponse, BackendRequestError>((resume) => {
        const module = request.protocol === "https:" ? https : http
        const req = module.request(
          {
            method: request.method,
            hostname: request.hostname,
            port: request.port,
            path: request.path,
            headers: request.headers,
            agent: request.protocol === "https:" ? httpsAgent : httpAgent
          },
          (res) => resume(Effect.succeed({ status: res.statusCode ?? 0, headers: res.headers, body: res }))
        )
        req.on("error", (error) => resume(Effect.fail(transportError(label, error))))
        const source = request.stream
        if (source !== undefined) {
          // The origin answers after the last byte, however long the upload takes: the response timeout starts there.
          let timer: ReturnType<typeof setTimeout> | undefined
          req.once("finish", () => {
            timer = setTimeout(() => {
              req.destroy()
              resume(Effect.fail(timeoutError(label, policy.timeoutMs, "response")))
            }, policy.timeoutMs)
          })
          req.once("close", () => clearTimeout(timer))
          source.once("error", (error) => req.destroy(error))
          source.pipe(req)
          return Effect.sync(() => {
            clearTimeout(timer)
            source.unpipe(req)
            req.destroy()
          })
        }
        if (request.body !== undefined && request.body.length > 0) req.end(request.body)
        else req.end()
        return Effect.sync(() => req.destroy())
      }).pipe((sent) =>
        request.stream !== undefined
          ? sent
          : Effect.timeoutFail(sent, {
              duration: policy.timeoutMs,
              onTimeout: () => timeoutError(label, policy.timeoutMs, "response")
            })
      )

    const open: Transport["open"] = (request, label) =>
      Effect.uninterruptibleMask((restore) =>
        restore(send(request, label)).pipe(
          Effect.tap((res) =>
            Effect.addFinalizer(() =>
              Effect.sync(() => {
                if (!res.body.complete) res.body.destroy()
              })
            )
          )
        )
      )

    const readAll = (res: OriginResponse, label: RequestLabel) =>
      Effect.async<Buffer, BackendRequestError>((resume) => {
        const parts: Array<Buffer> = []
        let size = 0
        res.body.on("data", (chunk: Buffer) => {
          size += chunk.length
          if (size > maxBufferedBody) {
            res.body.destroy()
            resume(Effect.fail(new BackendRequestError({ ...label, status: res.status, retryable: false, detail: "response body too large" })))
          } else parts.push(chunk)
        })
        res.body.on("end", () => resume(Effect.succeed(Buffer.concat(parts))))
        res.body.on("error", (error) => resume(Effect.fail(transportError(label, error))))
        if (res.body.complete && res.body.readableEnded) resume(Effect.succeed(Buffer.concat(parts)))
      }).pipe(
        Effect.timeoutFail({ duration: policy.timeoutMs, onTimeout: () => timeoutError(label, policy.timeoutMs, "response body") })
      )

    const fetch: Transport["fetch"] = (request, label) =>
      Effect.scoped(
        Effect.flatMap(open(request, label), (res) =>
          Effect.map(readAll(res, label), (body) => ({ status: res.status, headers: res.headers, body }))
        )
      )

    return { open, readBody: readAll, fetch }
  })

export const header = (headers: http.IncomingHttpHeaders, name: string): string | undefined => {
  const value = headers[name]
  return Array.isArray(value) ? value[0] : value
}
