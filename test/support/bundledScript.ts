/**
 * A TypeScript fixture bundled by esbuild into one ES module in a temp dir (once per test
 * process), for a child process or thread to run with plain `node`. Through tsx's loader, which
 * a fork or a worker thread must register itself, each of effect's hundreds of modules passes
 * loader hooks on another thread: seconds of CPU per start on a loaded machine, against a
 * fraction of a second for the bundle. Only for fixtures whose code resolves nothing relative to
 * its own file at run time (no native addon, no sibling entry).
 */
import { build } from "esbuild"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

let dir: string | undefined
const built = new Map<string, Promise<string>>()

const outDir = (): string => {
  if (dir === undefined) {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), "talon-fixture-"))
    process.once("exit", () => fs.rmSync(d, { recursive: true, force: true }))
    dir = d
  }
  return dir
}

/** The path of `entry` (a .ts file) bundled with everything it imports. */
export const bundledScript = (entry: string): Promise<string> => {
  let p = built.get(entry)
  if (p === undefined) {
    const outfile = path.join(outDir(), `${built.size}-${path.basename(entry, ".ts")}.mjs`)
    p = build({
      entryPoints: [entry],
      outfile,
      bundle: true,
      format: "esm",
      platform: "node",
      target: "node20",
      logLevel: "warning",
      // CommonJS dependencies (ws, under the platform's HTTP server) require node built-ins.
      banner: { js: 'import { createRequire as __talonRequire } from "node:module"; const require = __talonRequire(import.meta.url);' }
    }).then(() => outfile)
    built.set(entry, p)
  }
  return p
}
