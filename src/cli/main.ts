import { Command } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import { subcommands } from "./commands.js"

const talon = Command.make("talon", {}, () =>
  Effect.log("talon: a distributed read cache for S3 and Azure Blob. Run `talon --help` for the subcommands.")
).pipe(
  Command.withDescription("Talon: a distributed read cache for object storage (S3, Azure Blob)."),
  Command.withSubcommands(subcommands)
)

const cli = Command.run(talon, { name: "talon", version: "0.1.0" })

cli(process.argv).pipe(Effect.provide(NodeContext.layer), NodeRuntime.runMain)
