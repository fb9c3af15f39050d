/**
 * `--help` without @effect/cli's generic type sentence. The library puts its primitive's
 * one-size-fits-all line ("A user-defined piece of text.", "A true or false value.", …)
 * above the description of every option and offers no switch to leave it out; our
 * options already name their type in the placeholder (`--capacity size`) and say what
 * they take in their own description, so the sentence only doubles every entry. Help is
 * printed through `Console.log` as one rendered string: the paragraph is dropped there.
 */
import { Console, Effect } from "effect"

/** The primitives' sentences (node_modules/@effect/cli/src/internal/primitive.ts, getHelp). */
export const GENERIC_OPTION_HELP: ReadonlyArray<string> = [
  "A user-defined piece of text.",
  "A user-defined piece of text that is confidential.",
  "A true or false value.",
  "An integer.",
  "A floating point number.",
  "A file.",
  "An existing file.",
  "A directory.",
  "An existing directory."
]

const escaped = GENERIC_OPTION_HELP.map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|")
// A paragraph of its own: indented line, the sentence alone, then the blank line that ends it.
const paragraph = new RegExp(`^[ \\t]*(?:\\x1b\\[[0-9;]*m)*(?:${escaped})(?:\\x1b\\[[0-9;]*m)*[ \\t]*\\r?\\n[ \\t]*\\r?\\n`, "gm")

export const withoutGenericHelp = (text: string): string => text.replace(paragraph, "")

/** True when the command line asks for help (the only output this filter needs to see). */
export const asksForHelp = (args: ReadonlyArray<string>): boolean => args.includes("--help") || args.includes("-h")

/** Runs `self` with a console whose `log` drops the generic sentence from help text. */
export const withOwnOptionHelp = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.consoleWith((console) =>
    Console.withConsole(self, {
      ...console,
      log: (...args: ReadonlyArray<unknown>) => console.log(...args.map((a) => (typeof a === "string" ? withoutGenericHelp(a) : a)))
    })
  )
