/**
 * `talon origin`: run the origin stub until interrupted.
 * Every option falls back to `TALON_ORIGIN_<NAME>` (e.g. TALON_ORIGIN_PORT), then a default.
 */
import { Command, Options } from "@effect/cli"
import { Config, Console, Effect, Layer } from "effect"
import type { FaultsPatch, LatencyModel } from "./faults.js"
import { DEFAULT_UPLOAD_TTL_MS, OriginStub } from "./OriginStub.js"
import { seed as seedSamples } from "./seed.js"

const env = (name: string) => `TALON_ORIGIN_${name}`

const root = Options.directory("root").pipe(
  Options.withDescription("Directory holding buckets/containers (one subdirectory each)."),
  Options.withDefault(".talon/origin"),
  Options.withFallbackConfig(Config.string(env("ROOT")))
)
const host = Options.text("host").pipe(
  Options.withDefault("127.0.0.1"),
  Options.withFallbackConfig(Config.string(env("HOST")))
)
const port = Options.integer("port").pipe(
  Options.withDescription("TCP port; 0 picks a free one."),
  Options.withDefault(9100),
  Options.withFallbackConfig(Config.integer(env("PORT")))
)
const seed = Options.boolean("seed").pipe(
  Options.withDescription("Create bucket/container `talon` with sample objects (kept if already present)."),
  Options.withFallbackConfig(Config.boolean(env("SEED")))
)
const latencyMs = Options.float("latency-ms").pipe(
  Options.withDescription("Injected per-request latency: the fixed delay, or the median/minimum of --latency-tail."),
  Options.withDefault(0),
  Options.withFallbackConfig(Config.number(env("LATENCY_MS")))
)
const latencyTail = Options.choice("latency-tail", ["none", "lognormal", "pareto"]).pipe(
  Options.withDescription("Heavy-tailed latency: lognormal (sigma 1) or pareto (alpha 1.5) around --latency-ms."),
  Options.withDefault("none" as const),
  Options.withFallbackConfig(Config.literal("none", "lognormal", "pareto")(env("LATENCY_TAIL")))
)
const failureRate = Options.float("failure-rate").pipe(
  Options.withDescription("Fraction of requests that fail (0..1)."),
  Options.withDefault(0),
  Options.withFallbackConfig(Config.number(env("FAILURE_RATE")))
)
const failureMode = Options.choice("failure-mode", ["503", "reset", "truncate"]).pipe(
  Options.withDescription("503 SlowDown/ServerBusy, a TCP reset, or (GETs) a body cut off halfway."),
  Options.withDefault("503" as const),
  Options.withFallbackConfig(Config.literal("503", "reset", "truncate")(env("FAILURE_MODE")))
)
const bandwidth = Options.integer("bandwidth").pipe(
  Options.withDescription("Per-response body rate cap in bytes/s (0 = unlimited)."),
  Options.withDefault(0),
  Options.withFallbackConfig(Config.integer(env("BANDWIDTH")))
)
const faultSeed = Options.integer("fault-seed").pipe(
  Options.withDefault(1),
  Options.withFallbackConfig(Config.integer(env("FAULT_SEED")))
)

const latencyModel = (ms: number, tail: "none" | "lognormal" | "pareto"): LatencyModel =>
  ms <= 0
    ? { kind: "none" }
    : tail === "lognormal"
      ? { kind: "lognormal", medianMs: ms, sigma: 1 }
      : tail === "pareto"
        ? { kind: "pareto", minMs: ms, alpha: 1.5 }
        : { kind: "fixed", ms }

export const origin = Command.make(
  "origin",
  { root, host, port, seed, latencyMs, latencyTail, failureRate, failureMode, bandwidth, faultSeed },
  (o) =>
    Effect.gen(function* () {
      if (o.seed) {
        const r = yield* seedSamples(o.root)
        const written = r.objects.filter((x) => x.written).length
        yield* Console.log(`seeded bucket ${r.bucket}: ${r.objects.length} objects (${written} written) under ${o.root}`)
      }
      const faults: FaultsPatch = {
        latency: latencyModel(o.latencyMs, o.latencyTail),
        failureRate: o.failureRate,
        failureMode: o.failureMode,
        bandwidthBytesPerSec: o.bandwidth,
        seed: o.faultSeed
      }
      const uploadTtlMs = yield* Config.integer("TALON_ORIGIN_UPLOAD_TTL_MS").pipe(Config.withDefault(DEFAULT_UPLOAD_TTL_MS))
      yield* Effect.gen(function* () {
        const stub = yield* OriginStub
        yield* Console.log(`talon origin listening on ${stub.url}`)
        yield* Console.log(`  S3:    endpoint ${stub.url} (path-style, or <bucket>.localhost:${stub.port}), any credentials`)
        yield* Console.log(`  Azure: ${stub.azureUrl} (any account key)`)
        yield* Console.log(`  admin: ${stub.url}/_talon/stats, ${stub.url}/_talon/faults`)
        return yield* Effect.never
      }).pipe(Effect.provide(Layer.fresh(OriginStub.layer({ root: o.root, host: o.host, port: o.port, faults, uploadTtlMs }))))
    })
).pipe(Command.withDescription("Run the local origin stub: S3 and Azure Blob REST over a directory, with injectable faults."))
