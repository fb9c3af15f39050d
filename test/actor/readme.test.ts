import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { program } from "../../docs/examples/actor.js"

const read = (rel: string) => readFileSync(new URL(rel, import.meta.url), "utf8")

describe("README actor example", () => {
  it("shows docs/examples/actor.ts verbatim", () => {
    const readme = read("../../README.md")
    const example = read("../../docs/examples/actor.ts")
    expect(readme).toContain("```ts\n" + example + "```")
  })

  it.live("runs: registers, fails a lookup with its typed error, and answers across a MessagePort", () =>
    Effect.gen(function* () {
      expect(yield* program).toEqual({ epoch: 1, missing: "UnknownWorker", addr: "10.0.0.1:7001" })
    }))
})
