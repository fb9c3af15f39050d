/**
 * Closing the client's scope stops everything the client started: its background
 * refresh fiber, shared fetches, timers and sockets. Checked the way a user would
 * notice a leak: a separate Node process (real coordinator and worker sockets in
 * this one) reads through a client, lets the background refresh run, closes the
 * scope, and must then exit on its own.
 */
import { spawn } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import type { MemoryObject } from "../coordinator/fixtures/memoryBackend.js"
import { testCoordinator } from "../coordinator/fixtures/harness.js"
import { bundledScript } from "../support/bundledScript.js"
import { registeredFakeWorker } from "./fixtures/registeredWorker.js"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const BLOCK = 64 * 1024
const data = randomBytes(4 * BLOCK + 99)
const store = new Map<string, MemoryObject>([["/s3/bucket/exit.bin", { bytes: data, version: "v1" }]])

/** Runs the fixture (bundled: test/support/bundledScript.ts) to its own exit (killed, and the test failed, if it is still running after `limitMs`). */
const runChild = (args: ReadonlyArray<string>, limitMs: number) =>
  Effect.flatMap(Effect.promise(() => bundledScript(path.join(repo, "test/client/fixtures/closeAndExit.ts"))), (script) => runScript(script, args, limitMs))

const runScript = (script: string, args: ReadonlyArray<string>, limitMs: number) =>
  Effect.async<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string; killed: boolean }>((resume) => {
    const child = spawn(process.execPath, [script, ...args], {
      cwd: repo,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    let killed = false
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()))
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    const timer = setTimeout(() => {
      killed = true
      child.kill("SIGKILL")
    }, limitMs)
    child.once("exit", (code, signal) => {
      clearTimeout(timer)
      resume(Effect.succeed({ code, signal, stdout, stderr, killed }))
    })
    return Effect.sync(() => {
      clearTimeout(timer)
      child.kill("SIGKILL")
    })
  })

describe("closing the client's scope", () => {
  it.live(
    "leaves nothing running: the process that used the client exits on its own",
    () =>
      testCoordinator(
        { heartbeatIntervalMs: 60_000 },
        (c) =>
          Effect.gen(function* () {
            const worker = yield* registeredFakeWorker(store, c.controlAddress, "worker-0")
            // Two coordinator entries, so the client holds a control connection and the failover state too.
            const run = yield* runChild([`${c.controlAddress},${c.controlAddress}`, "s3://bucket/exit.bin", String(BLOCK)], 120_000)
            expect(run.killed, `still running after 120 s:\n${run.stdout}\n${run.stderr}`).toBe(false)
            expect(run.code, run.stderr).toBe(0)
            const result = JSON.parse(run.stdout.trim().split("\n").pop()!) as {
              sha256: string
              length: number
              refreshed: boolean
              resources: ReadonlyArray<string>
            }
            expect(result.length).toBe(data.length)
            expect(result.sha256).toBe(createHash("sha256").update(data).digest("hex"))
            expect(result.refreshed).toBe(true)
            // Right after the scope closed: no timer and no socket of the client is left (stdio pipes are the process's own).
            expect(result.resources.filter((r) => r === "Timeout" || r.startsWith("TCP"))).toEqual([])
            expect(worker.served.length).toBeGreaterThan(0)
          }),
        store
      ),
    180_000
  )

  it.live("a client used after its scope closed fails at once with a typed error, it never hangs", () =>
    testCoordinator(
      { heartbeatIntervalMs: 60_000 },
      (c) =>
        Effect.gen(function* () {
          yield* registeredFakeWorker(store, c.controlAddress, "worker-0")
          const scope = yield* Scope.make()
          const client = yield* makeTalonClient({ coordinator: c.controlAddress, blockSize: BLOCK }).pipe(Scope.extend(scope))
          expect(Buffer.from(yield* client.read("s3://bucket/exit.bin", 0, data.length)).equals(data)).toBe(true)
          yield* Scope.close(scope, Exit.void)
          const unknown = yield* Effect.flip(client.stat("s3://bucket/never-stat-ed.bin"))
          expect(unknown._tag).toBe("CoordinatorUnavailable")
          expect(unknown.message).toContain("the client was closed")
          // The object's stat is cached: the read gets as far as the (closed) worker pool and fails typed.
          const read = yield* Effect.flip(client.read("s3://bucket/exit.bin", 0, 10))
          expect(["ReadFailed", "CoordinatorUnavailable"]).toContain(read._tag)
        }),
      store
    )
  )
})
