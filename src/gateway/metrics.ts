/**
 * Talon's gateway families (crates/talon-gateway/src/metrics.rs): requests by protocol,
 * operation, route, outcome, response class and failure; bytes by source; time to the
 * response head and to its end; authentication results. Observed once per request when its
 * response closes (server.ts); rendered on the admin port's /metrics.
 */
import * as http from "node:http"
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

interface Counted {
  readonly labels: Labels
  n: number
}

/** A byte counter, listed (in first-use order, as the exposition shows them) once first counted. */
interface ByteCounter extends Counted {
  readonly key: string
  listed: boolean
}

/** One protocol and operation's byte counters and latency histograms, found with one lookup per request. */
interface OperationEntries {
  readonly response: ByteCounter
  /** The body's source, counted only for requests under 400. */
  readonly cache: ByteCounter
  readonly origin: ByteCounter
  readonly headers: Histogram
  readonly total: Histogram
}

export class GatewayMetrics {
  readonly #requests = new Map<string, Counted>()
  readonly #bytes = new Map<string, Counted>()
  readonly #latency = new Map<string, { labels: Labels; h: Histogram }>()
  readonly #operations = new Map<string, OperationEntries>()
  readonly #auth = { success: 0, failure: 0 }

  authentication(ok: boolean): void {
    this.#auth[ok ? "success" : "failure"]++
  }

  // Once per request: one key string per family, the label arrays built only the first time a
  // combination is seen.
  observe(o: Observation): void {
    const failure = failureOf(o.status)
    const outcome = o.status < 400 ? "complete" : "failed"
    const responseClass = classOf(o.status)
    const key = `${o.protocol}\u0000${o.operation}\u0000${o.route}\u0000${outcome}\u0000${responseClass}\u0000${failure}`
    const counted = this.#requests.get(key)
    if (counted !== undefined) counted.n++
    else {
      this.#requests.set(key, {
        labels: [
          ["protocol", o.protocol],
          ["operation", o.operation],
          ["route", o.route],
          ["outcome", outcome],
          ["response_class", responseClass],
          ["failure", failure]
        ],
        n: 1
      })
    }
    const op = this.#operation(o.protocol, o.operation)
    this.#count(op.response, o.responseBytes)
    if (o.status < 400) this.#count(o.route === "cache" && o.operation === "read" ? op.cache : op.origin, o.responseBytes)
    op.headers.observe(o.headersSeconds)
    op.total.observe(o.totalSeconds)
  }

  #operation(protocol: Observation["protocol"], operation: GatewayOperation): OperationEntries {
    const key = `${protocol}\u0000${operation}`
    let entries = this.#operations.get(key)
    if (entries !== undefined) return entries
    const bytes = (source: string): ByteCounter => ({
      labels: [
        ["protocol", protocol],
        ["operation", operation],
        ["source", source]
      ],
      n: 0,
      key: `${key}\u0000${source}`,
      listed: false
    })
    const histogram = (phase: "headers" | "total"): Histogram => {
      const h = new Histogram()
      this.#latency.set(`${key}\u0000${phase}`, {
        labels: [
          ["protocol", protocol],
          ["operation", operation],
          ["phase", phase]
        ],
        h
      })
      return h
    }
    entries = { response: bytes("response"), cache: bytes("cache"), origin: bytes("origin"), headers: histogram("headers"), total: histogram("total") }
    this.#operations.set(key, entries)
    return entries
  }

  #count(c: ByteCounter, by: number): void {
    if (!c.listed) {
      c.listed = true
      this.#bytes.set(c.key, c)
    }
    c.n += by
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


/**
 * The gateway's responses: each notes when its head was written (Node writes every head through
 * `writeHead`, implicit ones too), so timing a request needs no wrapper of its own.
 */
export class TimedResponse extends http.ServerResponse {
  headersAt = 0
}
const baseWriteHead = http.ServerResponse.prototype.writeHead
TimedResponse.prototype.writeHead = function (this: TimedResponse, ...args: Parameters<typeof baseWriteHead>) {
  if (this.headersAt === 0) this.headersAt = performance.now()
  return baseWriteHead.apply(this, args)
} as unknown as TimedResponse["writeHead"]

/** Where a response's timing starts: call when its request arrives; `measure` it once it closes. */
export interface ResponseWatch {
  readonly res: http.ServerResponse
  readonly started: number
  readonly bytesBefore: number
  /** The head's time for a response that is not a TimedResponse. */
  headersAt: number
}

export const startWatch = (res: http.ServerResponse): ResponseWatch => {
  const watch: ResponseWatch = { res, started: performance.now(), bytesBefore: res.socket?.bytesWritten ?? 0, headersAt: 0 }
  if (!(res instanceof TimedResponse)) {
    const writeHead = res.writeHead
    res.writeHead = function (this: http.ServerResponse, ...args: Parameters<typeof writeHead>) {
      if (watch.headersAt === 0) watch.headersAt = performance.now()
      return writeHead.apply(this, args)
    } as typeof writeHead
  }
  return watch
}

/** A closed response's time to its head and to its close, and the body bytes it declared or wrote. */
export const measure = (w: ResponseWatch, done: (headersMs: number, totalMs: number, bytes: number) => void): void => {
  const { res, started, bytesBefore } = w
  const end = performance.now()
  const declared = Number(res.getHeader("content-length"))
  const bytes = res.writableFinished && Number.isFinite(declared) ? declared : Math.max(0, (res.socket?.bytesWritten ?? bytesBefore) - bytesBefore)
  const headersAt = res instanceof TimedResponse ? res.headersAt : w.headersAt
  done((headersAt === 0 ? end : headersAt) - started, end - started, bytes)
}

/**
 * Times one response: to its head and to its close; `done` gets both and the body bytes it
 * declared or wrote.
 */
export const watchResponse = (res: http.ServerResponse, done: (headersMs: number, totalMs: number, bytes: number) => void): void => {
  const w = startWatch(res)
  res.once("close", () => measure(w, done))
}
