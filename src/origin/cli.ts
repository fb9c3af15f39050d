/**
 * `talon origin`: run the origin stub until interrupted.
 * Every option falls back to `TALON_ORIGIN_<NAME>` (e.g. TALON_ORIGIN_PORT), then the config
 * file, then a default (./config.ts).
 */
import { Command } from "@effect/cli"
import { Console, Effect, Layer } from "effect"
import { explicitFrom, flaggedKeys, flagsOf } from "../config/cli.js"
import { resolve } from "../config/Setting.js"
import { OriginSchema, type OriginSettings } from "./config.js"
import type { FaultsPatch, LatencyModel } from "./faults.js"
import { OriginStub } from "./OriginStub.js"
import { seed as seedSamples } from "./seed.js"

/** One flag per setting, each generated from its declaration in ./config.ts. */
const originOptions = flagsOf(OriginSchema, flaggedKeys(OriginSchema))

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
  originOptions,
  (flags) =>
    Effect.gen(function* () {
      const o = yield* resolve(OriginSchema, explicitFrom<OriginSettings, keyof OriginSettings>(flags))
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
      yield* Effect.gen(function* () {
        const stub = yield* OriginStub
        yield* Console.log(`talon origin listening on ${stub.url}`)
        yield* Console.log(`  S3:    endpoint ${stub.url} (path-style, or <bucket>.localhost:${stub.port}), any credentials`)
        yield* Console.log(`  Azure: ${stub.azureUrl} (any account key)`)
        yield* Console.log(`  admin: ${stub.url}/_talon/stats, ${stub.url}/_talon/faults`)
        return yield* Effect.never
      }).pipe(Effect.provide(Layer.fresh(OriginStub.layer({ root: o.root, host: o.host, port: o.port, faults, uploadTtlMs: o.uploadTtlMs }))))
    })
).pipe(Command.withDescription("Run the local origin stub: S3 and Azure Blob REST over a directory, with injectable faults."))
