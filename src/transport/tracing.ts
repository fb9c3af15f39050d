/**
 * Trace export over OTLP/HTTP (JSON) when a collector is configured (TALON_OTLP_ENDPOINT or
 * the standard OTEL_EXPORTER_OTLP_ENDPOINT, resolved in src/config/traces.ts). Off, nothing of the exporter is loaded
 * (its module is imported only when an endpoint is set) and `traced` returns the effect
 * untouched, so a process without an endpoint allocates no spans at all. The hit path
 * never calls `traced`. Trace context does not cross the data protocol (Talon's frames have
 * no field for it): each process's spans form their own traces.
 */
import { FetchHttpClient } from "@effect/platform"
import { Effect, Layer } from "effect"

let enabled = false


/** A span around `effect` while tracing is on; the effect itself otherwise. */
export const traced =
  (name: string, attributes?: Record<string, unknown>) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    enabled ? Effect.withSpan(effect, name, attributes === undefined ? undefined : { attributes }) : effect

/**
 * The OTLP tracer for `service`, exporting to `<endpoint>/v1/traces`; Layer.empty when no
 * endpoint is set. Spans still buffered are sent when the layer's scope closes.
 */
export const tracingLayer = (service: string, endpoint: string | undefined): Layer.Layer<never> =>
  endpoint === undefined
    ? Layer.empty
    : Layer.unwrapEffect(
        Effect.promise(async () => {
          const [{ layer }, { layerJson }] = await Promise.all([
            import("@effect/opentelemetry/OtlpTracer"),
            import("@effect/opentelemetry/OtlpSerialization")
          ])
          enabled = true
          return layer({ url: `${endpoint}/v1/traces`, resource: { serviceName: service }, exportInterval: "1 second" }).pipe(
            Layer.provide(layerJson),
            Layer.provide(FetchHttpClient.layer)
          )
        })
      )
