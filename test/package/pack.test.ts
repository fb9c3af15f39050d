/**
 * The published form: `npm pack` a copy of the repository, install the tarball into a fresh
 * project without the registry, and use it the way a user would — the embedding example under
 * plain `node` (a cluster from the exported layers, a range read checked byte by byte), the
 * `talon` bin, and the `.d.ts` files through the `exports` map under TypeScript's NodeNext rules.
 */
import { execFile, execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { appLockfile, type PackageJson } from "./lockfile.js"

const repo = path.resolve(import.meta.dirname, "../..")
const pkg = JSON.parse(fs.readFileSync(path.join(repo, "package.json"), "utf8")) as PackageJson & {
  readonly exports: Record<string, unknown>
}
const STEP_MS = 300_000

// Lifecycle variables of an enclosing `npm test` must not leak into the npm runs below.
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("npm_")))

const run = (cmd: string, args: ReadonlyArray<string>, cwd: string) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(cmd, args, { cwd, env, timeout: STEP_MS, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1
      resolve({ code, stdout, stderr })
    })
  })

const must = async (cmd: string, args: ReadonlyArray<string>, cwd: string) => {
  const r = await run(cmd, args, cwd)
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(" ")} in ${cwd} exited ${r.code}:\n${r.stderr}\n${r.stdout}`)
  return r
}

let tmp = ""
let app = ""
let packed: { filename: string; files: ReadonlyArray<{ path: string }> }

describe("the packed package", () => {
  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "talon-pack-"))
    // Packing runs the build, which replaces dist/: do it in a copy, never under running tests.
    const stage = path.join(tmp, "stage")
    fs.mkdirSync(path.join(stage, "scripts"), { recursive: true })
    for (const f of ["package.json", "README.md", "binding.gyp", "tsconfig.json", "tsconfig.build.json", "bin", "native", "src"]) {
      fs.cpSync(path.join(repo, f), path.join(stage, f), { recursive: true })
    }
    for (const f of ["scripts/build.mjs", "scripts/bundle.mjs", "scripts/bundlePlugins.mjs"]) fs.copyFileSync(path.join(repo, f), path.join(stage, f))
    fs.symlinkSync(path.join(repo, "node_modules"), path.join(stage, "node_modules"))
    const pack = await must("npm", ["pack", "--json", "--pack-destination", tmp], stage)
    packed = (JSON.parse(pack.stdout) as Array<typeof packed>)[0]!

    app = path.join(tmp, "app")
    fs.mkdirSync(app)
    const spec = `file:../${packed.filename}`
    const appDependencies = { [pkg.name]: spec, effect: pkg.dependencies.effect! }
    fs.writeFileSync(
      path.join(app, "package.json"),
      JSON.stringify({ name: "app", private: true, type: "module", dependencies: appDependencies, allowScripts: { [pkg.name]: true } })
    )
    const repoLock = JSON.parse(fs.readFileSync(path.join(repo, "package-lock.json"), "utf8"))
    const lock = appLockfile({ repoLock, pkg, tarball: path.join(tmp, packed.filename), spec, appDependencies })
    fs.writeFileSync(path.join(app, "package-lock.json"), JSON.stringify(lock, null, 1))
    await must("npm", ["ci", "--offline", "--no-audit", "--no-fund"], app)
  }, 3 * STEP_MS)

  afterAll(() => {
    if (tmp !== "") fs.rmSync(tmp, { recursive: true, force: true })
  })

  it("holds the built JavaScript, a .d.ts for every export, the bin and the addon's sources, and no sources or tests", () => {
    const files = new Set(packed.files.map((f) => f.path))
    const components = fs
      .readdirSync(path.join(repo, "src"), { withFileTypes: true })
      .filter((e) => e.isDirectory() && fs.existsSync(path.join(repo, "src", e.name, "index.ts")))
      .map((e) => `./${e.name}`)
    expect(components.filter((c) => pkg.exports[c] === undefined), "src/*/index.ts without an exports entry").toEqual([])
    for (const [key, target] of Object.entries(pkg.exports)) {
      if (typeof target === "string") continue
      const t = target as { types: string; default: string }
      expect(files.has(t.default.slice(2)), `${key} -> ${t.default}`).toBe(true)
      expect(files.has(t.types.slice(2)), `${key} -> ${t.types}`).toBe(true)
    }
    for (const f of ["bin/talon.mjs", "binding.gyp", "native/sendfile.c", "native/hits.c", "native/plane.h", "native/napi_util.h", "native/fuse.c", "native/fuse_reply.c", "native/fuse.h", "dist/cli/main.js"]) {
      expect(files.has(f), f).toBe(true)
    }
    expect([...files].filter((f) => f.startsWith("src/") || f.startsWith("test/") || f.startsWith("build/"))).toEqual([])
  })

  it("builds the native addon on install", () => {
    expect(fs.existsSync(path.join(app, "node_modules", pkg.name, "build/Release/talon_sendfile.node"))).toBe(true)
  })

  it("builds the FUSE addon on install exactly where pkg-config finds libfuse3", () => {
    let fuse3 = false
    try {
      execFileSync("pkg-config", ["--exists", "fuse3"])
      fuse3 = true
    } catch {
      fuse3 = false
    }
    expect(fs.existsSync(path.join(app, "node_modules", pkg.name, "build/Release/talon_fuse.node"))).toBe(fuse3)
  })

  it("runs the embedding example with plain node: a local cluster, a range read, every byte checked", async () => {
    fs.copyFileSync(path.join(repo, "docs/examples/embed.mjs"), path.join(app, "embed.mjs"))
    const r = await must(process.execPath, ["embed.mjs", "12345", "300000"], app)
    const result = JSON.parse(r.stdout.trim().split("\n").at(-1)!)
    expect(result).toEqual({
      object: "s3://talon/datasets/sample-1m.bin",
      size: 1048576,
      offset: 12345,
      length: 300000,
      identical: true,
      firstDifference: -1,
      workers: 2
    })
    // The data plane the installed addon gives is the native one.
    expect(r.stdout).toContain("native plane")
  }, STEP_MS)

  it("runs the talon bin from the package", async () => {
    const r = await must(path.join(app, "node_modules/.bin/talon"), ["--version"], app)
    expect(r.stdout).toContain(pkg.version)
  }, STEP_MS)

  it("type-checks a consumer through the exports map (NodeNext resolution)", async () => {
    fs.writeFileSync(
      path.join(app, "check.ts"),
      [
        `import { Effect } from "effect"`,
        `import { LocalCluster } from "talon-ts"`,
        `import { TalonClient, type TalonClientOptions } from "talon-ts/client"`,
        `import { parseHostPort } from "talon-ts/transport"`,
        `const options: Partial<TalonClientOptions> = { coordinator: "127.0.0.1:7000" }`,
        `export const program = Effect.gen(function* () {`,
        `  const cluster = yield* LocalCluster`,
        `  const client = yield* TalonClient`,
        `  const bytes: Uint8Array = yield* client.read("s3://talon/x", 0, 1)`,
        `  return { bytes, workers: cluster.workers.length, address: parseHostPort(options.coordinator ?? "") }`,
        `})`,
        ``
      ].join("\n")
    )
    const tsconfig = {
      compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, noEmit: true, skipLibCheck: true, types: [] },
      files: ["check.ts"]
    }
    fs.writeFileSync(path.join(app, "tsconfig.json"), JSON.stringify(tsconfig))
    // Under strict, a module whose types do not resolve is an error (TS7016), so passing means
    // every import above found its .d.ts through the exports map.
    await must(process.execPath, [path.join(repo, "node_modules/typescript/bin/tsc"), "-p", "."], app)
  }, STEP_MS)
})
