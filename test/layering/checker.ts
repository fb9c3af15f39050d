/**
 * The import checker behind test/layering.test.ts: every import of every src/ file against
 * the table in src/layers.ts. Imports are read by the TypeScript scanner (static, dynamic
 * and `export … from`), so a string that merely looks like an import is not one.
 */
import * as fs from "node:fs"
import { builtinModules } from "node:module"
import * as path from "node:path"
import ts from "typescript"
import type { ImportRule } from "../../src/layers.js"

export interface Source {
  /** Path relative to the repository root, `/`-separated: `src/gateway/server.ts`. */
  readonly file: string
  readonly text: string
}

export interface Violation {
  readonly file: string
  readonly line: number
  readonly specifier: string
  readonly rule: string
}

/** The layer a src/ path belongs to: its entry in `files`, else its first folder, or `root` for files directly under src/. */
export const layerOf = (file: string, files: Readonly<Record<string, string>> = {}): string => {
  const placed = files[file]
  if (placed !== undefined) return placed
  const parts = file.split("/")
  return parts.length > 2 ? parts[1]! : "root"
}

const packageName = (specifier: string): string =>
  specifier.startsWith("@") ? specifier.split("/").slice(0, 2).join("/") : specifier.split("/")[0]!

const builtins = new Set(builtinModules)

export const checkSources = (
  sources: ReadonlyArray<Source>,
  layers: Readonly<Record<string, ImportRule>>,
  dependencies: ReadonlySet<string>,
  files: Readonly<Record<string, string>> = {}
): Array<Violation> => {
  const out: Array<Violation> = []
  for (const { file, text } of sources) {
    const from = layerOf(file, files)
    const layer = layers[from]
    const lineOf = (pos: number) => text.slice(0, pos).split("\n").length
    if (layer === undefined) {
      out.push({ file, line: 1, specifier: "", rule: `folder src/${from} has no entry in src/layers.ts; add one saying what it may import` })
      continue
    }
    for (const ref of ts.preProcessFile(text, true, true).importedFiles) {
      const specifier = ref.fileName
      const report = (rule: string) => out.push({ file, line: lineOf(ref.pos), specifier, rule })
      if (specifier.startsWith(".")) {
        const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier))
        if (!target.startsWith("src/")) {
          report(`imports ${target}, outside src/: the published package holds only what src/ builds to`)
          continue
        }
        // Imports name the built .js; the table names the source .ts.
        const to = layerOf(target.replace(/\.js$/, ".ts"), files)
        if (to !== from && !layer.imports.includes(to)) {
          report(
            `${from} (${layer.holds}) may import only ${layer.imports.join(", ") || "nothing outside itself"}, not ${to}`
          )
        }
      } else if (specifier.startsWith("node:") || builtins.has(specifier)) {
        continue
      } else if (layer.dev !== true && !dependencies.has(packageName(specifier))) {
        report(`${packageName(specifier)} is not in package.json "dependencies": an installed talon-ts would not find it`)
      }
    }
  }
  return out
}

/** Every .ts/.mjs file under `dir/src`, as Sources with repo-relative paths. */
export const readSources = (dir: string): Array<Source> => {
  const walk = (rel: string): Array<string> =>
    fs.readdirSync(path.join(dir, rel), { withFileTypes: true }).flatMap((e) => {
      const p = `${rel}/${e.name}`
      return e.isDirectory() ? walk(p) : /\.(ts|mjs)$/.test(e.name) && !e.name.endsWith(".d.ts") ? [p] : []
    })
  return walk("src").map((file) => ({ file, text: fs.readFileSync(path.join(dir, file), "utf8") }))
}

/** The table's own sanity: every import names a layer, and following imports never loops back. */
export const tableProblems = (
  layers: Readonly<Record<string, ImportRule>>,
  fileLayers: Readonly<Record<string, string>> = {}
): Array<string> => {
  const problems: Array<string> = []
  for (const [name, layer] of Object.entries(layers)) {
    for (const to of layer.imports) {
      if (layers[to] === undefined) problems.push(`${name} imports ${to}, which is not a layer`)
      else if (layers[to]!.dev === true && layer.dev !== true) problems.push(`${name} imports dev-only ${to}`)
    }
  }
  for (const [file, layer] of Object.entries(fileLayers)) {
    if (layers[layer] === undefined) problems.push(`${file} is placed in ${layer}, which is not a layer`)
  }
  const state = new Map<string, "visiting" | "done">()
  const visit = (name: string, trail: Array<string>): void => {
    if (state.get(name) === "done") return
    if (state.get(name) === "visiting") {
      problems.push(`cycle: ${[...trail.slice(trail.indexOf(name)), name].join(" -> ")}`)
      return
    }
    state.set(name, "visiting")
    for (const to of layers[name]?.imports ?? []) visit(to, [...trail, name])
    state.set(name, "done")
  }
  for (const name of Object.keys(layers)) visit(name, [])
  return problems
}

export const formatViolation = (v: Violation): string =>
  v.specifier === "" ? `${v.file}: ${v.rule}` : `${v.file}:${v.line} imports "${v.specifier}": ${v.rule}`

/** Every .ts/.mjs file under `dir/<folder>`, as Sources with repo-relative paths. */
export const readTree = (dir: string, folder: string): Array<Source> => {
  const walk = (rel: string): Array<string> =>
    fs.readdirSync(path.join(dir, rel), { withFileTypes: true }).flatMap((e) => {
      const p = `${rel}/${e.name}`
      if (e.isDirectory()) return e.name === "node_modules" || e.name.startsWith(".") ? [] : walk(p)
      return /\.(ts|mts|mjs)$/.test(e.name) && !e.name.endsWith(".d.ts") ? [p] : []
    })
  return walk(folder).map((file) => ({ file, text: fs.readFileSync(path.join(dir, file), "utf8") }))
}

/**
 * Bench and tests share fixtures through one kit, `bench/kit`: a bench never imports test/,
 * and a test imports bench/ only through the kit, except the tests of the bench tooling
 * itself (test/bench/), which import what they test.
 */
export const kitViolations = (sources: ReadonlyArray<Source>): Array<Violation> => {
  const out: Array<Violation> = []
  for (const { file, text } of sources) {
    for (const ref of ts.preProcessFile(text, true, true).importedFiles) {
      const specifier = ref.fileName
      if (!specifier.startsWith(".")) continue
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier))
      const line = text.slice(0, ref.pos).split("\n").length
      if (file.startsWith("bench/") && target.startsWith("test/")) {
        out.push({ file, line, specifier, rule: "a bench imports nothing under test/: move the shared fixture to bench/kit" })
      } else if (file.startsWith("test/") && !file.startsWith("test/bench/") && target.startsWith("bench/") && !target.startsWith("bench/kit/")) {
        out.push({ file, line, specifier, rule: "a test imports bench/ only through bench/kit (or from test/bench/, which tests the bench tooling)" })
      }
    }
  }
  return out
}
