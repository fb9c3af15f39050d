// Bundles the CLI into dist/bundle/cli/: one entry (main.js) whose subcommands are separate lazy
// chunks (esbuild code splitting follows src/cli/commands.ts's dynamic imports), plus the
// processes and threads the CLI starts (a --loops serving loop, a loadgen thread). A bundle
// loads as a few large modules instead of effect's hundreds of small ones: measured from dist/
// vs this bundle, `talon --help` costs ~1/3 of the CPU and ~70 MiB less RSS (BENCHMARKS.md,
// "Footprint"). What a process rarely needs stays a dynamic import and so a chunk of its own
// (the etcd store, the FUSE binding); etcd3 stays external (CommonJS with gRPC, loaded only with
// the etcd store).
//
// dist/bundle/cli sits at the same depth as dist/<component>/<folder>/, so a module's
// `new URL("../../../build/…", import.meta.url)` means the same file from both; URLs naming a
// sibling process entry (*.mjs) are pointed at the bundled entry instead.
import * as fs from "node:fs"
import * as path from "node:path"
import { build } from "esbuild"
import { lazyFastCheck, lazyModules } from "./bundlePlugins.mjs"

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..")
const src = path.join(root, "src")
const outdir = path.join(root, "dist", "bundle", "cli")

/** Process/thread entries (src-relative *.mjs) → the bundled entry that replaces them. */
const entries = {
  "worker/loops/child-entry.mjs": { name: "loop-child", from: "worker/loops/child.ts" },
  "loadgen/worker-entry.mjs": { name: "loadgen-thread", from: "loadgen/worker.ts" }
}

const relativeUrl = (from, to) => {
  const rel = path.relative(from, to).split(path.sep).join("/")
  return rel.startsWith(".") ? rel : `./${rel}`
}

/** Rewrites module-relative URLs for a bundle written to `into` (dist/bundle/cli or dist/bundle/script, the same depth). */
const rewriteUrls = (into) => ({
  name: "talon-bundle-urls",
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, async (args) => {
      if (!args.path.startsWith(src + path.sep)) return undefined
      let text = await fs.promises.readFile(args.path, "utf8")
      const dir = path.dirname(args.path)
      const target = (spec) => {
        const abs = path.resolve(dir, spec)
        const entry = entries[path.relative(src, abs).split(path.sep).join("/")]
        if (entry !== undefined) return relativeUrl(into, path.join(outdir, `${entry.name}.js`))
        // Outside src/ (build/Release/*.node): resolve as dist/<same place> does.
        if (!abs.startsWith(src + path.sep)) return relativeUrl(into, path.resolve(root, "dist", path.relative(src, dir), spec))
        // Inside src/: the transpiled mirror in dist/.
        return relativeUrl(into, path.join(root, "dist", path.relative(src, abs)))
      }
      if (text.includes("import.meta.url")) {
        text = text.replace(/new URL\("(\.{1,2}\/[^"]+)", import\.meta\.url\)/g, (_, spec) => `new URL(${JSON.stringify(target(spec))}, import.meta.url)`)
      }
      // The FUSE binding is imported through a variable so nothing resolves it before a mount;
      // the bundle keeps it that way and points it at dist/'s copy (it imports nothing but node:).
      text = text.replace(/^(const NATIVE_MODULE = )"(\.\/[^"]+)"$/m, (_, decl, spec) => `${decl}${JSON.stringify(target(spec))}`)
      return { contents: text, loader: "ts" }
    })
  }
})

fs.rmSync(outdir, { recursive: true, force: true })
const result = await build({
  entryPoints: {
    main: path.join(src, "cli", "main.ts"),
    ...Object.fromEntries(Object.values(entries).map((e) => [e.name, path.join(src, e.from)]))
  },
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  chunkNames: "chunk-[hash]",
  // Whitespace and syntax only (names stay, for stack traces and class names): V8 keeps every
  // module's source text on its heap, and parses less at start-up.
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: "none",
  external: ["etcd3", "tsx", "tsx/*"],
  // ESM builds first where a package has both (the AWS signer's CommonJS build pulls in all of
  // @smithy/core; its ESM build tree-shakes to the signer).
  mainFields: ["module", "main"],
  // Bundled CommonJS dependencies call require() for node: built-ins.
  banner: { js: 'import { createRequire as __talonRequire } from "node:module"; const require = __talonRequire(import.meta.url);' },
  plugins: [rewriteUrls(outdir), lazyModules, lazyFastCheck],
  metafile: true,
  logLevel: "warning"
})
if (process.argv.includes("--meta")) fs.writeFileSync(path.join(outdir, "meta.json"), JSON.stringify(result.metafile))

