/**
 * `talon loadgen`: drives a worker (or anything speaking Talon GetRange) with
 * pipelined connections spread over worker threads, and reports rps, latency
 * percentiles and the server's CPU and RSS. A run with no samples or with any
 * error is a failed run: the first error goes to stderr verbatim, exit code 1.
 */
import { availableParallelism } from "node:os"
import { Command, Options } from "@effect/cli"
import { Config, Console, Effect, Either, Option } from "effect"
import type { ObjectId } from "../core/ids.js"
import { parseAddr, parseIntList, parseObject, parseSizeFlag } from "./options.js"
import { jsonLine, progressLine, table } from "./report.js"
import { Loadgen } from "./Loadgen.js"
import { failureOf, LoadgenError } from "./run.js"

const env = (name: string) => `TALON_LOADGEN_${name}`

const text = (name: string, def: string, description: string) =>
  Options.text(name).pipe(
    Options.withFallbackConfig(Config.string(env(name.toUpperCase().replace(/-/g, "_"))).pipe(Config.withDefault(def))),
    Options.withDescription(description)
  )

const optionalText = (name: string, description: string) =>
  Options.text(name).pipe(
    Options.withFallbackConfig(Config.string(env(name.toUpperCase().replace(/-/g, "_")))),
    Options.optional,
    Options.withDescription(description)
  )

const options = {
  addr: text("addr", "127.0.0.1:7001", "Worker data-plane address HOST:PORT."),
  conns: text("conns", "1,64,256,1024", "Connections; a comma list is a sweep, one run per value."),
  depth: text("depth", "1", "Requests in flight per connection (pipelined)."),
  range: text("range", "65536", "Bytes per GetRange (K/M/G suffixes allowed); offsets are random multiples of it."),
  seconds: text("seconds", "10", "Measured window per run, seconds."),
  warmup: text("warmup", "3", "Warmup before the window, seconds (excluded from every number)."),
  ramp: optionalText(
    "ramp",
    "Seconds at the start of the warmup over which requests in flight per connection grow from 1 to --depth, so TCP receive windows open before full load (default: half the warmup, at most 1)."
  ),
  object: optionalText("object", "Object to read: s3://bucket/key, az://container/key, or a key with --backend/--container."),
  backend: Options.choice("backend", ["s3", "az"] as const).pipe(
    Options.withFallbackConfig(Config.literal("s3", "az")(env("BACKEND")).pipe(Config.withDefault("s3" as const))),
    Options.withDescription("Backend of a bare --object key.")
  ),
  container: optionalText("container", "Bucket/container of a bare --object key."),
  size: optionalText("size", "Object size in bytes (K/M/G); asked of --coordinator with StatObject when omitted."),
  coordinator: optionalText("coordinator", "Coordinator control address HOST:PORT (or a comma-separated list to fail over between), to ask object sizes."),
  serverPid: optionalText("server-pid", "Server PID(s), comma-separated, sampled from /proc for CPU, kernel share and RSS."),
  json: Options.boolean("json").pipe(Options.withDescription("Print one JSON line per run.")),
  threads: optionalText("threads", "Generator threads (default: usable cores); connections are spread over them."),
  missShare: text("miss-share", "0", "Share of requests sent to never-read offsets (cache misses), 0 ≤ share < 1."),
  missObject: optionalText("miss-object", "Object the misses read (default: --object past --hot-bytes)."),
  missSize: optionalText("miss-size", "Size of --miss-object (default: asked of --coordinator)."),
  missStride: text("miss-stride", "1M", "Distance between miss offsets; ≥ the worker's fill unit so no two misses share one."),
  hotBytes: optionalText("hot-bytes", "Hits read [0, hot-bytes) of --object (default: all, or the first half with misses)."),
  seed: text("seed", "1", "Seed of the per-connection offset streams."),
  verify: optionalText("verify", "Local copy of --object: every payload byte is compared with it (slower)."),
  drainTimeout: text("drain-timeout", "5", "Seconds to wait for in-flight replies after the window."),
  failFast: Options.boolean("fail-fast").pipe(Options.withDescription("Stop sending at the first error."))
}

