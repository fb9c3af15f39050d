/**
 * Builds the C reference tools (talon-ref-server, talon-ref-load) from this directory
 * into a directory of the caller's choosing, with the system C compiler ($CC or cc) and
 * libc only. Tests build them into a temp dir; benchmark scripts into their scratch dir.
 *
 *   npx tsx tools/ref/build.ts OUT_DIR
 */
import { execFileSync } from "node:child_process"
import { mkdirSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

export const refSourceDir = dirname(fileURLToPath(import.meta.url))

export interface RefTools {
  readonly server: string
  readonly load: string
}

const FLAGS = ["-O2", "-g", "-Wall", "-Wextra", "-D_FILE_OFFSET_BITS=64"]

export const buildRefTools = (outDir: string): RefTools => {
  mkdirSync(outDir, { recursive: true })
  const cc = process.env.CC || "cc"
  const tools: RefTools = { server: join(outDir, "talon-ref-server"), load: join(outDir, "talon-ref-load") }
  for (const [source, out] of [["server.c", tools.server], ["load.c", tools.load]] as const) {
    try {
      execFileSync(cc, [...FLAGS, "-o", out, join(refSourceDir, source)], { stdio: "pipe" })
    } catch (e) {
      const err = e as { code?: string; stderr?: Buffer }
      if (err.code === "ENOENT") {
        throw new Error(`building tools/ref/${source} needs a C compiler: ${cc} was not found (install one, e.g. apt-get install gcc, or set CC)`)
      }
      throw new Error(`${cc} failed on tools/ref/${source}:\n${err.stderr?.toString() ?? String(e)}`)
    }
  }
  return tools
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = process.argv[2]
  if (out === undefined) {
    console.error("usage: npx tsx tools/ref/build.ts OUT_DIR")
    process.exit(2)
  }
  const t = buildRefTools(resolve(out))
  console.log(`${t.server}\n${t.load}`)
}
