/**
 * The real `talon` binary: each subcommand's --help is generated from its schema (every
 * flag and variable named), and a bad value from a flag, the environment or a config
 * file stops it with one line naming the setting, what was wrong and an example.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { ClientSchema } from "../../src/client/config.js"
import { UpSchema } from "../../src/cluster/config.js"
import { GENERIC_OPTION_HELP } from "../../src/cli/help.js"
import { describe as describeSetting } from "../../src/config/cli.js"
import type { Component, Setting } from "../../src/config/Setting.js"
import { CoordinatorSchema } from "../../src/coordinator/config.js"
import { GatewayCommandSchema, GatewaySchema } from "../../src/gateway/config.js"
import { LoadgenSchema } from "../../src/loadgen/config.js"
import { OriginSchema } from "../../src/origin/config.js"
import { WorkerSchema } from "../../src/worker/config.js"

const repo = path.resolve(__dirname, "../..")
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "talon-config-cli-"))
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }))

interface Result {
  readonly code: number
  readonly out: string
}

/** Runs `talon args…` to completion (the commands here exit by themselves: help or a refusal). */
const talon = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  new Promise<Result>((resolve) => {
    execFile(
      path.join(repo, "bin/talon.mjs"),
      args,
      { cwd: repo, env: { ...process.env, NO_COLOR: "1", ...env }, timeout: 120_000 },
      (error, stdout, stderr) => {
        // eslint-disable-next-line no-control-regex
        const out = `${stdout}${stderr}`.replace(/\x1b\[[0-9;]*m/g, "")
        resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, out })
      }
    )
  })

const settingsOf = (c: Component<any>): ReadonlyArray<Setting<any>> => Object.values(c.settings as Record<string, Setting<any>>)

const helpCases: ReadonlyArray<readonly [string, ReadonlyArray<Setting<any>>]> = [
  ["worker", settingsOf(WorkerSchema)],
  ["coordinator", settingsOf(CoordinatorSchema)],
  ["gateway", [...settingsOf(GatewaySchema), ...settingsOf(GatewayCommandSchema), ClientSchema.settings.blockSize]],
  ["origin", settingsOf(OriginSchema)],
  ["up", settingsOf(UpSchema)],
  ["loadgen", settingsOf(LoadgenSchema)],
  ["read", settingsOf(ClientSchema)]
]

describe("talon <command> --help", () => {
  it.each(helpCases)("%s names every flag with its variable and default", async (command, settings) => {
    const { code, out } = await talon([command, "--help"])
    expect(code).toBe(0)
    // Secrets have no flag (TALON_CLUSTER_TOKEN): they come from the environment or the file only.
    for (const s of settings.filter((s) => s.flag !== undefined)) {
      expect(out).toContain(`--${s.flag}`)
      expect(out).toContain(`(env ${s.env}, default `)
      // Each option's own description, once, with no generic type sentence above it.
      expect(out.split(describeSetting(s)).length - 1).toBe(1)
    }
    for (const generic of GENERIC_OPTION_HELP) expect(out).not.toContain(`  ${generic}\n`)
  }, 180_000)
})

describe("a bad value stops the command with one line naming it", () => {
  it("from the environment", async () => {
    const { code, out } = await talon(["worker", "--coordinator", ""], { TALON_WORKER_SCRUB_RATE: "fast" })
    expect(code).not.toBe(0)
    expect(out).toMatch(/talon: TALON_WORKER_SCRUB_RATE \(--scrub-rate\): bad size "fast": want a byte count.*; e\.g\. TALON_WORKER_SCRUB_RATE=16M or --scrub-rate 16M/)
  }, 180_000)

  it("from a flag", async () => {
    const { code, out } = await talon(["worker", "--loops", "99"])
    expect(code).not.toBe(0)
    expect(out).toContain("--loops: must be an integer in 1..64; e.g. --loops 2")
    const list = await talon(["worker", "--coordinator", "10.0.0.1:7000,10.0.0.2"])
    expect(list.code).not.toBe(0)
    expect(list.out).toMatch(/--coordinator: expected one or more comma-separated host:port coordinator addresses.*got "10\.0\.0\.1:7000,10\.0\.0\.2"/)
  }, 180_000)

  it("from a config file, and a flag overrides the file's bad value", async () => {
    const file = path.join(scratch, "bad.toml")
    fs.writeFileSync(file, '[coordinator]\nmissed_heartbeats = "many"\nlisten = "127.0.0.1:99999"\n')
    const bad = await talon(["--config", file, "coordinator", "--missed-heartbeats", "3"])
    expect(bad.code).not.toBe(0)
    // --missed-heartbeats wins over the file, so only the listener is refused.
    const line = bad.out.split("\n").find((l) => l.startsWith("talon: TALON_COORDINATOR_LISTEN (--listen): ")) ?? bad.out
    expect(line).toMatch(/^talon: TALON_COORDINATOR_LISTEN \(--listen\): /)
    expect(line).toContain('"127.0.0.1:99999"')
    expect(line).toContain("65535")
    expect(line).toMatch(/; e\.g\. TALON_COORDINATOR_LISTEN=\S+ or --listen \S+/)
    expect(bad.out).not.toContain("MISSED_HEARTBEATS")
  }, 180_000)

  it("cross-setting rules name the setting to fix", async () => {
    const { code, out } = await talon(["worker", "--coordinator", "", "--block-size", "1M", "--page-size", "2M"])
    expect(code).not.toBe(0)
    expect(out).toContain("TALON_WORKER_PAGE_SIZE (--page-size): must be 0 (whole blocks) or at most the block size 1048576, got 2097152")
  }, 180_000)
})
