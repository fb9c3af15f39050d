/**
 * Benchmarks measure the processes users run: `bin/talon.mjs` from dist/, not src/ through
 * tsx (whose loader alone adds ~100 MiB RSS and start-up CPU). bin/talon.mjs falls back to
 * tsx whenever a source file is newer than dist/, so a bench rebuilds dist/ first.
 */
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { repoRoot } from "./args.js"

export const buildDist = (): void => {
  execFileSync(process.execPath, [join(repoRoot, "scripts/build.mjs")], { stdio: "inherit" })
}

/** The Node flags bin/talon.mjs starts node with (its `exec node FLAGS "$0"` line): what `npx talon` runs with. */
const talonNodeFlags = (role: string | undefined): ReadonlyArray<string> => {
  const text = readFileSync(join(repoRoot, "bin/talon.mjs"), "utf8")
  const m = /^":" \/\/; .*?(?:UV_THREADPOOL_SIZE="\$\{UV_THREADPOOL_SIZE:-(\d+)\}" )?exec node (.*?) "\$0" "\$@"$/m.exec(text)
  if (m === null) throw new Error("bin/talon.mjs: no `exec node FLAGS \"$0\"` line to read the node flags from")
  // The launcher's libuv pool size reaches the children a bench spawns through the environment they inherit.
  if (m[1] !== undefined) process.env.UV_THREADPOOL_SIZE ??= m[1]
  // Per-role flags: the launcher's `case "$R" in ROLES) F="FLAGS";;` branches.
  const roleFlags = roleBranch(text, role)?.[2] ?? ""
  return m[2]!.replace("$F", roleFlags).split(/\s+/).filter((f) => f !== "")
}

// A role's branch of the launcher: `ROLES) F="FLAGS";[export NAME="${NAME:-VALUE}";...];`.
const roleBranch = (text: string, role: string | undefined) =>
  [...text.matchAll(/([\w|]+)\) F="([^"]*)";((?:export \w+="\$\{\w+:-[^}]*\}";)*);/g)].find(([, roles]) => role !== undefined && roles!.split("|").includes(role))

/** The environment the launcher gives `role` (its `export NAME="${NAME:-VALUE}"` in that role's branch), unless set already. */
export const talonEnv = (role?: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const exports = roleBranch(readFileSync(join(repoRoot, "bin/talon.mjs"), "utf8"), role)?.[3] ?? ""
  for (const [, name, value] of exports.matchAll(/export (\w+)="\$\{\w+:-([^}]*)\}";/g)) out[name!] = process.env[name!] ?? value!
  return out
}

/** Argv prefix that runs the `talon` CLI the way users do; `role` (the subcommand that follows) adds the launcher's flags for it. */
export const talonBin = (role?: string): ReadonlyArray<string> => [process.execPath, ...talonNodeFlags(role), join(repoRoot, "bin/talon.mjs")]

/** The environment that points a spawned coordinator or worker at a local origin stub (any credentials: the stub checks none). */
export const stubBackendEnv = (originUrl: string): Record<string, string> => ({
  TALON_S3_ENDPOINT: originUrl,
  TALON_S3_REGION: "us-east-1",
  TALON_S3_ACCESS_KEY_ID: "bench",
  TALON_S3_SECRET_ACCESS_KEY: "bench"
})
