import * as path from "node:path"
import { Command, Options, ValidationError } from "@effect/cli"
import { defaultTeardown } from "@effect/platform/Runtime"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Cause, ConfigError, Console, Effect } from "effect"
import { messagesOf } from "../config/Setting.js"
import { VERSION } from "../core/version.js"
import type { AnyCommand } from "./commands.js"
import * as ConfigFile from "./configFile.js"
import { asksForHelp, withOwnOptionHelp } from "./help.js"

// Declared so help lists it and the parser accepts it; the value is read ahead (configPathFrom).
const config = Options.file("config").pipe(
  Options.withDescription(
    `Config file (TOML, or JSON by extension) with one table per component, e.g. [worker] cache_dirs = ["/a"]; flags and TALON_* variables override it (env ${ConfigFile.CONFIG_ENV}).`
  ),
  Options.optional
)

/** A user sees one line saying what went wrong, not a fiber stack (TALON_DEBUG=1 shows it). */
const report = (cause: Cause.Cause<unknown>) => {
  if (Cause.isInterruptedOnly(cause)) return Effect.void
  const error = Cause.squash(cause)
  if (ValidationError.isValidationError(error)) return Effect.void // @effect/cli already printed it with usage
  if (process.env.TALON_DEBUG) return Console.error(Cause.pretty(cause))
  const message = ConfigError.isConfigError(error)
    ? messagesOf(error).join("\ntalon: ")
    : error instanceof Error
      ? error.message
      : String(error)
  return Console.error(`talon: ${message}`)
}

/**
 * Runs `talon` with these subcommands (all of them, or only the one on the command line) until
 * it ends. Shared by the entry that loads subcommands on demand (./main.ts) and the per-command
 * script bundles that start from V8's code cache (scripts/bundle.mjs), which have no top-level await.
 */
export const runCli = (
  subcommands: readonly [AnyCommand, ...Array<AnyCommand>],
  options: { readonly exitWhenDone?: boolean } = {}
): void => {
  const talon = Command.make("talon", { config }, () =>
    Console.log("talon: a distributed read cache for S3 and Azure Blob. Run `talon --help` for the subcommands.")
  ).pipe(
    Command.withDescription("Talon: a distributed read cache for object storage (S3, Azure Blob)."),
    Command.withSubcommands(subcommands)
  )
  const cli = Command.run(talon, { name: "talon", version: VERSION })
  const args = process.argv.slice(2)
  const configPath = ConfigFile.configPathFrom(args, process.env)
  if (configPath !== undefined) {
    // Child processes (talon up's workers, --loops) inherit the same file.
    process.env[ConfigFile.CONFIG_ENV] = path.resolve(configPath)
  }
  cli(process.argv).pipe(
    asksForHelp(args) ? withOwnOptionHelp : (self) => self,
    configPath === undefined ? (self) => self : Effect.provide(ConfigFile.layer(configPath, ConfigFile.flatSectionFrom(args))),
    Effect.tapErrorCause(report),
    Effect.provide(NodeContext.layer),
    NodeRuntime.runMain({
      disableErrorReporting: true,
      // A one-shot command has written its output (stdout and files are written synchronously
      // on Linux, and --out is closed by its finalizer) when its fiber ends: exit then, instead
      // of waiting for node to tear down a heap the process is about to drop (~0.1-0.5 s).
      ...(options.exitWhenDone === true ? { teardown: (exit) => defaultTeardown(exit, (code) => process.exit(code)) } : {})
    })
  )
}
