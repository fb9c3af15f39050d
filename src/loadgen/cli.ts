/**
 * `talon loadgen`: drives a worker (or anything speaking Talon GetRange) with
 * pipelined connections spread over worker threads, and reports rps, latency
 * percentiles and the server's CPU and RSS. A run with no samples or with any
 * error is a failed run: the first error goes to stderr verbatim, exit code 1.
 */
import { availableParallelism } from "node:os"
import { Command } from "@effect/cli"
import { Console, Effect, Either, Option } from "effect"
import { explicitFrom, flaggedKeys, flagsOf } from "../config/cli.js"
import { messagesOf, resolve } from "../config/Setting.js"
import type { ObjectId } from "../core/ids.js"
import { LoadgenSchema, type LoadgenSettings } from "./config.js"
import { parseAddr, parseObject } from "./options.js"
import { jsonLine, progressLine, table } from "./report.js"
import { Loadgen } from "./Loadgen.js"
import { failureOf, LoadgenError } from "./run.js"

/** One flag per setting, each generated from its declaration in ./config.ts. */
const options = flagsOf(LoadgenSchema, flaggedKeys(LoadgenSchema))

type Flags = Command.Command.ParseConfig<typeof options>

const orFail = <A>(e: Either.Either<A, string>): Effect.Effect<A, LoadgenError> =>
  Either.match(e, { onLeft: (message) => Effect.fail(new LoadgenError({ message })), onRight: Effect.succeed })

const sizeOf = (
  flag: string,
  given: number | undefined,
  object: ObjectId,
  coordinator: string | undefined
): Effect.Effect<number, LoadgenError, Loadgen> =>
  given !== undefined
    ? Effect.succeed(given)
    : coordinator !== undefined
      ? Effect.flatMap(Loadgen, (loadgen) => Effect.map(loadgen.stat(coordinator, object), (s) => s.size))
      : Effect.fail(new LoadgenError({ message: `${flag} is required when no --coordinator is given to ask the object's size` }))

const run = (flags: Flags) =>
  Effect.gen(function* () {
    const f = yield* Effect.mapError(
      resolve(LoadgenSchema, explicitFrom<LoadgenSettings, keyof LoadgenSettings>(flags)),
      (e) => new LoadgenError({ message: messagesOf(e).join("; ") })
    )
    const addr = yield* orFail(parseAddr("--addr", f.addr))
    const { conns: connsList, depth, range, seconds, warmup, ramp, drainTimeout, missShare, missStride, seed, hotBytes, verify } = f
    const threads = f.threads ?? availableParallelism()
    const serverPids = f.serverPid ?? []
    const objectArg = yield* Option.match(Option.fromNullable(f.object), {
      onNone: () => Effect.fail(new LoadgenError({ message: "--object is required (s3://bucket/key, az://container/key, or a key with --container)" })),
      onSome: Effect.succeed
    })
    const container = f.container
    const object = yield* orFail(parseObject("--object", objectArg, f.backend, container))
    const size = yield* sizeOf("--size", f.size, object, f.coordinator)
    const missObject = f.missObject === undefined ? undefined : yield* orFail(parseObject("--miss-object", f.missObject, f.backend, container))
    const missSize =
      missObject !== undefined && missShare > 0 ? yield* sizeOf("--miss-size", f.missSize, missObject, f.coordinator) : undefined

    const tty = !f.json && process.stdout.isTTY === true
    const loadgen = yield* Loadgen
    const results = yield* loadgen.sweep(
      {
        ...addr,
        conns: connsList[0]!,
        depth,
        range,
        seconds,
        warmup,
        ...(ramp !== undefined ? { ramp } : {}),
        threads,
        object,
        size,
        ...(hotBytes !== undefined ? { hotBytes } : {}),
        missShare,
        ...(missObject !== undefined ? { missObject } : {}),
        ...(missSize !== undefined ? { missSize } : {}),
        missStride,
        seed,
        ...(verify !== undefined ? { verify } : {}),
        serverPids,
        drainTimeout,
        failFast: f.failFast
      },
      connsList,
      (result) =>
        Effect.gen(function* () {
          if (tty) process.stdout.write("\r\x1b[2K")
          if (f.json) yield* Console.log(jsonLine(result))
        }),
      (conns) => (tty ? { onProgress: (p) => Effect.sync(() => process.stdout.write(`\r\x1b[2K${progressLine(conns, depth, p)}`)) } : {})
    )
    const failure = results.length > 0 ? failureOf(results[results.length - 1]!) : undefined
    if (!f.json) yield* Console.log(table(results))
    if (failure !== undefined) {
      const last = results[results.length - 1]!
      yield* Console.error(`loadgen: ${failure}`)
      if (last.errors > 1) yield* Console.error(`loadgen: (${last.errors} errors in all)`)
      yield* Effect.sync(() => {
        process.exitCode = 1
      })
    }
  }).pipe(
    Effect.catchTag("LoadgenError", (e) =>
      Effect.gen(function* () {
        yield* Console.error(`loadgen: ${e.message}`)
        yield* Effect.sync(() => {
          process.exitCode = 1
        })
      })
    ),
    Effect.provide(Loadgen.layer)
  )

export const loadgen = Command.make("loadgen", options, run).pipe(
  Command.withDescription(
    "Drive a worker over the data-plane protocol: pipelined connections on worker threads; rps, latency percentiles, server CPU and RSS."
  )
)
