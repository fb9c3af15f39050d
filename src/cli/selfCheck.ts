import { Command } from "@effect/cli"
import { Console } from "effect"

/** `talon self-check`: proves the install works without any server running. */
export const selfCheck = Command.make("self-check", {}, () =>
  Console.log("talon self-check: ok")
).pipe(Command.withDescription("Check that the install works (no servers needed)."))
