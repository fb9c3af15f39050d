/**
 * `talon worker` as a real process: --help documents every option, flags and
 * TALON_WORKER_* configure it, SIGTERM stops it, and a SIGKILLed worker
 * restarted on the same cache dir serves warm reads after one HEAD (its on-disk
 * version is revalidated) and no GET.
 * Process start-up (tsx transpiling the import graph) is slow on a loaded
 * machine, hence the long bounds; nothing here asserts on speed.
 */
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Backend } from "../../src/core/ids.js"
import { workerOptions } from "../../src/worker/cli.js"
import { pattern } from "./support/dirBackend.js"
import { makeCleanup, tempDir } from "./support/harness.js"
import { putObjectAt, startOriginStub } from "./support/originFiles.js"
import { expectRange, within } from "./support/rawClient.js"
import { spawnWorker, stubCredentials } from "./support/workerProcess.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const run = (args: ReadonlyArray<string>, env: Record<string, string> = {}) => spawnWorker(cleanup, args, env)

describe("talon worker (process)", () => {
  it("--help explains every option", async () => {
    const p = run(["--help"])
    expect(await p.exited).toBe(0)
    const help = p.output()
    for (const flag of [
      "--id", "--data-addr", "--admin-addr", "--coordinator", "--advertise-addr", "--cache-dir", "--capacity",
      "--block-size", "--page-size", "--version-ttl-ms", "--origin-concurrency", "--heartbeat-interval-ms",
      "--data-plane", "--serve-mode", "--read-timeout-ms", "--max-open-files", "--max-inflight", "--no-hit-table"
    ]) {
      expect(help).toContain(flag)
    }
    expect(help).toContain("TALON_WORKER_CAPACITY")
    // Every option documents its environment variable.
    expect((help.match(/\(env TALON_WORKER_[A-Z_]+,/g) ?? []).length).toBeGreaterThanOrEqual(Object.keys(workerOptions).length)
  }, 180_000)

  it("serves from flags + env, exits on SIGTERM, and after SIGKILL restarts warm on the same dir", async () => {
    const stub = await startOriginStub(cleanup, "talon-stub-")
    const data = pattern(300 * 1024, 77)
    await putObjectAt(stub.root, "cli-bucket", "obj.bin", data)
    const cache = await tempDir(cleanup, "talon-cache-")
    const env = {
      TALON_S3_ENDPOINT: stub.url,
      ...stubCredentials,
      TALON_WORKER_PAGE_SIZE: "32K",
      TALON_WORKER_VERSION_TTL_MS: "600000"
    }
    const args = [
      "--coordinator", "",
      "--data-addr", "127.0.0.1:0",
      "--admin-addr", "127.0.0.1:0",
      "--cache-dir", cache,
      "--block-size", "128K",
      "--capacity", "16M",
      "--data-plane", "portable"
    ]
    const object = { backend: Backend.S3, bucket: "cli-bucket", objectPath: "obj.bin" }
    const read = (port: number) => expectRange(port, object, data, 1000, 200_000)

    const first = run(args, env)
    const port1 = Number((await first.waitFor(/worker data listener on 127\.0\.0\.1:(\d+) \(portable plane, pipelined mode\)/))[1])
    await read(port1)
    // Only the touched pages came from the origin: [1000, 201000) spans pages 0..6 of 32 KiB.
    expect((await Effect.runPromise(stub.stats())).bytesServed).toBe(7 * 32 * 1024)
    first.child.kill("SIGKILL")
    await first.exited

    await Effect.runPromise(stub.resetStats())
    const second = run(args, env)
    const port2 = Number((await second.waitFor(/worker data listener on 127\.0\.0\.1:(\d+)/))[1])
    await read(port2)
    const after = await Effect.runPromise(stub.stats())
    expect(after.requests.head).toBe(1)
    expect(after.total).toBe(1)
    second.child.kill("SIGTERM")
    expect(await within(second.exited, 30_000)).toBe(true)
  }, 480_000)
})
