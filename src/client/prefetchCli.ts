/**
 * `talon prefetch s3://bucket/prefix`: warms a dataset before a job reads it (./prefetch.ts).
 * Progress goes to stderr (a bar on a terminal, a line every few seconds otherwise), the
 * summary to stdout; any failed Load makes the command fail after the summary.
 */
import { Args, Command } from "@effect/cli"
import { Console, Effect, Schedule } from "effect"
import { explicitFrom, flaggedKeys, flagsOf } from "../config/cli.js"
import { resolve } from "../config/Setting.js"
import { ClientSchema, type TalonClientOptions } from "./config.js"
import { Prefetch, type PrefetchProgress } from "./prefetch.js"
import { clusterCapacity } from "./prefetchCapacity.js"
import { PrefetchSchema, type PrefetchSettings } from "./prefetchConfig.js"
import { PrefetchIncomplete } from "./prefetchErrors.js"
import { renderBar, renderLine, renderSummary } from "./prefetchProgress.js"

// `--replicas` is prefetch's own here (owners warmed), not the client's (owners a read tries).
const clientKeys = flaggedKeys(ClientSchema).filter((k) => k !== "replicas")
const clientFlags = flagsOf(ClientSchema, clientKeys)
const prefetchKeys = flaggedKeys(PrefetchSchema)
const prefetchFlags = flagsOf(PrefetchSchema, prefetchKeys)

export const prefetch = Command.make(
  "prefetch",
  {
    prefix: Args.text({ name: "prefix" }).pipe(
      Args.withDescription("What to warm: s3://bucket/prefix or az://container/prefix (every object whose key starts with it).")
    ),
    ...prefetchFlags,
    ...clientFlags
  },
  ({ prefix, ...flags }) =>
    Effect.gen(function* () {
      const settings = yield* resolve(PrefetchSchema, explicitFrom<PrefetchSettings, (typeof prefetchKeys)[number]>(flags, prefetchKeys))
      const clientOptions = explicitFrom<TalonClientOptions, (typeof clientKeys)[number]>(flags, clientKeys)
      const capacity =
        settings.admin === undefined || settings.force ? undefined : yield* clusterCapacity(settings.admin, settings.adminToken)
      if (settings.admin === undefined && !settings.force) {
        yield* Console.error("prefetch: capacity not checked (give the coordinator's admin address with --admin to check the prefix fits)")
      }
      const tty = process.stderr.isTTY === true
      let latest: PrefetchProgress | undefined
      const draw = Effect.sync(() => {
        if (latest === undefined) return
        if (tty) process.stderr.write(`\r${renderBar(latest)}\x1b[K`)
        else process.stderr.write(`${renderLine(latest)}\n`)
      })
      const summary = yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Effect.forkScoped(Effect.repeat(draw, Schedule.spaced(tty ? "200 millis" : "5 seconds")).pipe(Effect.delay(tty ? "200 millis" : "5 seconds")))
          const service = yield* Prefetch
          return yield* service.prefetch(prefix, {
            ...settings,
            capacityBytes: capacity?.capacityBytes,
            onProgress: (p) => {
              latest = p
            }
          })
        })
      ).pipe(Effect.provide(Prefetch.layer(clientOptions)))
      if (tty && latest !== undefined) process.stderr.write(`\r${renderBar(summary)}\x1b[K\n`)
      yield* Console.log(renderSummary(summary))
      if (summary.failed > 0) {
        return yield* new PrefetchIncomplete({ failed: summary.failed, reasons: summary.failures.map((f) => `${f.object} [${f.offset}, +${f.length}): ${f.reason}`) })
      }
    })
).pipe(
  Command.withDescription(
    "Warm a dataset before a job starts: list the prefix, place every block as reads do, and ask each owning worker to fill it from the origin (Talon's Load). Resumable: what is resident is skipped."
  )
)

