import { describe, expect, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"

/*
 * Drives the real bench/micro.ts (save and check) as a process against a temp bench dir
 * (TALON_BENCH_DIR). `run` spawns vitest bench over the real suite, which takes minutes, so
 * it is exercised by `npm run bench`; its conversion is unit-tested in test/bench/compare.test.ts.
 */
const root = resolve(import.meta.dirname, "..", "..")
const tsx = join(root, "node_modules", "tsx", "dist", "cli.mjs")

const bench = (dir: string, ...args: Array<string>): Promise<{ code: number; stdout: string; stderr: string }> =>
  new Promise((done) => {
    execFile(
      process.execPath,
      [tsx, join(root, "bench", "micro.ts"), ...args],
      { cwd: root, env: { ...process.env, TALON_BENCH_DIR: dir } },
      (error, stdout, stderr) => done({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr })
    )
  })

const withDir = async (f: (dir: string) => Promise<void>) => {
  const dir = mkdtempSync(join(tmpdir(), "talon-bench-test-"))
  try {
    await f(dir)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const writeJson = (path: string, value: unknown) => {
  mkdirSync(resolve(path, ".."), { recursive: true })
  writeFileSync(path, JSON.stringify(value))
}

describe("bench/micro.ts", () => {
  it("save copies latest.json to baselines/NAME.json", () =>
    withDir(async (dir) => {
      writeJson(join(dir, "results", "latest.json"), { "core::a": 10, "placement::locate/8": 800 })
      const r = await bench(dir, "save", "main")
      expect(r.code).toBe(0)
      expect(JSON.parse(readFileSync(join(dir, "baselines", "main.json"), "utf8"))).toEqual({ "core::a": 10, "placement::locate/8": 800 })
    })
  )

  it("check prints the table and exits 1 on a regression, 0 with --soft or a wider threshold", () =>
    withDir(async (dir) => {
      writeJson(join(dir, "baselines", "main.json"), { "core::a": 100, "core::gone": 1, "placement::locate/256": 1000 })
      writeJson(join(dir, "results", "latest.json"), { "core::a": 150, "core::new": 3, "placement::locate/256": 1010 })
      // Independent invocations run concurrently: each is a separate tsx process.
      const [strict, soft, wide, scoped] = await Promise.all([
        bench(dir, "check"),
        bench(dir, "check", "--soft"),
        bench(dir, "check", "--threshold", "60"),
        bench(dir, "check", "-p", "placement")
      ])
      expect(strict.code).toBe(1)
      expect(strict.stdout).toContain("| benchmark | baseline | current | Δ | verdict |")
      expect(strict.stdout).toContain("| core::a | 100 ns | 150 ns | +50.0% | **REGRESSION** |")
      expect(strict.stdout).toContain("| core::new | — | 3 ns | — | new (no baseline) |")
      expect(strict.stdout).toContain("| core::gone | 1 ns | — | — | missing (not run) |")
      expect(soft.code).toBe(0)
      expect(soft.stdout).toContain("--soft: regressions reported, not failing")
      expect(wide.code).toBe(0)
      expect(scoped.code).toBe(0)
      expect(scoped.stdout).toContain("placement::locate/256")
      expect(scoped.stdout).not.toContain("core::a")
    })
  )

  it("check names what is missing instead of crashing", () =>
    withDir(async (dir) => {
      const [noBaseline, noBaselineSoft, usage] = await Promise.all([
        bench(dir, "check"),
        bench(dir, "check", "--soft"),
        bench(dir, "frobnicate")
      ])
      expect(noBaseline.code).toBe(1)
      expect(noBaseline.stderr).toContain("bench-save -- main")
      expect(noBaselineSoft.code).toBe(0)
      expect(usage.code).toBe(2)
      expect(usage.stderr).toContain("usage: bench.ts")
      writeJson(join(dir, "baselines", "main.json"), { "core::a": 1 })
      const noLatest = await bench(dir, "check")
      expect(noLatest.code).toBe(1)
      expect(noLatest.stderr).toContain("npm run bench")
      writeJson(join(dir, "results", "latest.json"), { "core::a": 1 })
      const badArea = await bench(dir, "check", "-p", "nosuch")
      expect(badArea.code).toBe(1)
      expect(badArea.stderr).toContain('no benchmarks in area "nosuch"')
    })
  )
})
