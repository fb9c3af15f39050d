import { execFileSync } from "node:child_process"
import { describe, expect, it } from "vitest"

describe("talon CLI", () => {
  it("runs the self-check through the bin entry", () => {
    const out = execFileSync(process.execPath, ["bin/talon.mjs", "self-check"], { encoding: "utf8" })
    expect(out).toContain("talon self-check: ok")
  })
})
