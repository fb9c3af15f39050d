// The bundle's stand-ins for packages a talon process imports but rarely or never calls
// (scripts/bundle.mjs uses them for the CLI's bundles; test/core/bundlePlugins.test.ts runs them):
// each becomes a stub that loads the real package on first use.
import { createRequire } from "node:module"
import * as path from "node:path"

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..")

// CommonJS libraries that a dependency imports at the top but calls only in paths a process
// rarely runs: @effect/cli's file parsers (yaml, toml: `Args.fileParse`, which talon never uses),
// undici (@effect/platform-node's HttpServer imports its HttpClient, which talon never provides),
// ws (WebSocket upgrades and socket servers, which talon never serves) and mime (content types
// of served files, which talon never serves). CommonJS cannot be tree-shaken, so each would be
// compiled into every process (~1.7 MiB of source, kept on V8's heap); here each becomes a stub
// that requires the real package from node_modules on first call, outside the bundle.
const lazyCommonJs = {
  toml: { match: /[\\/]@effect[\\/]cli[\\/]/, names: ["parse"] },
  yaml: { match: /[\\/]@effect[\\/]cli[\\/]/, names: ["parse"] },
  undici: { match: /[\\/]@effect[\\/]platform-node[\\/]/, names: ["getGlobalDispatcher"], classes: ["Agent"] },
  ws: { match: /[\\/]@effect[\\/]platform-node(-shared)?[\\/]/, classes: ["WebSocket", "WebSocketServer"] },
  mime: { match: /[\\/]@effect[\\/]platform-node[\\/]/ },
  // talon's backend parses XML for listings and error bodies only (src/backend/xml.ts makes its
  // parser on first use): ~87 KiB of source an idle worker or coordinator never runs.
  "fast-xml-parser": { match: /[\\/]src[\\/]backend[\\/]/, classes: ["XMLParser"] }
}
export const lazyModules = {
  name: "talon-lazy-commonjs",
  setup(b) {
    b.onResolve({ filter: /^(toml|yaml|undici|ws|mime|fast-xml-parser)$/ }, (args) => {
      // The stub's own require stays a runtime require (resolved from node_modules when called).
      if (args.namespace === "talon-lazy") return { path: args.path, external: true }
      const lazy = lazyCommonJs[args.path]
      return lazy.match.test(args.importer) ? { path: args.path, namespace: "talon-lazy" } : undefined
    })
    b.onLoad({ filter: /.*/, namespace: "talon-lazy" }, (args) => {
      const { names = [], classes = [] } = lazyCommonJs[args.path]
      const lines = [
        `let real`,
        `const load = () => (real ??= require(${JSON.stringify(args.path)}))`,
        ...names.map((n) => `export const ${n} = (...a) => load().${n}(...a)`),
        ...classes.map((n) => `export const ${n} = function (...a) { return new (load().${n})(...a) }`),
        `export default new Proxy({}, { get: (_, k) => load()[k] })`
      ]
      return { contents: lines.join("\n"), loader: "js", resolveDir: root }
    })
  }
}

// fast-check, which effect re-exports (effect/FastCheck) for Schema's arbitraries: no talon process
// generates test data, yet ~57 KiB of it survives tree-shaking in every graph. The bundle gets a
// stub with fast-check's export names whose functions load the real package (the copy effect
// resolves) on first call; its symbols are registered ones (Symbol.for) and its enums plain data,
// so both are the same values the real package has.
const effectRequire = createRequire(createRequire(path.join(root, "package.json")).resolve("effect"))
const fastCheck = effectRequire("fast-check")
const fastCheckStub = () => {
  const lines = [
    `let real`,
    // The package name in a variable: esbuild would otherwise try to bundle what require.resolve names.
    `const effect = "effect"`,
    `const load = () => (real ??= require("node:module").createRequire(require.resolve(effect))("fast-check"))`
  ]
  for (const [name, value] of Object.entries(fastCheck)) {
    if (name === "default") continue
    if (typeof value === "function") lines.push(`export function ${name}(...a) { return new.target ? new (load().${name})(...a) : load().${name}(...a) }`)
    else if (typeof value === "symbol") lines.push(`export const ${name} = Symbol.for(${JSON.stringify(Symbol.keyFor(value))})`)
    else lines.push(`export const ${name} = ${JSON.stringify(value)}`)
  }
  lines.push(`export default new Proxy({}, { get: (_, k) => load()[k] })`)
  return lines.join("\n")
}
export const lazyFastCheck = {
  name: "talon-lazy-fast-check",
  setup(b) {
    b.onResolve({ filter: /^fast-check$/ }, (args) =>
      /[\\/]effect[\\/]dist[\\/]/.test(args.importer) ? { path: "fast-check", namespace: "talon-lazy-fast-check" } : undefined
    )
    b.onLoad({ filter: /.*/, namespace: "talon-lazy-fast-check" }, () => ({ contents: fastCheckStub(), loader: "js", resolveDir: root }))
  }
}
if (Object.values(fastCheck).some((v) => typeof v === "symbol" && Symbol.keyFor(v) === undefined)) {
  throw new Error("scripts/bundle.mjs: fast-check exports a symbol that is not registered; the lazy stub cannot reproduce it")
}
