/**
 * `talon read` as a user runs it (bin/talon.mjs, a real process) from its script bundle and V8's
 * code cache (src/core/scriptBundle.mjs): the right 64 bytes with the cache cold, warm, and
 * corrupted in each way a file can be (garbage, a flipped payload byte, a payload V8 rejects),
 * and nothing written with the cache off; `talon --help` from its own script. Needs the build in dist/ to be fresh (`node
 * scripts/build.mjs`; CI builds it at install): otherwise bin/talon.mjs runs src/ through tsx.
 */
import { execFile } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { MemoryObject } from "../coordinator/fixtures/memoryBackend.js"
import { testCoordinator } from "../coordinator/fixtures/harness.js"
import { registeredFakeWorker } from "../client/fixtures/registeredWorker.js"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const BLOCK = 64 * 1024
const data = randomBytes(BLOCK + 99)
const store = new Map<string, MemoryObject>([["/s3/bucket/obj.bin", { bytes: data, version: "v1" }]])
const MAGIC = "talon-v8-code-cache-1\n"

/** Whether bin/talon.mjs runs the build (src/core/freshBundle.mjs, plain JavaScript without types). */
const buildIsFresh = async (): Promise<boolean> =>
  // @ts-expect-error: an untyped JavaScript module
  ((await import("../../src/core/freshBundle.mjs")) as { buildIsFresh: () => boolean }).buildIsFresh()
const fresh = await buildIsFresh()

/** This process's environment with `env`, and nothing that steers bin/talon.mjs off the bundle. */
const bundleEnv = (env: Record<string, string>) => {
  const all: Record<string, string | undefined> = { ...process.env, ...env }
  delete all["TALON_NO_BUNDLE"]
  delete all["TALON_FROM_SOURCE"]
  return all
}

/** `talon <args>` in a process of its own; its stdout. */
const talon = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.async<Buffer, Error>((resume) => {
    execFile(process.execPath, ["bin/talon.mjs", ...args], { cwd: repo, env: bundleEnv(env), encoding: "buffer" }, (err, stdout, stderr) =>
      resume(err ? Effect.fail(new Error(`talon ${args.join(" ")} failed: ${err.message}\n${stderr}`)) : Effect.succeed(stdout))
    )
  })

/** `talon read` of bytes [100, 164). */
const read = (coordinator: string, env: Record<string, string>) =>
  talon(["read", "s3://bucket/obj.bin", "--offset", "100", "--length", "64", "--coordinator", coordinator, "--block-size", String(BLOCK)], env)

const cacheFiles = (dir: string) => (fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith(".v8cache")) : [])

/** The one cache file in `dir`, checked: our header, and a SHA-1 that matches its payload. */
const validCache = (dir: string): Buffer => {
  const files = cacheFiles(dir)
  expect(files).toHaveLength(1)
  const bytes = fs.readFileSync(path.join(dir, files[0]!))
  expect(bytes.subarray(0, MAGIC.length).toString()).toBe(MAGIC)
  const payload = bytes.subarray(MAGIC.length + 20)
  expect(createHash("sha1").update(payload).digest().equals(bytes.subarray(MAGIC.length, MAGIC.length + 20))).toBe(true)
  return bytes
}

describe.skipIf(!fresh)("talon read from the script bundle and its code cache", () => {
  it.live("prints the right bytes with the cache cold, warm, corrupted, and off", () =>
    testCoordinator(
      { heartbeatIntervalMs: 60_000 },
      (c) =>
        Effect.gen(function* () {
          yield* registeredFakeWorker(store, c.controlAddress, "w")
          const dir = yield* Effect.acquireRelease(
            Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "talon-code-cache-"))),
            (d) => Effect.sync(() => fs.rmSync(d, { recursive: true, force: true }))
          )
          const cacheDir = path.join(dir, "cache")
          const env = { TALON_CODE_CACHE_DIR: cacheDir }
          const want = data.subarray(100, 164)

          // Cold: no cache yet; the run writes one.
          expect((yield* read(c.controlAddress, env)).equals(want)).toBe(true)
          const made = validCache(cacheDir)
          const file = path.join(cacheDir, cacheFiles(cacheDir)[0]!)

          // Warm: V8 takes the cache, so nothing is rewritten.
          const before = fs.statSync(file).mtimeMs
          expect((yield* read(c.controlAddress, env)).equals(want)).toBe(true)
          expect(fs.statSync(file).mtimeMs).toBe(before)
          expect(fs.readFileSync(file).equals(made)).toBe(true)

          // Corrupt, three ways; each run prints the right bytes and leaves a valid cache behind.
          const corruptions: ReadonlyArray<readonly [string, (good: Buffer) => Buffer]> = [
            ["garbage", () => randomBytes(4096)],
            ["a flipped payload byte", (good) => {
              const bad = Buffer.from(good)
              bad[bad.length >> 1]! ^= 0xff
              return bad
            }],
            ["a payload V8 rejects, with a matching checksum", (good) => {
              const payload = randomBytes(good.length - MAGIC.length - 20)
              return Buffer.concat([Buffer.from(MAGIC), createHash("sha1").update(payload).digest(), payload])
            }]
          ]
          for (const [what, corrupt] of corruptions) {
            const bad = corrupt(made)
            fs.writeFileSync(file, bad)
            const out = yield* read(c.controlAddress, env)
            expect(out.equals(want), `after ${what}`).toBe(true)
            expect(validCache(cacheDir).equals(bad), `after ${what}`).toBe(false)
          }

          // `talon --help` from its own script (every subcommand): the full help, and its cache made.
          const helpDir = path.join(dir, "help")
          const help = (yield* talon(["--help"], { TALON_CODE_CACHE_DIR: helpDir })).toString()
          for (const sub of ["read", "worker", "gateway", "up"]) expect(help).toContain(`- ${sub} `)
          validCache(helpDir)

          // Off: the right bytes and no cache.
          const offDir = path.join(dir, "off")
          expect((yield* read(c.controlAddress, { TALON_CODE_CACHE: "0", TALON_CODE_CACHE_DIR: offDir })).equals(want)).toBe(true)
          expect(cacheFiles(offDir)).toHaveLength(0)
        }),
      store
    )
  )
})
