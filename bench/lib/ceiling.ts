/**
 * The C yardstick of the benchmark scripts, built into a scratch dir (never committed):
 * `ceiling` + `pound` from ../shared/tools/ceiling where that sits beside the repo (the
 * outside reference the recorded numbers were measured against), else the project's own
 * talon-ref-server + talon-ref-load from tools/ref, which take the same flags and print
 * the same banner and JSON fields. TALON_YARDSTICK=ref picks ours even where both exist.
 */
import { execFileSync } from "node:child_process"
import { existsSync } from "node:fs"
import { join, resolve } from "node:path"
import { buildRefTools } from "../../tools/ref/build.js"
import { repoRoot } from "./args.js"

export interface CeilingTools {
  /** The server: answers GetRange from one file (`--listen HOST:PORT --file F`). */
  readonly ceiling: string
  /** The pipelined load client (`--addr ... --json [--verify F] [--server-pid P]`). */
  readonly pound: string
  /** Which tools these are, for the log and the data file's notes. */
  readonly source: string
}

export const sharedCeilingDir = resolve(repoRoot, "../shared/tools/ceiling")

export const buildCeiling = (dir: string): CeilingTools => {
  const useShared = process.env.TALON_YARDSTICK !== "ref" && existsSync(join(sharedCeilingDir, "Makefile"))
  const tools: CeilingTools = useShared
    ? (execFileSync("make", ["-s", "-C", sharedCeilingDir, `OUT=${dir}`], { stdio: "inherit" }),
      { ceiling: join(dir, "ceiling"), pound: join(dir, "pound"), source: "ceiling + pound (../shared/tools/ceiling)" })
    : (() => {
        const ref = buildRefTools(dir)
        return { ceiling: ref.server, pound: ref.load, source: "talon-ref-server + talon-ref-load (tools/ref; ../shared/tools/ceiling absent)" }
      })()
  console.log(`C yardstick: ${tools.source}`)
  return tools
}
