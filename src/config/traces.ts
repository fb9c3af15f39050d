/**
 * TALON_OTLP_ENDPOINT, declared once for every process that exports spans (coordinator,
 * worker, gateway), and the tracing layer built from it. The standard
 * OTEL_EXPORTER_OTLP_ENDPOINT is its fallback rather than an alias: OpenTelemetry's rule is
 * that a product's own variable wins, so both set with different values is not an error.
 */
import { Config, type ConfigError, Effect, Layer, Option } from "effect"
import { tracingLayer } from "../transport/tracing.js"
import * as K from "./kinds.js"
import { component, resolve } from "./Setting.js"

/** The standard variable every OpenTelemetry SDK reads. */
export const OTEL_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"

export interface TracesSettings {
  /** Collector base URL; spans go to `<endpoint>/v1/traces`. Unset: no exporter is loaded. */
  readonly endpoint: string | undefined
}

const httpUrl = (u: string | undefined): string | undefined => {
  if (u === undefined) return undefined
  try {
    const url = new URL(u)
    return url.protocol === "http:" || url.protocol === "https:" ? undefined : "must be an http:// or https:// URL"
  } catch {
    return "must be an http:// or https:// URL"
  }
}

export const TracesSchema = component<TracesSettings>({
  name: "Traces (coordinator, worker, gateway)",
  summary:
    "OTLP/HTTP (JSON) export of spans: the coordinator's control requests, a worker's miss path, the gateway's requests. Unset, the exporter is never loaded and no span is made.",
  settings: {
    endpoint: {
      kind: K.optional(K.text),
      default: undefined,
      env: "TALON_OTLP_ENDPOINT",
      flag: false,
      example: "http://127.0.0.1:4318",
      shownDefault: `${OTEL_ENDPOINT_ENV}, else none: no traces`,
      help: `OTLP/HTTP collector base URL; spans are posted as JSON to <endpoint>/v1/traces. Falls back to the standard ${OTEL_ENDPOINT_ENV}`,
      check: httpUrl
    }
  }
})

/** The collector base URL: TALON_OTLP_ENDPOINT (environment, then config file), else OTEL_EXPORTER_OTLP_ENDPOINT, else none. */
export const otlpEndpoint: Effect.Effect<string | undefined, ConfigError.ConfigError> = Effect.gen(function* () {
  const own = (yield* resolve(TracesSchema)).endpoint?.trim()
  const standard = Option.getOrUndefined(yield* Config.option(Config.string(OTEL_ENDPOINT_ENV)))?.trim()
  const url = own !== undefined && own !== "" ? own : standard
  return url === undefined || url === "" ? undefined : url.replace(/\/+$/, "")
})

/** The OTLP tracer for `service` when an endpoint is configured, else the empty layer. */
export const tracesLayer = (service: string): Layer.Layer<never, ConfigError.ConfigError> =>
  Layer.unwrapEffect(Effect.map(otlpEndpoint, (endpoint) => tracingLayer(service, endpoint)))