// One-shot commands (and `talon --help`, with every subcommand) also as one CommonJS script each (dist/bundle/script/<name>-<hash>.cjs, named
// in manifest.json), which bin/talon.mjs compiles through vm.Script with V8's code cache
// (src/core/scriptBundle.mjs): Node 20 caches no ES module's compilation, and compiling the bundle
// is a third of a one-shot command's CPU. A script cannot be split into chunks, so each holds its
// command's whole graph; long-running servers keep the ESM chunks above (their start-up is paid
// once). Which module exports each command mirrors src/cli/commands.ts.
const scriptCommands = {
  read: ["client/cli.ts", "read"],
  cluster: ["client/cli.ts", "cluster"],
  prefetch: ["client/prefetchCli.ts", "prefetch"],
  put: ["client/writeCli.ts", "put"],
  rm: ["client/writeCli.ts", "rm"],
  // `talon` alone or `talon --help`: every subcommand, for its help.
  help: undefined
}
const scriptOutdir = path.join(root, "dist", "bundle", "script")
const scriptEntries = {
  name: "talon-script-entries",
  setup(b) {
    b.onResolve({ filter: /^talon-script:/ }, (args) => ({ path: args.path.slice("talon-script:".length), namespace: "talon-script" }))
    b.onLoad({ filter: /.*/, namespace: "talon-script" }, (args) => {
      const command = scriptCommands[args.path]
      const contents = command === undefined ? [
        `import { loadSubcommands } from "./cli/commands.ts"`,
        `import { runCli } from "./cli/run.ts"`,
        `loadSubcommands([]).then((all) => runCli(all, { exitWhenDone: true }))`
      ].join("\n") : [
        `import { runCli } from "./cli/run.ts"`,
        `import { ${command[1]} } from ${JSON.stringify(`./${command[0]}`)}`,
        `runCli([${command[1]}], { exitWhenDone: true })`
      ].join("\n")
      return { contents, loader: "ts", resolveDir: src }
    })
  }
}
fs.rmSync(scriptOutdir, { recursive: true, force: true })
const scripts = await build({
  entryPoints: Object.keys(scriptCommands).map((name) => ({ in: `talon-script:${name}`, out: name })),
  outdir: scriptOutdir,
  entryNames: "[name]-[hash]",
  outExtension: { ".js": ".cjs" },
  bundle: true,
  format: "cjs",
  platform: "node",
  target: "node20",
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: "none",
  external: ["etcd3", "tsx", "tsx/*"],
  mainFields: ["module", "main"],
  // A script has no import.meta: module-relative URLs (the native addon) resolve from its file.
  define: { "import.meta.url": "__talonImportMetaUrl" },
  // src/core/scriptBundle.mjs reads the script as latin1.
  charset: "ascii",
  banner: { js: 'var __talonImportMetaUrl = require("node:url").pathToFileURL(__filename).href;' },
  plugins: [scriptEntries, rewriteUrls(scriptOutdir), lazyModules, lazyFastCheck],
  metafile: true,
  logLevel: "warning"
})
const manifest = Object.fromEntries(
  Object.entries(scripts.metafile.outputs).flatMap(([out, o]) =>
    o.entryPoint === undefined ? [] : [[o.entryPoint.slice("talon-script:".length), path.basename(out)]]
  )
)
fs.writeFileSync(path.join(scriptOutdir, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`)
if (process.argv.includes("--meta")) fs.writeFileSync(path.join(scriptOutdir, "meta.json"), JSON.stringify(scripts.metafile))
