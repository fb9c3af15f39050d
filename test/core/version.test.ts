import { describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { BUILD_VERSION, VERSION } from "../../src/core/version.js"

describe("build version", () => {
  it("is package.json's version, and every node reports it", () => {
    const pkg = JSON.parse(fs.readFileSync(path.resolve(import.meta.dirname, "../../package.json"), "utf8")) as { version: string }
    expect(VERSION).toBe(pkg.version)
    expect(BUILD_VERSION).toBe(`talon-ts ${pkg.version}`)
  })
})
