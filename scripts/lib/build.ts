/**
 * Benchmarks measure the processes users run: `bin/talon.mjs` from dist/, not src/ through
 * tsx (whose loader alone adds ~100 MiB RSS and start-up CPU). bin/talon.mjs falls back to
 * tsx whenever a source file is newer than dist/, so a bench rebuilds dist/ first.
 */
import { execFileSync } from "node:child_process"
import { join } from "node:path"
import { repoRoot } from "./args.js"

export const buildDist = (): void => {
  execFileSync(process.execPath, [join(repoRoot, "scripts/build.mjs")], { stdio: "inherit" })
}

/** Argv prefix that runs the `talon` CLI the way users do. */
export const talonBin = (): ReadonlyArray<string> => [process.execPath, join(repoRoot, "bin/talon.mjs")]
