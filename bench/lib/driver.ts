/**
 * How a benchmark driver starts: its flags are an @effect/cli command (so `--help` lists them
 * with their defaults, and a typo or a bad value stops the driver with a message instead of
 * falling back to a default), and its body runs under NodeRuntime.runMain with the Node
 * platform, so Ctrl-C or a failure interrupts it and every scope it opened closes: processes
 * started with proc.ts are stopped, temp dirs removed.
 */
import { Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import type { CommandExecutor, FileSystem, Path, Terminal } from "@effect/platform"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Config, Console, Effect, Either, type Scope } from "effect"
import { parseSize } from "../../src/core/size.js"
import { DEFAULT_MACHINE } from "./args.js"

const described = <A>(o: Options.Options<A>, description: string, env?: string): Options.Options<A> =>
  Options.withDescription(o, env ? `${description} (env ${env})` : description)

/** Flag constructors with defaults; `env` names a variable read when the flag is absent. */
export const Flag = {
  number: (name: string, def: number, description: string, env?: string) =>
    described(
      Options.float(name).pipe(env ? Options.withFallbackConfig(Config.number(env).pipe(Config.withDefault(def))) : Options.withDefault(def)),
      description,
      env
    ),
  text: (name: string, def: string, description: string, env?: string) =>
    described(
      Options.text(name).pipe(env ? Options.withFallbackConfig(Config.string(env).pipe(Config.withDefault(def))) : Options.withDefault(def)),
      description,
      env
    ),
  /** A byte size such as 65536, 64K, 1M. */
  size: (name: string, def: string, description: string, env?: string) =>
    Flag.text(name, def, description, env).pipe(
      Options.mapEffect((text) => {
        const n = parseSize(text)
        return Either.isLeft(n) ? Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--${name}: ${n.left}`))) : Effect.succeed(n.right)
      })
    ),
  bool: (name: string, description: string) => described(Options.boolean(name), description),
  /** `--NAME key=value`, repeatable. */
  map: (name: string, description: string) =>
    described(Options.keyValueMap(name).pipe(Options.optional), description),
  /** The machine name the data file records. */
  machine: () => Flag.text("machine", DEFAULT_MACHINE, "Machine description recorded in the data file.")
}

export type Parsed<O extends Command.Command.Config> = Command.Command.ParseConfig<O> & { readonly argv: ReadonlyArray<string> }

/**
 * Parses the process's flags against `options`. `--help` (or a bad flag) prints and exits,
 * so a driver can `await` this at the top of its module and use the values as constants.
 */
export const parseFlags = <O extends Record<string, Options.Options<any>>>(
  name: string,
  description: string,
  options: O
): Promise<Parsed<O>> =>
  new Promise((resolve) => {
    let parsed: Command.Command.ParseConfig<O> | undefined
    const command = Command.make(name, options, (p) => Effect.sync(() => void (parsed = p as Command.Command.ParseConfig<O>))).pipe(
      Command.withDescription(description)
    )
    Command.run(command, { name, version: "0.1.0" })(process.argv).pipe(
      Effect.provide(NodeContext.layer),
      Effect.runPromiseExit
    ).then((exit) => {
      if (parsed !== undefined && exit._tag === "Success") return resolve({ ...parsed, argv: process.argv.slice(2) })
      // --help / --version printed and succeeded; a validation error was printed by @effect/cli.
      process.exit(exit._tag === "Success" ? 0 : 2)
    })
  })

type DriverContext = Scope.Scope | CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path | Terminal.Terminal

/** Runs a driver's body: its scope closes on success, failure and Ctrl-C alike; a failure exits 1 with its message. */
export const runDriver = <A, E>(main: Effect.Effect<A, E, DriverContext>): void =>
  main.pipe(
    Effect.scoped,
    Effect.catchAll((e) =>
      Effect.zipRight(
        Console.error(e instanceof Error || (typeof e === "object" && e !== null && "message" in e) ? String((e as { message: unknown }).message) : String(e)),
        Effect.sync(() => {
          process.exitCode = 1
        })
      )
    ),
    Effect.provide(NodeContext.layer),
    NodeRuntime.runMain
  )
