/**
 * Standalone entry for scripts and tests: `node --import tsx src/gateway/main.ts …`
 * behaves like `talon gateway …` (and starts faster: it loads only the gateway).
 */
import { Command } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import { gateway } from "./cli.js"

process.once("SIGTERM", () => process.exit(0))
Command.run(gateway, { name: "talon gateway", version: "0.1.0" })(process.argv).pipe(
  Effect.provide(NodeContext.layer),
  NodeRuntime.runMain
)
