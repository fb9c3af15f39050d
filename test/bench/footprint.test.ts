/**
 * A worker's memory comes back after abuse: fuzzed frames, a Ping flood and a connection storm
 * (bench/footprint/abuse.ts) leave its RSS within 25 % of the level after warm-up (each level
 * taken right after a full GC, so garbage V8 has not collected yet does not count: what is
 * measured is what the worker keeps). bench/footprint.ts measures the same at full scale.
 * The worker is `talon worker` as users start it (the bundle when the build is fresh).
 */
import { spawn } from "node:child_process"
import * as path from "node:path"
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { connectionStorm, fuzzFrames, pingFlood } from "../../bench/footprint/abuse.js"
import { memoryOf } from "../../bench/footprint/memory.js"
import { warmObject } from "../../bench/lib/warm.js"
import { BUCKET, originHolding } from "../faults/support/faultWorker.js"
import { makeCleanup, tempDir } from "../worker/support/harness.js"
import { repoRoot, stubCredentials } from "../worker/support/workerProcess.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const SIZE = 4 * 1024 * 1024

describe("footprint", () => {
  it("a worker's RSS returns to within 25 % of its post-warm-up level after rounds of abuse", async () => {
    const origin = await originHolding(cleanup, "hot.bin", SIZE)
    const cache = await tempDir(cleanup, "talon-footprint-cache-")
    const probeDir = await tempDir(cleanup, "talon-footprint-probe-")
    const child = spawn(
      process.execPath,
      ["--expose-gc", "--import", path.join(repoRoot, "bench/footprint/probe.mjs"), path.join(repoRoot, "bin/talon.mjs"), "worker",
        "--coordinator", "", "--data-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--cache-dir", cache, "--version-ttl-ms", "600000"],
      { cwd: repoRoot, env: { ...process.env, TALON_S3_ENDPOINT: origin.stub.url, ...stubCredentials, TALON_FOOTPRINT_DIR: probeDir }, stdio: ["ignore", "pipe", "pipe"] }
    )
    let out = ""
    child.stdout!.on("data", (d) => (out += d))
    child.stderr!.on("data", (d) => (out += d))
    const exited = new Promise<void>((r) => child.once("exit", () => r()))
    cleanup.add(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
      await exited
    })
    const port = await new Promise<number>((resolve, reject) => {
      const look = () => {
        const m = /worker data listener on 127\.0\.0\.1:(\d+)/.exec(out)
        if (m !== null) return resolve(Number(m[1]))
        if (child.exitCode !== null) return reject(new Error(`the worker exited: ${out}`))
        setTimeout(look, 50)
      }
      look()
    })
    const abuse = async (seed: number) => {
      await fuzzFrames("127.0.0.1", port, 10_000, seed)
      await pingFlood("127.0.0.1", port, 10_000)
      await connectionStorm("127.0.0.1", port, 300)
    }
    const rss = async () => (await Effect.runPromise(memoryOf(child.pid!, probeDir))).rss_mib

    await Effect.runPromise(warmObject("127.0.0.1", port, BUCKET, "hot.bin", SIZE))
    await abuse(1)
    const warm = await rss()
    for (let round = 2; round <= 3; round++) await abuse(round)
    // Served bytes are still right after the abuse.
    await Effect.runPromise(warmObject("127.0.0.1", port, BUCKET, "hot.bin", SIZE))
    const after = await rss()
    expect(after, `RSS ${after} MiB after abuse vs ${warm} MiB after warm-up`).toBeLessThanOrEqual(warm * 1.25)
  }, 150_000)
})
