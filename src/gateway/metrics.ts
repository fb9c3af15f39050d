/**
 * Talon's gateway families (crates/talon-gateway/src/metrics.rs): requests by protocol,
 * operation, route, outcome, response class and failure; bytes by source; time to the
 * response head and to its end; authentication results. Observed once per request when its
 * response closes (server.ts); rendered on the admin port's /metrics.
 */
import type * as http from "node:http"
import { Exposition, Histogram, type Labels } from "../core/exposition.js"
import { VERSION } from "../core/version.js"
import type { RouteName } from "./config.js"

export type GatewayOperation = "stat" | "read" | "list" | "write" | "delete" | "unsupported"

/** What a request asks for, from its method and whether it names an object (a key, a blob). */
export const operationOf = (method: string, namesObject: boolean): GatewayOperation => {
  switch (method) {
    case "GET":
      return namesObject ? "read" : "list"
    case "HEAD":
      return namesObject ? "stat" : "list"
    case "PUT":
    case "POST":
      return "write"
    case "DELETE":
      return "delete"
    default:
      return "unsupported"
  }
}

/** Talon's failure reason of a status. */
export const failureOf = (status: number): string =>
  status < 400
    ? "none"
    : status === 401 || status === 403
      ? "authentication"
      : status === 404
        ? "not_found"
        : status === 412 || status === 304
          ? "precondition"
          : status === 429
            ? "rate_limited"
            : status === 503
              ? "cache_unavailable"
              : status === 504 || status === 408
                ? "timeout"
                : status === 501
                  ? "unsupported"
                  : status < 500
                    ? "invalid_request"
                    : "internal"

export interface Observation {
  readonly protocol: "s3" | "azure"
  readonly operation: GatewayOperation
  /** Where the bytes came from: the configured route for reads, the origin for the rest; none when refused before routing. */
  readonly route: RouteName | "none"
  readonly status: number
  readonly responseBytes: number
  readonly headersSeconds: number
  readonly totalSeconds: number
}

const classOf = (status: number) => (status < 200 ? "1xx" : status < 300 ? "2xx" : status < 400 ? "3xx" : status < 500 ? "4xx" : "5xx")

export class GatewayMetrics {
  readonly #requests = new Map<string, { labels: Labels; n: number }>()
  readonly #bytes = new Map<string, { labels: Labels; n: number }>()
  readonly #latency = new Map<string, { labels: Labels; h: Histogram }>()
  readonly #auth = { success: 0, failure: 0 }

  authentication(ok: boolean): void {
    this.#auth[ok ? "success" : "failure"]++
  }

  observe(o: Observation): void {
    const failure = failureOf(o.status)
    const requestLabels: Labels = [
      ["protocol", o.protocol],
      ["operation", o.operation],
      ["route", o.route],
      ["outcome", o.status < 400 ? "complete" : "failed"],
      ["response_class", classOf(o.status)],
      ["failure", failure]
    ]
    bump(this.#requests, requestLabels, 1)
    const source = o.route === "cache" && o.operation === "read" ? "cache" : "origin"
    for (const s of ["response", ...(o.status < 400 ? [source] : [])]) {
      bump(
        this.#bytes,
        [
          ["protocol", o.protocol],
          ["operation", o.operation],
          ["source", s]
        ],
        o.responseBytes
      )
    }
    for (const [phase, seconds] of [
      ["headers", o.headersSeconds],
      ["total", o.totalSeconds]
    ] as const) {
      const labels: Labels = [
        ["protocol", o.protocol],
        ["operation", o.operation],
        ["phase", phase]
      ]
      const key = labels.map(([, v]) => v).join("\u0000")
      let entry = this.#latency.get(key)
      if (entry === undefined) this.#latency.set(key, (entry = { labels, h: new Histogram() }))
      entry.h.observe(seconds)
    }
  }

  render(): string {
    return new Exposition()
      .gauge("talon_gateway_build_info", "Gateway build information.", [[[["version", VERSION]], 1]])
      .counter(
        "talon_gateway_requests_total",
        "Gateway requests by bounded provider-neutral result dimensions.",
        [...this.#requests.values()].map((e) => [e.labels, e.n] as const)
      )
      .counter(
        "talon_gateway_bytes_total",
        "Gateway bytes by bounded source dimension.",
        [...this.#bytes.values()].map((e) => [e.labels, e.n] as const)
      )
      .histogram(
        "talon_gateway_request_duration_seconds",
        "Gateway time to response headers and body completion.",
        [...this.#latency.values()].map((e) => [e.labels, e.h] as const)
      )
      .counter("talon_gateway_authentication_total", "Gateway authentication results.", [
        [[["result", "success"]], this.#auth.success],
        [[["result", "failure"]], this.#auth.failure]
      ])
      .text()
  }
}

const bump = (m: Map<string, { labels: Labels; n: number }>, labels: Labels, by: number) => {
  const key = labels.map(([, v]) => v).join("\u0000")
  const e = m.get(key)
  if (e === undefined) m.set(key, { labels, n: by })
  else e.n += by
}

/**
 * Times one response: to its head (Node writes every head through `writeHead`, implicit ones
 * too) and to its close; `done` gets both and the body bytes it declared or wrote.
 */
export const watchResponse = (res: http.ServerResponse, done: (headersMs: number, totalMs: number, bytes: number) => void): void => {
  const started = performance.now()
  let headersAt = 0
  const writeHead = res.writeHead
  res.writeHead = function (this: http.ServerResponse, ...args: Parameters<typeof writeHead>) {
    if (headersAt === 0) headersAt = performance.now()
    return writeHead.apply(this, args)
  } as typeof writeHead
  const bytesBefore = res.socket?.bytesWritten ?? 0
  res.once("close", () => {
    const end = performance.now()
    const declared = Number(res.getHeader("content-length"))
    const bytes = res.writableFinished && Number.isFinite(declared) ? declared : Math.max(0, (res.socket?.bytesWritten ?? bytesBefore) - bytesBefore)
    done((headersAt === 0 ? end : headersAt) - started, end - started, bytes)
  })
}
