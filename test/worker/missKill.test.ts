/**
 * A worker SIGKILLed in the middle of a cold read, with many origin GETs in flight and pages half
 * written: the read in flight fails (the connection drops), the worker restarted on the same
 * cache dir serves the whole range with exactly the origin's bytes (pages committed before the
 * kill are checksummed, half-written ones were never renamed into place), and a second read of
 * it is served from the cache. A real process; start-up is slow on a loaded machine, hence the
 * long bounds (nothing here times anything).
 */
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Backend } from "../../src/core/ids.js"
import { pattern } from "./support/dirBackend.js"
import { makeCleanup, tempDir } from "./support/harness.js"
import { putObjectAt, startOriginStub } from "./support/originFiles.js"
import { expectRange, readRange } from "./support/rawClient.js"
import { eventuallyAsync } from "../support/eventually.js"
import { spawnWorker, stubCredentials } from "./support/workerProcess.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const KiB = 1024
const MiB = 1024 * KiB

describe("worker killed during a cold read", () => {
  it("costs the read in flight, never a wrong byte after the restart", async () => {
    const stub = await startOriginStub(cleanup, "talon-kill-origin-")
    const data = pattern(4 * MiB, 71)
    await putObjectAt(stub.root, "kill", "cold.bin", data)
    const cache = await tempDir(cleanup, "talon-kill-cache-")
    const env = { TALON_S3_ENDPOINT: stub.url, ...stubCredentials, TALON_WORKER_VERSION_TTL_MS: "600000" }
    const args = [
      "--coordinator", "",
      "--data-addr", "127.0.0.1:0",
      "--admin-addr", "127.0.0.1:0",
      "--cache-dir", cache,
      "--block-size", "4M",
      "--page-size", "64K",
      "--origin-fetch-size", "256K",
      "--capacity", "64M",
      "--data-plane", "portable"
    ]
    const object = { backend: Backend.S3, bucket: "kill", objectPath: "cold.bin" }
    const listening = /worker data listener on 127\.0\.0\.1:(\d+)/

    const first = spawnWorker(cleanup, args, env)
    const port1 = Number((await first.waitFor(listening))[1])
    // Slow GETs: the kill lands while pieces are streaming into temp files.
    await Effect.runPromise(stub.setFaults({ latency: { kind: "fixed", ms: 50 }, bandwidthBytesPerSec: 2 * MiB, kinds: ["get"] }))
    const inFlight = readRange(port1, object, 0, data.length)
    await eventuallyAsync(
      async () => {
        const s = await Effect.runPromise(stub.stats())
        expect(s.inflight.get >= 2 && s.bytesServed >= 512 * KiB).toBe(true)
      },
      { what: "two GETs streaming and 512 KiB served", within: "30 seconds" }
    )
    await first.kill()
    const cut = await inFlight
    expect(cut.ok).toBe(false)

    await Effect.runPromise(stub.setFaults({ latency: { kind: "none" }, bandwidthBytesPerSec: 0 }))
    const second = spawnWorker(cleanup, args, env)
    const port2 = Number((await second.waitFor(listening))[1])
    await expectRange(port2, object, data, 0, data.length)
    const gets = (await Effect.runPromise(stub.stats())).requests.get
    await expectRange(port2, object, data, 0, data.length)
    await expectRange(port2, object, data, 123_457, 3 * MiB)
    expect((await Effect.runPromise(stub.stats())).requests.get).toBe(gets)
  }, 300_000)
})
