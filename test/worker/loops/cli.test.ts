/**
 * `talon worker --loops 2` as real processes: the primary logs one data
 * listener line with its loops' pids, serves reads filled from the origin
 * stub, and leaves no loop behind when it is stopped (SIGTERM) or killed
 * (SIGKILL: the loops see their IPC channel close and exit).
 * Start-up transpiles and loads the worker in three processes: slow on a
 * loaded machine, hence the long bounds; nothing here asserts on speed.
 */
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Backend } from "../../../src/core/ids.js"
import { pattern } from "../support/dirBackend.js"
import { makeCleanup, tempDir } from "../support/harness.js"
import { putObjectAt, startOriginStub } from "../support/originFiles.js"
import { expectRange, within } from "../support/rawClient.js"
import { spawnWorker, stubCredentials } from "../support/workerProcess.js"
import { eventuallyAsync } from "../../support/eventually.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** A worker whose loop pids, once known, are killed by the cleanup too (after the primary). */
const start = (args: ReadonlyArray<string>, env: Record<string, string>) => {
  const pids: Array<number> = []
  cleanup.add(async () => {
    for (const pid of pids) if (alive(pid)) process.kill(pid, "SIGKILL")
  })
  return { ...spawnWorker(cleanup, args, env, 240_000), pids }
}

// The loops are the worker's children, not this process's: no exit event reaches the test, so it polls.
const allGone = (pids: ReadonlyArray<number>, ms = 30_000) =>
  eventuallyAsync(() => expect(pids.filter(alive)).toEqual([]), { what: "every loop process gone", within: ms, every: "50 millis" }).then(
    () => true,
    () => false
  )

describe("talon worker --loops 2 (processes)", () => {
  it("serves through its loops, and leaves none behind on SIGTERM or SIGKILL", async () => {
    const stub = await startOriginStub(cleanup, "talon-stub-")
    const data = pattern(300 * 1024, 11)
    await putObjectAt(stub.root, "loops-bucket", "obj.bin", data)
    const env = {
      TALON_S3_ENDPOINT: stub.url,
      ...stubCredentials,
      TALON_WORKER_LOOPS: "2"
    }
    const args = (cache: string) => [
      "--coordinator", "", "--data-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
      "--cache-dir", cache, "--block-size", "128K", "--page-size", "32K", "--data-plane", "portable"
    ]
    const listening = /worker data listener on 127\.0\.0\.1:(\d+) \(portable plane, pipelined mode, 2 loops, ([a-z-]+); pids (\d+), (\d+)\)/
    const object = { backend: Backend.S3, bucket: "loops-bucket", objectPath: "obj.bin" }
    const read = async (port: number) => {
      for (let i = 0; i < 2; i++) await expectRange(port, object, data, 1000, 200_000)
    }

    // TALON_WORKER_LOOPS=2 from the environment; SIGTERM stops the primary and both loops.
    const first = start(args(await tempDir(cleanup, "talon-cache-")), env)
    const m1 = await first.waitFor(listening)
    expect(m1[2]).toBe("balanced")
    first.pids.push(first.child.pid!, Number(m1[3]), Number(m1[4]))
    await read(Number(m1[1]))
    first.child.kill("SIGTERM")
    expect(await within(first.exited, 60_000)).toBe(true)
    expect(await allGone(first.pids)).toBe(true)

    // --loops on the command line wins over the environment; SIGKILL of the primary takes the loops with it.
    const second = start([...args(await tempDir(cleanup, "talon-cache-")), "--loops", "2"], { ...env, TALON_WORKER_LOOPS: "1" })
    const m2 = await second.waitFor(listening)
    second.pids.push(second.child.pid!, Number(m2[3]), Number(m2[4]))
    await read(Number(m2[1]))
    second.child.kill("SIGKILL")
    await second.exited
    expect(await allGone(second.pids)).toBe(true)
    // Each worker filled [1000, 201000) once for both its loops: one GET per block's page run (blocks 0 and 1), one HEAD.
    const stats = await Effect.runPromise(stub.stats())
    expect(stats.requests.get).toBe(4)
    expect(stats.requests.head).toBe(2)
  }, 600_000)
})
