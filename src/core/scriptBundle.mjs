// Runs a one-shot command's script bundle (dist/bundle/script, scripts/bundle.mjs) through
// vm.Script with V8's code cache. Node 20 caches no ES module's compilation, so every run of a
// command would parse and compile its ~1.6 MiB bundle again, and compile each function it calls
// lazily on first call; the cache, made once after a run (so the functions that run are in it),
// lets V8 deserialize all of that instead.
//
// The cache lives in $TALON_CODE_CACHE_DIR, else $XDG_CACHE_HOME/talon, else ~/.cache/talon;
// TALON_CODE_CACHE=0 turns it off. A cache file is named by the bundle's content hash, node's
// version and architecture, and carries a SHA-1 of its payload: V8 checks only the source length
// and its own version, so a flipped byte would otherwise reach the compiler. A cache that is
// missing, unreadable, corrupt or rejected by V8 is rewritten after the run; a command never
// fails because of it. Plain JavaScript, no dependencies: it runs before any loader.
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as vm from "node:vm"

const MAGIC = Buffer.from("talon-v8-code-cache-1\n")
const DIGEST = 20

/** The directory cache files go to, or undefined when the cache is off. */
export const codeCacheDir = (env = process.env) => {
  if (env.TALON_CODE_CACHE === "0") return undefined
  if (env.TALON_CODE_CACHE_DIR) return env.TALON_CODE_CACHE_DIR
  const base = env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache")
  return path.join(base, "talon")
}

/** The script bundle (a path) that runs `command`, if the build has one. */
export const scriptBundleFor = (bundleDir, command) => {
  try {
    const manifest = JSON.parse(fs.readFileSync(path.join(bundleDir, "manifest.json"), "utf8"))
    const file = manifest[command]
    return typeof file === "string" ? path.join(bundleDir, file) : undefined
  } catch {
    return undefined
  }
}

// V8 rejects a cache made under other flags (its flag hash); node's flags name the file so that
// `talon` (with the launcher's flags) and `node bin/talon.mjs` keep one cache each, not one that
// each of them rejects and rewrites in turn.
const cacheFileFor = (dir, file) => {
  const flags = createHash("sha1").update(process.execArgv.join("\0")).digest("hex").slice(0, 8)
  return path.join(dir, `${path.basename(file, ".cjs")}-node${process.versions.node}-${process.arch}-${flags}.v8cache`)
}

const readCache = (cacheFile) => {
  let bytes
  try {
    bytes = fs.readFileSync(cacheFile)
  } catch {
    return undefined
  }
  if (bytes.length <= MAGIC.length + DIGEST || !bytes.subarray(0, MAGIC.length).equals(MAGIC)) return undefined
  const digest = bytes.subarray(MAGIC.length, MAGIC.length + DIGEST)
  const payload = bytes.subarray(MAGIC.length + DIGEST)
  return createHash("sha1").update(payload).digest().equals(digest) ? payload : undefined
}

const writeCache = (cacheFile, payload) => {
  // Write then rename: a command running at the same time reads the old file or the new, never half.
  const tmp = `${cacheFile}.${process.pid}.tmp`
  try {
    fs.mkdirSync(path.dirname(cacheFile), { recursive: true })
    fs.writeFileSync(tmp, Buffer.concat([MAGIC, createHash("sha1").update(payload).digest(), payload]))
    fs.renameSync(tmp, cacheFile)
    // The same command's caches from earlier builds (another hash, same node and flags) are
    // never read again.
    const name = path.basename(cacheFile)
    const [, command, suffix] = /^(.*-)[^-]+(-node.*)$/.exec(name)
    for (const f of fs.readdirSync(path.dirname(cacheFile))) {
      const hash = f.startsWith(command) && f.endsWith(suffix) ? f.slice(command.length, f.length - suffix.length) : ""
      if (f !== name && /^[A-Z0-9]+$/.test(hash)) fs.rmSync(path.join(path.dirname(cacheFile), f), { force: true })
    }
  } catch {
    try {
      fs.rmSync(tmp, { force: true })
    } catch {}
  }
}

/**
 * Runs the CommonJS script `file` as node would run it as a module, its compilation from the code
 * cache when one fits. Returns how the cache was used: "off", "hit", or "made" (written at exit).
 */
export const runScriptBundle = (file, env = process.env) => {
  // esbuild writes ASCII (it escapes the rest), so latin1 reads the same text without UTF-8 decoding.
  const source = fs.readFileSync(file, "latin1")
  const dir = codeCacheDir(env)
  const cacheFile = dir === undefined ? undefined : cacheFileFor(dir, file)
  const cachedData = cacheFile === undefined ? undefined : readCache(cacheFile)
  // The wrapper stays on a line of its own so the bundle's line numbers hold in stack traces.
  const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {\n${source}\n})`, {
    filename: file,
    lineOffset: -1,
    cachedData,
    importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER
  })
  const hit = cachedData !== undefined && !script.cachedDataRejected
  if (cacheFile !== undefined && !hit) {
    // At exit, after the command ran: the functions it called are compiled by then and go into
    // the cache too (only after a success: a mistyped command runs little of the code). Exit
    // handlers are synchronous, as createCachedData and the write are.
    process.once("exit", (code) => {
      if (code === 0) writeCache(cacheFile, script.createCachedData())
    })
  }
  const module = { exports: {} }
  const require = createRequire(file)
  script.runInThisContext()(module.exports, require, module, file, path.dirname(file))
  return cacheFile === undefined ? "off" : hit ? "hit" : "made"
}

/** bin/talon.mjs's entry: the script bundle for `command` under dist/bundle/script, when there is one. */
export const scriptBundleIn = (root, command) => scriptBundleFor(fileURLToPath(new URL("dist/bundle/script/", root)), command)
