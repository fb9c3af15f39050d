import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { FILE_LAYERS, LAYERS } from "../src/layers.js"
import { checkSources, formatViolation, kitViolations, readSources, readTree, tableProblems } from "./layering/checker.js"

const repo = path.resolve(import.meta.dirname, "..")
const pkg = JSON.parse(fs.readFileSync(path.join(repo, "package.json"), "utf8")) as { dependencies: Record<string, string> }
const dependencies = new Set(Object.keys(pkg.dependencies))

describe("module layers (src/layers.ts)", () => {
  it("the table names only layers and has no cycle", () => {
    expect(tableProblems(LAYERS, FILE_LAYERS)).toEqual([])
  })

  it("every import under src/ is one its layer allows", () => {
    const sources = readSources(repo)
    expect(sources.length).toBeGreaterThan(100)
    expect(checkSources(sources, LAYERS, dependencies, FILE_LAYERS).map(formatViolation)).toEqual([])
  })

  it("every src/ file stays under 400 lines (but the generated SHA-256 table)", () => {
    // DiskStore.ts is being split by what it holds; take it off this list once it is.
    const exempt = new Set(["src/placement/sha256.ts", "src/worker/store/DiskStore.ts"])
    const long = readSources(repo)
      .map(({ file, text }) => ({ file, lines: text.split("\n").length - (text.endsWith("\n") ? 1 : 0) }))
      .filter(({ file, lines }) => lines >= 400 && !exempt.has(file))
      .map(({ file, lines }) => `${file}: ${lines} lines; split it by what it holds`)
    expect(long).toEqual([])
  })

  it("nothing but the CLI, talon up and the package entry imports the origin stub", () => {
    const importers = Object.entries(LAYERS)
      .filter(([, layer]) => layer.imports.includes("origin"))
      .map(([name]) => name)
      .sort()
    expect(importers).toEqual(["cli", "cluster", "root"])
  })

  it("reports a planted violation with the file, the import and the rule", () => {
    const planted = [
      { file: "src/gateway/planted.ts", text: `import { listen } from "../origin/server.js"\nexport const x = listen\n` },
      { file: "src/coordinator/planted.ts", text: `// "../client/x.js" in a comment is no import\nexport type { T } from "../client/TalonClient.js"\n` },
      { file: "src/core/planted.ts", text: `export const load = () => import("fast-check")\n` },
      { file: "src/protocol/planted.ts", text: `import "../../package.json"\n` },
      { file: "src/newfolder/x.ts", text: `export {}\n` },
      { file: "src/client/fine.ts", text: `import { Effect } from "effect"\nimport * as net from "node:net"\nimport { ControlChannel } from "../transport/ControlChannel.js"\n` }
    ]
    const found = checkSources(planted, LAYERS, dependencies).map(formatViolation)
    expect(found).toEqual([
      expect.stringMatching(/^src\/gateway\/planted\.ts:1 imports "\.\.\/origin\/server\.js": gateway \(.+\) may import only core, .*http.*, not origin$/),
      expect.stringMatching(/^src\/coordinator\/planted\.ts:2 imports "\.\.\/client\/TalonClient\.js": coordinator \(.+\) may import only core, .+, not client$/),
      `src/core/planted.ts:1 imports "fast-check": fast-check is not in package.json "dependencies": an installed talon-ts would not find it`,
      `src/protocol/planted.ts:1 imports "../../package.json": imports package.json, outside src/: the published package holds only what src/ builds to`,
      `src/newfolder/x.ts: folder src/newfolder has no entry in src/layers.ts; add one saying what it may import`
    ])
  })

  it("places the files FILE_LAYERS names above their folder, both ways", () => {
    const planted = [
      { file: "src/worker/planted.ts", text: `import { ALL_COMPONENTS } from "../config/registry.js"\nexport const n = ALL_COMPONENTS.length\n` },
      { file: "src/config/registry.ts", text: `import { WorkerSchema } from "../worker/config.js"\nexport const s = WorkerSchema\n` }
    ]
    expect(checkSources(planted, LAYERS, dependencies, FILE_LAYERS).map(formatViolation)).toEqual([
      expect.stringMatching(/^src\/worker\/planted\.ts:1 imports "\.\.\/config\/registry\.js": worker \(.+\) may import only .+, not cli$/)
    ])
    // Without the placement the registry would be config importing worker: a cycle.
    expect(checkSources(planted.slice(1), LAYERS, dependencies).map(formatViolation)).toEqual([
      expect.stringMatching(/^src\/config\/registry\.ts:1 imports "\.\.\/worker\/config\.js": config \(.+\) may import only core, transport, not worker$/)
    ])
  })

  it("finds a violation planted in a file on disk", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "talon-layering-"))
    try {
      fs.mkdirSync(path.join(dir, "src/transport"), { recursive: true })
      fs.mkdirSync(path.join(dir, "src/client"), { recursive: true })
      fs.writeFileSync(path.join(dir, "src/client/Thing.ts"), `export const thing = 1\n`)
      fs.writeFileSync(path.join(dir, "src/transport/Uses.ts"), `\n\nimport { thing } from "../client/Thing.js"\nexport const y = thing\n`)
      const found = checkSources(readSources(dir), LAYERS, dependencies)
      expect(found).toEqual([
        {
          file: "src/transport/Uses.ts",
          line: 3,
          specifier: "../client/Thing.js",
          rule: "transport (addresses, framed connections, the control channel) may import only core, protocol, not client"
        }
      ])
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("bench and tests share fixtures only through bench/kit", () => {
    const sources = [...readTree(repo, "bench"), ...readTree(repo, "test")]
    expect(sources.length).toBeGreaterThan(300)
    expect(kitViolations(sources).map(formatViolation)).toEqual([])
    const planted = [
      { file: "bench/x.ts", text: `import { a } from "../test/support/a.js"\n` },
      { file: "test/worker/x.test.ts", text: `import { b } from "../../bench/lib/b.js"\nimport { c } from "../../bench/kit/c.js"\n` },
      { file: "test/bench/x.test.ts", text: `import { d } from "../../bench/lib/d.js"\n` },
      { file: "bench/kit/y.ts", text: `import { e } from "../../src/core/ids.js"\n` }
    ]
    expect(kitViolations(planted).map(formatViolation)).toEqual([
      `bench/x.ts:1 imports "../test/support/a.js": a bench imports nothing under test/: move the shared fixture to bench/kit`,
      `test/worker/x.test.ts:1 imports "../../bench/lib/b.js": a test imports bench/ only through bench/kit (or from test/bench/, which tests the bench tooling)`
    ])
  })

  it("finds a cycle planted in the table", () => {
    const looped = { ...LAYERS, core: { imports: ["client"], holds: "x" } }
    expect(tableProblems(looped)).toContainEqual(expect.stringMatching(/^cycle: .*core -> client.*/))
  })
})
