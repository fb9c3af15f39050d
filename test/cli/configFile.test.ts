/** The config file: parsed into TALON_* names, read by every component behind flags and the environment. */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Config, Effect } from "effect"
import { configPathFrom, flattenConfig, readConfigFile } from "../../src/cli/configFile.js"
import { ALL_COMPONENTS } from "../../src/config/registry.js"
import type { Setting } from "../../src/config/Setting.js"
import { eventually } from "../support/eventually.js"

const repo = path.resolve(__dirname, "../..")

const tempFile = (name: string, text: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "talon-config-"))
      const file = path.join(dir, name)
      fs.writeFileSync(file, text)
      return file
    }),
    (file) => Effect.sync(() => fs.rmSync(path.dirname(file), { recursive: true, force: true }))
  )

interface Run {
  readonly output: () => string
  readonly exited: Promise<number | null>
  readonly kill: (signal: NodeJS.Signals) => void
}

/** `talon …` as a user runs it; SIGKILLed at scope end if still alive. */
const talon = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.acquireRelease(
    Effect.sync((): Run => {
      const child = spawn(process.execPath, [path.join(repo, "bin/talon.mjs"), ...args], {
        cwd: repo,
        env: { ...process.env, ...env },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      child.stdout.on("data", (d: Buffer) => (output += d.toString()))
      child.stderr.on("data", (d: Buffer) => (output += d.toString()))
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
      return { output: () => output, exited, kill: (s) => child.kill(s) }
    }),
    (run) => Effect.promise(async () => (run.kill("SIGKILL"), await run.exited))
  )

const waitFor = <A>(what: string, probe: () => A | undefined, output: () => string, ms = 60_000) =>
  eventually(
    Effect.suspend(() => {
      const v = probe()
      return v !== undefined ? Effect.succeed(v) : Effect.fail(`output so far:\n${output()}`)
    }),
    { what, within: ms, every: "50 millis" }
  ).pipe(Effect.orDie)

describe("config file", () => {
  it("maps tables to TALON_<SECTION>_<NAME>, lists comma-joined, TALON_* keys verbatim", () => {
    const flat = flattenConfig({
      worker: { cache_dirs: ["/a", "/b"], "page-size": 4096, data_plane: "native" },
      gateway: { auth: false },
      TALON_S3_REGION: "eu-west-1"
    })
    expect("settings" in flat && Object.fromEntries(flat.settings)).toEqual({
      TALON_WORKER_CACHE_DIRS: "/a,/b",
      TALON_WORKER_PAGE_SIZE: "4096",
      TALON_WORKER_DATA_PLANE: "native",
      TALON_GATEWAY_AUTH: "false",
      TALON_S3_REGION: "eu-west-1"
    })
  })

  it("refuses what it cannot map, naming the key", () => {
    expect(flattenConfig({ wrker: { a: 1 } })).toEqual({ error: expect.stringContaining("unknown section [wrker]") })
    expect(flattenConfig({ worker: { nested: { a: 1 } } })).toEqual({ error: expect.stringContaining("worker.nested") })
    expect(flattenConfig({ worker: 3 })).toEqual({ error: expect.stringContaining("[worker] must be a table") })
    expect(flattenConfig([1])).toEqual({ error: expect.stringContaining("top level") })
  })

  it("finds --config before the subcommand, else TALON_CONFIG", () => {
    expect(configPathFrom(["--config", "a.toml", "worker"], {})).toBe("a.toml")
    expect(configPathFrom(["--config=b.toml", "worker"], {})).toBe("b.toml")
    expect(configPathFrom(["worker", "--config", "c.toml"], { TALON_CONFIG: "env.toml" })).toBe("env.toml")
    expect(configPathFrom(["worker"], {})).toBeUndefined()
  })

  it.scoped("answers nested Config paths the way the environment does (TOML and JSON)", () =>
    Effect.gen(function* () {
      const toml = yield* tempFile("t.toml", '[origin]\nport = 9555\n[worker]\ncache_dirs = ["/x", "/y"]\n')
      const json = yield* tempFile("t.json", JSON.stringify({ origin: { port: 9556 } }))
      const read = Effect.all([
        Config.integer("PORT").pipe(Config.nested("TALON_ORIGIN")),
        Config.array(Config.string(), "TALON_WORKER_CACHE_DIRS").pipe(Config.option)
      ])
      const fromToml = yield* Effect.withConfigProvider(read, yield* readConfigFile(toml))
      expect(fromToml[0]).toBe(9555)
      expect(fromToml[1]._tag === "Some" && fromToml[1].value).toEqual(["/x", "/y"])
      const fromJson = yield* Effect.withConfigProvider(read, yield* readConfigFile(json))
      expect(fromJson[0]).toBe(9556)
      const bad = yield* tempFile("bad.toml", "[worker\n")
      const error = yield* Effect.flip(readConfigFile(bad))
      expect(error.message).toMatch(/bad\.toml: not valid TOML/)
    })
  )

  it.effect("docs/talon.example.toml loads, and every setting in it is one a component declares or the source reads", () =>
    Effect.gen(function* () {
      const example = path.join(repo, "docs/talon.example.toml")
      yield* readConfigFile(example)
      const { parse } = yield* Effect.promise(() => import("smol-toml"))
      const flat = flattenConfig(parse(fs.readFileSync(example, "utf8")))
      const names = "settings" in flat ? [...flat.settings.keys()] : []
      expect(names.length).toBeGreaterThan(10)
      const source = fs
        .readdirSync(path.join(repo, "src"), { recursive: true, encoding: "utf8" })
        .filter((f) => f.endsWith(".ts"))
        .map((f) => fs.readFileSync(path.join(repo, "src", f), "utf8"))
        .join("\n")
      // Component settings build their names from key and prefix; the backends' TALON_S3_* / TALON_AZURE_* are spelled out.
      const declared = new Set(ALL_COMPONENTS.flatMap((c) => Object.values(c.settings as Record<string, Setting<unknown>>).map((s) => s.env)))
      expect(names.filter((n) => !declared.has(n) && !source.includes(`"${n}"`))).toEqual([])
    })
  )

  it.scoped("talon --config FILE coordinator: flag > TALON_* env > file > default", () =>
    Effect.gen(function* () {
      const file = yield* tempFile(
        "talon.toml",
        [
          "[coordinator]",
          'listen = "127.0.0.1:0"',
          'admin_listen = "127.0.0.1:0"',
          "heartbeat_interval_ms = 250",
          "missed_heartbeats = 7",
          'cluster_id = "from-file"',
          "[state]",
          "lease_ttl_ms = 9000"
        ].join("\n")
      )
      const run = yield* talon(["--config", file, "coordinator", "--heartbeat-interval-ms", "300"], {
        TALON_COORDINATOR_MISSED_HEARTBEATS: "5"
      })
      const admin = yield* waitFor("the admin address", () => /admin (http:\/\/[\d.:]+)/.exec(run.output())?.[1], run.output)
      const status = yield* Effect.promise(() => fetch(`${admin}/api/v1/cluster`).then((r) => r.json()))
      // 300 from the flag (file says 250), 5 from the environment (file says 7), cluster id and port 0 from the file.
      expect(status).toMatchObject({ clusterId: "from-file", heartbeatIntervalMs: 300, livenessWindowMs: 1500 })
      run.kill("SIGINT")
      expect(yield* Effect.promise(() => run.exited)).toBe(0)
    })
  )

  it.scoped("a bad file stops the command with one line naming the file and the fix", () =>
    Effect.gen(function* () {
      const file = yield* tempFile("typo.toml", "[wrker]\ncache_dirs = []\n")
      const run = yield* talon(["--config", file, "coordinator"])
      expect(yield* Effect.promise(() => run.exited)).toBe(1)
      expect(run.output()).toContain(`talon: config file ${file}: unknown section [wrker]; sections are [coordinator]`)
    })
  )
})
