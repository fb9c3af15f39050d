/**
 * The drivers' processes as scoped resources, through @effect/platform's `Command`: a process
 * started with `spawn` lives until its scope closes, and is then stopped (SIGTERM to its process
 * group, SIGKILL after a grace period). A driver that fails, is interrupted or gets Ctrl-C closes
 * its scopes on the way out (`runDriver` runs it under NodeRuntime.runMain), so no server is left
 * behind and no driver keeps its own list of children.
 */
import { Command, type CommandExecutor } from "@effect/platform"
import { Data, Duration, Effect, Fiber, Option, type Scope, Stream, SubscriptionRef } from "effect"
import { repoRoot } from "./args.js"

export class ProcError extends Data.TaggedError("ProcError")<{ readonly message: string }> {}

export interface SpawnOptions {
  readonly cwd?: string
  /** Added to the driver's environment. */
  readonly env?: Readonly<Record<string, string>>
  /** Pin with `taskset -c CPUS` (e.g. "0", "1", "0,1"). */
  readonly cpus?: string
  /** Copy the process's stderr to ours as it comes (servers' warnings), besides keeping it. */
  readonly echoStderr?: boolean
  /** How long SIGTERM gets before SIGKILL when the scope closes; default 5 s. */
  readonly grace?: Duration.DurationInput
}

export interface Proc {
  readonly name: string
  readonly pid: number
  /** What it printed so far (the last 4 MiB of each stream). */
  readonly stdout: Effect.Effect<string>
  readonly stderr: Effect.Effect<string>
  /** The first match of `re` on stdout or stderr; fails when the process exits first or `timeout` passes. */
  readonly waitFor: (re: RegExp, timeout?: Duration.DurationInput) => Effect.Effect<RegExpExecArray, ProcError>
  /** Waits for the exit and for its output to be read; the code. */
  readonly exitCode: Effect.Effect<number, ProcError>
  readonly isRunning: Effect.Effect<boolean>
  /** Sends `signal` to the process group and waits for the exit. */
  readonly kill: (signal?: NodeJS.Signals) => Effect.Effect<void>
}

const KEEP = 4 * 1024 * 1024
const tail = (s: string, n = 2000) => (s.length > n ? `…${s.slice(-n)}` : s)

const collect = (stream: Stream.Stream<Uint8Array, unknown>, into: SubscriptionRef.SubscriptionRef<string>, echo: boolean) =>
  stream.pipe(
    Stream.decodeText(),
    Stream.runForEach((chunk) =>
      Effect.zipRight(
        echo ? Effect.sync(() => process.stderr.write(chunk)) : Effect.void,
        SubscriptionRef.update(into, (s) => {
          const next = s + chunk
          return next.length > KEEP ? next.slice(-KEEP) : next
        })
      )
    ),
    Effect.ignore
  )

/** Starts `argv` (argv[0] found on PATH); stopped when the scope closes. */
export const spawn = (
  name: string,
  argv: ReadonlyArray<string>,
  options: SpawnOptions = {}
): Effect.Effect<Proc, ProcError, Scope.Scope | CommandExecutor.CommandExecutor> =>
  Effect.gen(function* () {
    const full = options.cpus !== undefined ? ["taskset", "-c", options.cpus, ...argv] : [...argv]
    const shown = `${name} (${full.join(" ")})`
    const command = Command.make(full[0]!, ...full.slice(1)).pipe(
      Command.workingDirectory(options.cwd ?? repoRoot),
      Command.env(options.env ?? {})
    )
    const proc = yield* Command.start(command).pipe(Effect.mapError((e) => new ProcError({ message: `cannot start ${shown}: ${e.message}` })))
    const grace = options.grace ?? "5 seconds"
    // Runs before the platform's own release (which sends SIGTERM and waits without a limit).
    yield* Effect.addFinalizer(() =>
      Effect.flatMap(proc.isRunning.pipe(Effect.orElseSucceed(() => false)), (running) =>
        running
          ? proc.kill("SIGTERM").pipe(
              Effect.timeoutFail({ duration: grace, onTimeout: () => "still running" }),
              Effect.catchAll(() => proc.kill("SIGKILL")),
              Effect.ignore
            )
          : Effect.void
      )
    )
    const out = yield* SubscriptionRef.make("")
    const err = yield* SubscriptionRef.make("")
    const collectors = [
      yield* Effect.forkScoped(collect(proc.stdout, out, false)),
      yield* Effect.forkScoped(collect(proc.stderr, err, options.echoStderr === true))
    ]
    // The pipes end at the exit, unless a grandchild still holds them: then what came so far.
    const drained = Fiber.joinAll(collectors).pipe(Effect.timeout("1 second"), Effect.ignore)
    const exitCode = proc.exitCode.pipe(
      Effect.map((c) => Number(c)),
      Effect.mapError((e) => new ProcError({ message: `${shown}: ${e.message}` }))
    )
    const exited = Effect.gen(function* () {
      const code = yield* exitCode
      yield* drained
      const stderr = yield* SubscriptionRef.get(err)
      return yield* Effect.fail(new ProcError({ message: `${shown} exited with code ${code} first; stderr: ${tail(stderr.trim()) || "(empty)"}` }))
    })
    const waitFor = (re: RegExp, timeout: Duration.DurationInput = "60 seconds") => {
      const found = Stream.merge(out.changes, err.changes).pipe(
        Stream.filterMap((s) => Option.fromNullable(re.exec(s))),
        Stream.runHead,
        Effect.flatMap(Option.match({ onNone: () => Effect.never, onSome: Effect.succeed }))
      )
      // After the exit, one last look at everything it printed.
      const gone = Effect.gen(function* () {
        yield* exitCode
        yield* drained
        const m = re.exec(yield* SubscriptionRef.get(out)) ?? re.exec(yield* SubscriptionRef.get(err))
        return m ?? (yield* exited)
      })
      return Effect.raceFirst(found, gone).pipe(
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () => new ProcError({ message: `${shown}: no ${re} in its output within ${Duration.format(Duration.decode(timeout))}` })
        })
      )
    }
    return {
      name,
      pid: Number(proc.pid),
      stdout: SubscriptionRef.get(out),
      stderr: SubscriptionRef.get(err),
      waitFor,
      exitCode: Effect.tap(exitCode, () => drained),
      isRunning: proc.isRunning.pipe(Effect.orElseSucceed(() => false)),
      kill: (signal = "SIGTERM") => Effect.ignore(proc.kill(signal))
    }
  })

/** Runs `argv` to its end and returns its stdout; a non-zero exit fails with the stderr's tail. */
export const run = (
  name: string,
  argv: ReadonlyArray<string>,
  options: SpawnOptions = {}
): Effect.Effect<string, ProcError, CommandExecutor.CommandExecutor> =>
  Effect.scoped(
    Effect.gen(function* () {
      const p = yield* spawn(name, argv, options)
      const code = yield* p.exitCode
      if (code !== 0) {
        const stderr = yield* p.stderr
        return yield* Effect.fail(new ProcError({ message: `${name} (${argv.join(" ")}) exited with code ${code}: ${tail(stderr.trim()) || "(no stderr)"}` }))
      }
      return yield* p.stdout
    })
  )
