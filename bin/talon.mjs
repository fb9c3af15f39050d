#!/usr/bin/env node
// Runs the build in dist/ (made by `npm install`) when it is at least as new as every source
// file; otherwise runs src/ through tsx's loader, so an edited checkout never runs stale code.
import * as fs from "node:fs"

const root = new URL("../", import.meta.url)
const stamp = (() => {
  try {
    return fs.statSync(new URL("dist/.stamp", root)).mtimeMs
  } catch {
    return -1
  }
})()

const newerThan = (dir, t) =>
  fs.readdirSync(dir, { withFileTypes: true }).some((e) => {
    const p = new URL(e.name + (e.isDirectory() ? "/" : ""), dir)
    return e.isDirectory() ? newerThan(p, t) : fs.statSync(p).mtimeMs > t
  })

if (stamp >= 0 && process.env.TALON_FROM_SOURCE === undefined && !newerThan(new URL("src/", root), stamp)) {
  await import("../dist/cli/main.js")
} else {
  const { register } = await import("tsx/esm/api")
  register()
  await import("../src/cli/main.ts")
}
