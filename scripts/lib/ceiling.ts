/** The C yardstick from ../shared/tools/ceiling, built into a scratch dir (never committed). */
import { execFileSync } from "node:child_process"
import { join, resolve } from "node:path"
import { repoRoot } from "./args.js"

export interface CeilingTools {
  readonly ceiling: string
  readonly pound: string
}

/** Builds `ceiling` and `pound` into `dir` with the tools' own Makefile. */
export const buildCeiling = (dir: string): CeilingTools => {
  execFileSync("make", ["-s", "-C", resolve(repoRoot, "../shared/tools/ceiling"), `OUT=${dir}`], { stdio: "inherit" })
  return { ceiling: join(dir, "ceiling"), pound: join(dir, "pound") }
}
