/**
 * The worker's Load queue over a scripted miss path: at most `limit` Loads fill at once, the
 * rest wait their turn (none is dropped), and a fill that failed on a stale version is retried
 * once at the origin's current version.
 */
import { describe, expect, it } from "vitest"
import type { ObjectStat } from "../../../src/backend/BackendStore.js"
import type { BlockId } from "../../../src/core/ids.js"
import { Backend } from "../../../src/core/ids.js"
import { ReadFailed } from "../../../src/worker/errors.js"
import type { MissPathShape } from "../../../src/worker/miss/MissPath.js"
import { VersionCache } from "../../../src/worker/miss/VersionCache.js"
import { Loads } from "../../../src/worker/server/Loads.js"

const object = { backend: Backend.S3, bucket: "b", objectPath: "k" }
const nothingResident = { geometry: { blockSize: 1024, pageSize: 256 }, missingRuns: (_k: string, a: number, b: number): Array<[number, number]> => [[a, b]] }

const scripted = (stat: () => ObjectStat, fill: (id: BlockId) => Promise<void>): MissPathShape => ({
  versions: new VersionCache(1000),
  stat: () => stat(),
  revalidate: () => Promise.resolve(stat()),
  fill: (id) => fill(id)
})

describe("worker Loads", () => {
  it("runs at most `limit` Loads at once and queues the rest", async () => {
    let running = 0
    let peak = 0
    const gates: Array<() => void> = []
    const miss = scripted(
      () => ({ size: 1024, version: "v1" }),
      () => {
        running++
        peak = Math.max(peak, running)
        return new Promise((resolve) =>
          gates.push(() => {
            running--
            resolve()
          })
        )
      }
    )
    const loads = new Loads(nothingResident, miss, 2)
    const all = Array.from({ length: 5 }, () => loads.load(object, 0, 1024))
    await new Promise((r) => setImmediate(r))
    expect(loads.pending).toBe(5)
    expect(running).toBe(2)
    while (gates.length > 0 || running > 0) {
      gates.shift()?.()
      await new Promise((r) => setImmediate(r))
    }
    const results = await Promise.all(all)
    expect(results).toEqual(Array.from({ length: 5 }, () => ({ fetched: 1024, resident: 0 })))
    expect(peak).toBe(2)
    expect(loads.pending).toBe(0)
  })

  it("retries once at the current version when the fill found the stat's version gone", async () => {
    let version = "v1"
    const filled: Array<string> = []
    const miss = scripted(
      () => ({ size: 1024, version }),
      (id) => {
        filled.push(id.version)
        if (id.version === "v1") {
          version = "v2"
          return Promise.reject(new ReadFailed({ reason: "If-Match failed", staleVersion: true }))
        }
        return Promise.resolve()
      }
    )
    const loads = new Loads(nothingResident, miss)
    expect(await loads.load(object, 0, 1024)).toEqual({ fetched: 1024, resident: 0 })
    expect(filled).toEqual(["v1", "v2"])
  })
})
