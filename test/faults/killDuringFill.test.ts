/**
 * kill -9 of a real `talon worker` process while it fills pages from a slow origin, then a
 * restart on the same cache dir: every byte it serves is right, a half-written page is never
 * served (fills go to a temp name, are fdatasynced and renamed with a recorded checksum; the
 * temp dir is emptied at start), and the pages completed before the kill are served warm.
 */
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { makeCleanup, tempDir } from "../worker/support/harness.js"
import { eventually, metric, originBytes, originHolding, readRange, resetOrigin, startWorker, unitFiles, wrongUnitFiles } from "./support/faultWorker.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const PAGE = 64 * 1024
const SIZE = 4 * 1024 * 1024 + 777
const FLAGS = ["--block-size", "1M", "--page-size", "64K", "--capacity", "64M", "--scrub-rate", "0", "--origin-concurrency", "4"]

describe("faults: kill -9 during fills", () => {
  it("a worker killed mid-fill restarts on the same dir and serves every byte right, warm where pages completed", async () => {
    const { stub, data, object, objects } = await originHolding(cleanup, "big.bin", SIZE)
    const cache = await tempDir(cleanup, "talon-faults-kill-")

    for (let round = 0; round < 2; round++) {
      // Slow origin: each response trickles, so the kill lands inside fills (pages half written).
      await Effect.runPromise(stub.setFaults({ bandwidthBytesPerSec: 512 * 1024 }))
      const w = await startWorker(cleanup, stub, cache, FLAGS)
      const pending = readRange(w.dataPort, object, 0, SIZE)
      // A page reaches its temp file in one write (the fill stages it in memory), so the temp dir
      // is empty most of the time: "in flight" is the read not being answered yet.
      let answered = false
      void pending.finally(() => {
        answered = true
      })
      const before = (await unitFiles(cache)).length
      await eventually("some pages to complete and more to be in flight", async () => {
        const done = (await unitFiles(cache)).length - before
        return done >= 3 && !answered
      })
      await w.kill()
      const cut = await pending
      // Whatever it got before the kill, it is never a wrong reply.
      if (cut.ok) expect(cut.bytes.equals(data)).toBe(true)
      const survivors = await unitFiles(cache)
      const completed = survivors.length
      const completedBytes = (await Promise.all(survivors.map((u) => fsp.stat(u.file)))).reduce((n, st) => n + st.size, 0)
      expect(completed).toBeGreaterThan(0)

      await resetOrigin(stub)
      const restartedAt = performance.now()
      const again = await startWorker(cleanup, stub, cache, FLAGS)
      for (const [offset, len] of [[0, SIZE], [PAGE - 5, 3 * PAGE], [SIZE - 1000, 1000]] as const) {
        const r = await readRange(again.dataPort, object, offset, len)
        if (!r.ok) throw new Error(`read after restart failed: ${r.error}\n${again.output()}`)
        expect(r.bytes.equals(data.subarray(offset, offset + len))).toBe(true)
        if (offset === 0) console.log(`kill -9 round ${round}: ${completed} pages done at the kill; restart to full read ${Math.round(performance.now() - restartedAt)} ms`)
      }
      // Every page completed before the kill was served warm (its checksum is recorded before its
      // rename): the origin sent exactly the rest.
      expect(await metric(again, 'talon_worker_store_corrupt_units_total{reason="unrecorded"}')).toBe(0)
      expect(await originBytes(stub)).toBe(SIZE - completedBytes)
      expect(await metric(again, 'talon_worker_store_corrupt_units_total{reason="checksum"}')).toBe(0)
      expect(await metric(again, 'talon_worker_store_corrupt_units_total{reason="size"}')).toBe(0)
      // Fills take origin bodies natively by default (the addon's threads own the socket mid-body): the kill above landed in those.
      expect(await metric(again, "talon_worker_origin_native_bytes_total")).toBeGreaterThan(0)
      await again.stop()
      expect(await wrongUnitFiles(cache, objects)).toEqual([])
      // Again from cold, so the kill lands at another point of the fills.
      await fsp.rm(path.join(cache, "v1"), { recursive: true, force: true })
    }
  }, 600_000)
})
