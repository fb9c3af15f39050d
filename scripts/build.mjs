// Transpiles src/**/*.ts to dist/ (same tree, .js) so `talon` starts without a TypeScript
// loader: through tsx every one of effect's hundreds of modules goes through loader hooks on
// another thread, which cost ~3x the CPU of a plain start. dist/ mirrors src/ at the same depth,
// so paths relative to a module (../../../build/Release/*.node) resolve the same from both.
// Runs at `npm install` / `npm ci` (prepare); bin/talon.mjs falls back to src/ through tsx
// whenever a source file is newer than the build. For `npm pack` / `npm publish` (or with
// --declarations) it also emits the .d.ts files the package's `types` and `exports` name
// (tsconfig.build.json); a plain `npm ci` skips that, it is most of the build's time.
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { build } from "esbuild"

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..")
const src = path.join(root, "src")
const dist = path.join(root, "dist")

const walk = (dir) =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name)
    return e.isDirectory() ? walk(p) : [p]
  })

fs.rmSync(dist, { recursive: true, force: true })
const files = walk(src)
await build({
  entryPoints: files.filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts")),
  outdir: dist,
  outbase: src,
  format: "esm",
  platform: "node",
  target: "node20",
  logLevel: "warning"
})
// Thread/process entries (*.mjs) register tsx and import a sibling .ts; in dist/ the sibling is
// already JavaScript, so the entry imports it directly.
for (const f of files.filter((f) => f.endsWith(".mjs"))) {
  const out = path.join(dist, path.relative(src, f))
  const text = fs
    .readFileSync(f, "utf8")
    .replace(/^import \{ register \} from "tsx\/esm\/api"\n/m, "")
    .replace(/^register\(\)\n/m, "")
    // The same when the entry loads tsx only if the bundle is stale (it then imports dist's .js).
    .replace(/^(\s*)const \{ register \} = await import\("tsx\/esm\/api"\)\n\s*register\(\)\n/m, "")
    .replace(/(import\(\s*"\.[^"]*)\.ts"/g, '$1.js"')
  fs.mkdirSync(path.dirname(out), { recursive: true })
  fs.writeFileSync(out, text)
}
// The CLI's bundle (dist/bundle/cli), what bin/talon.mjs runs; dist/ stays the library.
execFileSync(process.execPath, [path.join(root, "scripts", "bundle.mjs")], { stdio: "inherit", cwd: root })
const packing = ["pack", "publish"].includes(process.env.npm_command ?? "") || process.argv.includes("--declarations")
if (packing) {
  const tsc = path.join(root, "node_modules", "typescript", "bin", "tsc")
  execFileSync(process.execPath, [tsc, "-p", path.join(root, "tsconfig.build.json")], { stdio: "inherit", cwd: root })
}
fs.writeFileSync(path.join(dist, ".stamp"), `${new Date().toISOString()}\n`)
