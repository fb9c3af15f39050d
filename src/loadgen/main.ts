/**
 * Standalone entry for scripts and tests: `node --import tsx src/loadgen/main.ts …`
 * behaves like `talon loadgen …`.
 */
import { Command } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import { loadgen } from "./cli.js"

Command.run(loadgen, { name: "talon loadgen", version: "0.1.0" })(process.argv).pipe(
  Effect.provide(NodeContext.layer),
  NodeRuntime.runMain
)