type Flags = Command.Command.ParseConfig<typeof options>

const orFail = <A>(e: Either.Either<A, string>): Effect.Effect<A, LoadgenError> =>
  Either.match(e, { onLeft: (message) => Effect.fail(new LoadgenError({ message })), onRight: Effect.succeed })

const number = (flag: string, s: string, ok: (n: number) => boolean, want: string) =>
  orFail(ok(Number(s)) && s.trim() !== "" ? Either.right(Number(s)) : Either.left(`--${flag}: want ${want}, got ${JSON.stringify(s)}`))

const sizeOf = (
  flag: string,
  given: Option.Option<string>,
  object: ObjectId,
  coordinator: Option.Option<string>
): Effect.Effect<number, LoadgenError, Loadgen> =>
  Option.match(given, {
    onSome: (s) => orFail(parseSizeFlag(flag, s)),
    onNone: () =>
      Option.match(coordinator, {
        onSome: (c) => Effect.flatMap(Loadgen, (loadgen) => Effect.map(loadgen.stat(c, object), (s) => s.size)),
        onNone: () => Effect.fail(new LoadgenError({ message: `${flag} is required when no --coordinator is given to ask the object's size` }))
      })
  })

const run = (f: Flags) =>
  Effect.gen(function* () {
    const addr = yield* orFail(parseAddr("--addr", f.addr))
    const connsList = yield* orFail(parseIntList("--conns", f.conns))
    const depth = yield* number("depth", f.depth, (n) => Number.isSafeInteger(n) && n >= 1, "a positive integer")
    const range = yield* orFail(parseSizeFlag("--range", f.range))
    const seconds = yield* number("seconds", f.seconds, (n) => n > 0, "a number of seconds > 0")
    const warmup = yield* number("warmup", f.warmup, (n) => n >= 0, "a number of seconds ≥ 0")
    const ramp = yield* Option.match(f.ramp, {
      onNone: () => Effect.succeed(undefined),
      onSome: (s) => number("ramp", s, (n) => n >= 0 && n <= warmup, `a number of seconds in [0, --warmup ${warmup}]`)
    })
    const drainTimeout = yield* number("drain-timeout", f.drainTimeout, (n) => n > 0, "a number of seconds > 0")
    const missShare = yield* number("miss-share", f.missShare, (n) => n >= 0 && n < 1, "a share in [0, 1)")
    const missStride = yield* orFail(parseSizeFlag("--miss-stride", f.missStride))
    const seed = yield* number("seed", f.seed, (n) => Number.isSafeInteger(n) && n >= 0, "a non-negative integer")
    const threads = yield* Option.match(f.threads, {
      onNone: () => Effect.succeed(availableParallelism()),
      onSome: (s) => number("threads", s, (n) => Number.isSafeInteger(n) && n >= 1, "a positive integer")
    })
    const serverPids = yield* Option.match(f.serverPid, {
      onNone: () => Effect.succeed<ReadonlyArray<number>>([]),
      onSome: (s) => orFail(parseIntList("--server-pid", s))
    })
    const objectArg = yield* Option.match(f.object, {
      onNone: () => Effect.fail(new LoadgenError({ message: "--object is required (s3://bucket/key, az://container/key, or a key with --container)" })),
      onSome: Effect.succeed
    })
    const container = Option.getOrUndefined(f.container)
    const object = yield* orFail(parseObject("--object", objectArg, f.backend, container))
    const size = yield* sizeOf("--size", f.size, object, f.coordinator)
    const missObject = yield* Option.match(f.missObject, {
      onNone: () => Effect.succeed(undefined),
      onSome: (s) => orFail(parseObject("--miss-object", s, f.backend, container))
    })
    const missSize =
      missObject !== undefined && missShare > 0 ? yield* sizeOf("--miss-size", f.missSize, missObject, f.coordinator) : undefined
    const hotBytes = yield* Option.match(f.hotBytes, {
      onNone: () => Effect.succeed(undefined),
      onSome: (s) => orFail(parseSizeFlag("--hot-bytes", s))
    })
    const verify = Option.getOrUndefined(f.verify)

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
