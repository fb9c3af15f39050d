/**
 * The user-facing commands as real child processes (`node bin/talon.mjs ...`)
 * against an in-process cluster: `talon read` prints exactly the requested bytes
 * to stdout, `talon cluster --admin` prints the status table.
 */
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import * as Router from "../../src/backend/Router.js"
import { Worker } from "../../src/worker/Worker.js"
import { loopbackCoordinator } from "../support/loopbackCoordinator.js"
import { stubWithObjects } from "../support/stubWithObjects.js"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const BLOCK = 128 * 1024

/** Runs `talon <args>` to completion; stdout as bytes. Killed if the test's scope ends first. */
const talon = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.async<{ code: number | null; stdout: Buffer; stderr: string }>((resume) => {
    const child = spawn(process.execPath, [path.join(repo, "bin/talon.mjs"), ...args], {
      cwd: repo,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    const out: Array<Buffer> = []
    let stderr = ""
    child.stdout.on("data", (d: Buffer) => out.push(d))
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    child.once("close", (code) => resume(Effect.succeed({ code, stdout: Buffer.concat(out), stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("talon read / talon cluster as processes", () => {
  it.live(
    "`talon read URI --offset --length` prints the bytes; `talon cluster --admin` prints the members",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const dir = yield* Effect.acquireRelease(
            Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "talon-cli-"))),
            (d) => Effect.sync(() => fs.rmSync(d, { recursive: true, force: true }))
          )
          const data = randomBytes(3 * BLOCK + 50)
          const origin = yield* stubWithObjects(dir, { "bucket/obj.bin": data })
          const backend = Router.layerLocal(origin.url)
          const coordinator = yield* loopbackCoordinator(backend)
          yield* Layer.build(
            Worker.layerSettings({
              id: "solo",
              dataAddress: "127.0.0.1:0",
              adminAddress: "127.0.0.1:0",
              coordinator: coordinator.controlAddress,
              cacheDirs: [path.join(dir, "cache")],
              blockSize: BLOCK,
              pageSize: 0,
              dataPlane: "portable"
            }).pipe(Layer.provide(backend))
          )
          yield* coordinator.members.pipe(
            Effect.delay("20 millis"),
            Effect.repeat({ until: (m) => m.length === 1 }),
            Effect.timeout(Duration.seconds(20))
          )
          const offset = BLOCK - 10
          const length = BLOCK + 20
          const [readRun, clusterRun] = yield* Effect.all(
            [
              talon(
                ["read", "s3://bucket/obj.bin", "--offset", String(offset), "--length", String(length)],
                { TALON_CLIENT_COORDINATOR: coordinator.controlAddress, TALON_CLIENT_BLOCK_SIZE: String(BLOCK) }
              ),
              talon(["cluster", "--admin", coordinator.adminAddress])
            ],
            { concurrency: 2 }
          )
          expect(readRun.code, readRun.stderr).toBe(0)
          expect(readRun.stdout.equals(data.subarray(offset, offset + length))).toBe(true)
          expect(clusterRun.code, clusterRun.stderr).toBe(0)
          const table = clusterRun.stdout.toString("utf8")
          expect(table).toMatch(/epoch \d+ · 1 member\(s\)/)
          expect(table).toMatch(/^solo\s+127\.0\.0\.1:\d+\s+worker\s+[\d.]+s ago\s+\d+$/m)
        })
      ),
    180_000
  )
})
