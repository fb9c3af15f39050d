/**
 * The CLI's own account of itself, for checking deploy files: each subcommand's --help names its
 * flags and variables; settings read beside the flags (origin credentials, cluster state, tokens)
 * are named in the generated configuration reference and as literals in the source that reads them.
 * Names built from a component's prefix and a key appear only in the first two, never as literals.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import type { CliSurface } from "./manifestCheck.js"

const root = path.resolve(import.meta.dirname, "../..")

export const helpOf = (sub: string): string =>
  execFileSync(path.join(root, "bin", "talon.mjs"), [sub, "--help"], { encoding: "utf8", env: { ...process.env, NO_COLOR: "1" } })
    // eslint-disable-next-line no-control-regex
    .replace(/\x1b\[[0-9;]*m/g, "")

export const cliSurface = (subcommands: ReadonlyArray<string> = ["coordinator", "worker", "gateway", "origin"]): CliSurface => {
  const flags = new Map<string, ReadonlySet<string>>()
  const env = new Set<string>()
  for (const sub of subcommands) {
    const help = helpOf(sub)
    flags.set(sub, new Set(help.match(/--[a-z][a-z0-9-]*/g) ?? []))
    for (const v of help.match(/TALON_[A-Z0-9_]+/g) ?? []) env.add(v)
  }
  const reference = path.join(root, "docs", "configuration.md")
  if (fs.existsSync(reference)) for (const v of fs.readFileSync(reference, "utf8").match(/TALON_[A-Z0-9_]+/g) ?? []) env.add(v)
  const walk = (dir: string): Array<string> =>
    fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]))
  for (const f of walk(path.join(root, "src")).filter((f) => f.endsWith(".ts"))) {
    for (const v of fs.readFileSync(f, "utf8").match(/"TALON_[A-Z0-9_]+"/g) ?? []) env.add(v.slice(1, -1))
  }
  return { flags, env }
}
