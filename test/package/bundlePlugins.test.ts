/**
 * The CLI bundle's stand-ins (scripts/bundlePlugins.mjs) for packages a process imports but
 * rarely calls: an entry bundled with them, run as a real process, leaves each package unloaded
 * until first use, and then gets the real package's behaviour (effect's arbitraries through the
 * fast-check stub, the backend's XML parsing through the fast-xml-parser stub).
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "esbuild"
import { afterAll, describe, expect, it } from "vitest"
// @ts-expect-error: an untyped JavaScript module
import { lazyFastCheck, lazyModules } from "../../scripts/bundlePlugins.mjs"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "talon-bundle-plugins-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

const entry = `
import { Arbitrary, FastCheck, Schema } from "effect"
import { parseXml, text, child } from ${JSON.stringify(path.join(repo, "src", "backend", "xml.ts"))}
const loaded = (name) => Object.keys(require.cache).some((k) => k.includes(\`/node_modules/\${name}/\`))
const before = { fastCheck: loaded("fast-check"), xml: loaded("fast-xml-parser") }
const xml = parseXml("<R><Key>0012</Key><Key2> a </Key2></R>")
const samples = FastCheck.sample(Arbitrary.make(Schema.Int.pipe(Schema.between(3, 9))), { numRuns: 20, seed: 1 })
console.log(JSON.stringify({ before, after: { fastCheck: loaded("fast-check"), xml: loaded("fast-xml-parser") }, key: text(child(child(xml, "R"), "Key")), key2: text(child(child(xml, "R"), "Key2")), samples, verbose: FastCheck.VerbosityLevel.Verbose }))
`

describe("the bundle's lazy stand-ins", () => {
  it("load fast-check and fast-xml-parser on first use, and behave as the real packages", async () => {
    // In the repository, so effect and the XML parser resolve from its node_modules.
    const src = path.join(repo, "test", "package", `.bundle-plugins-entry-${process.pid}.ts`)
    fs.writeFileSync(src, entry)
    try {
      await build({
        entryPoints: [src],
        outfile: path.join(dir, "out.mjs"),
        bundle: true,
        format: "esm",
        platform: "node",
        target: "node20",
        mainFields: ["module", "main"],
        banner: { js: `import { createRequire as __r } from "node:module"; const require = __r(${JSON.stringify(path.join(repo, "package.json"))});` },
        plugins: [lazyModules, lazyFastCheck],
        logLevel: "error"
      })
    } finally {
      fs.rmSync(src, { force: true })
    }
    const out = JSON.parse(execFileSync(process.execPath, [path.join(dir, "out.mjs")], { encoding: "utf8" })) as {
      before: { fastCheck: boolean; xml: boolean }
      after: { fastCheck: boolean; xml: boolean }
      key: string
      key2: string
      samples: Array<number>
      verbose: number
    }
    expect(out.before).toEqual({ fastCheck: false, xml: false })
    expect(out.after).toEqual({ fastCheck: true, xml: true })
    expect(out.key).toBe("0012")
    expect(out.key2).toBe(" a ")
    expect(out.samples).toHaveLength(20)
    for (const n of out.samples) expect(Number.isInteger(n) && n >= 3 && n <= 9).toBe(true)
    expect(out.verbose).toBe(1)
  })
})
