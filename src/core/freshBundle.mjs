// Whether the build in dist/ (and its CLI bundle) may run instead of src/: it is at least as new
// as every source file, or there is no src/ (an installed package). TALON_FROM_SOURCE forces
// src/. Shared by bin/talon.mjs and the process/thread entries a src/ process starts (a serving
// loop, a loadgen thread), so a process started from src/ under tsx (tests, an edited checkout)
// starts its children from the bundle when that is safe: through tsx's loader a child costs ~4x
// the start-up CPU. Plain JavaScript: it runs before any loader is registered. The same two
// levels below the root from src/core/ and dist/core/.
import * as fs from "node:fs"

const root = new URL("../../", import.meta.url)

const newerThan = (dir, t) =>
  fs.readdirSync(dir, { withFileTypes: true }).some((e) => {
    const p = new URL(e.name + (e.isDirectory() ? "/" : ""), dir)
    return e.isDirectory() ? newerThan(p, t) : fs.statSync(p).mtimeMs > t
  })

export const buildIsFresh = () => {
  if (!fs.existsSync(new URL("src/", root))) return true
  if (process.env.TALON_FROM_SOURCE !== undefined) return false
  let stamp
  try {
    stamp = fs.statSync(new URL("dist/.stamp", root)).mtimeMs
  } catch {
    return false
  }
  return !newerThan(new URL("src/", root), stamp)
}

/** The bundled entry `name` (dist/bundle/cli/<name>.js) when the build is fresh and bundles are allowed, else undefined. */
export const freshBundleEntry = (name) => {
  if (process.env.TALON_NO_BUNDLE !== undefined || !buildIsFresh()) return undefined
  const url = new URL(`dist/bundle/cli/${name}.js`, root)
  return fs.existsSync(url) ? url.href : undefined
}
