/**
 * The gateway's request spans. Its request path is plain async code (no fiber per request),
 * so spans are made on the tracer the tracing layer installed in the gateway's runtime and
 * ended by hand; effects run for a request (its origin stat) take the request span as their
 * parent and so land in the same trace. Absent (`Services.spans` undefined) when tracing is
 * off: the request path then only tests that field.
 */
import { type Clock, Context, Effect, Exit, Option, type Tracer } from "effect"
import type * as http from "node:http"
import type { GwCtx } from "./context.js"

export interface GatewaySpans {
  /** A span started now, a child of `parent` (a root when undefined). */
  readonly start: (name: string, parent: Tracer.Span | undefined, kind: Tracer.SpanKind, attributes: Record<string, unknown>) => Tracer.Span
  /** Ends `span` now; a `failure` marks it as an error with that message. */
  readonly end: (span: Tracer.Span, failure?: string) => void
}

export const makeSpans = (tracer: Tracer.Tracer, clock: Clock.Clock): GatewaySpans => ({
  start: (name, parent, kind, attributes) => {
    const span = tracer.span(name, parent === undefined ? Option.none() : Option.some(parent), Context.empty(), [], clock.unsafeCurrentTimeNanos(), kind)
    for (const key in attributes) span.attribute(key, attributes[key])
    return span
  },
  end: (span, failure) => span.end(clock.unsafeCurrentTimeNanos(), failure === undefined ? Exit.void : Exit.fail(failure))
})

/** The tracer and clock of the running effect, as `GatewaySpans`. */
export const currentSpans: Effect.Effect<GatewaySpans> = Effect.zipWith(Effect.tracer, Effect.clock, makeSpans)

export const ROUTE_ATTRIBUTE = "talon.gateway.route"

/**
 * Starts `talon.gateway.request` on `ctx` and ends it when the response closes, with its
 * status and route (`none` when refused before routing: busy, unsigned, no grant).
 */
export const traceRequest = (
  spans: GatewaySpans,
  ctx: GwCtx,
  attributes: { readonly api: "s3" | "azure"; readonly operation: string; readonly bucket: string },
  routeOf: () => string
): void => {
  const span = spans.start("talon.gateway.request", undefined, "server", {
    "http.request.method": ctx.method,
    "talon.gateway.api": attributes.api,
    "talon.gateway.operation": attributes.operation,
    "talon.bucket": attributes.bucket,
    "talon.request_id": ctx.requestId
  })
  ctx.span = span
  const res: http.ServerResponse = ctx.res
  res.once("close", () => {
    span.attribute("http.response.status_code", res.statusCode)
    if (!span.attributes.has(ROUTE_ATTRIBUTE)) span.attribute(ROUTE_ATTRIBUTE, routeOf())
    const cut = !res.writableFinished
    spans.end(span, res.statusCode >= 500 ? `HTTP ${res.statusCode}` : cut ? "response cut before its end" : undefined)
  })
}
