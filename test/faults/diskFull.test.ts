/**
 * Disk full: a real `talon worker` process whose cache dir is an 8 MiB tmpfs while its
 * --capacity says 64 MiB. ENOSPC is the real capacity: the worker evicts to make room and
 * every read keeps succeeding with the right bytes; it logs the episode, /metrics counts it
 * and reports the lowered capacity; nothing corrupt or partial is left on disk (a restart
 * on the same dir verifies every page and drops none).
 *
 * Needs root to mount the tmpfs (CI runs as root): without it the test fails and says so.
 */
import { execFileSync } from "node:child_process"
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { type Cleanup, makeCleanup, tempDir } from "../worker/support/harness.js"
import { eventually, metric, originHolding, readRange, startWorker, unitFiles, wrongUnitFiles } from "./support/faultWorker.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const MIB = 1024 * 1024
const SIZE = 24 * MIB + 333
const FLAGS = ["--block-size", "1M", "--page-size", "64K", "--capacity", "64M", "--scrub-rate", "0"]

const mountSmallTmpfs = async (c: Cleanup): Promise<string> => {
  const dir = await tempDir(c, "talon-faults-full-")
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=8m", "tmpfs", dir], { stdio: "pipe" })
  } catch (e) {
    throw new Error(
      `the disk-full test needs a small filesystem and could not mount an 8 MiB tmpfs on ${dir} ` +
        `(run the tests as root, or with CAP_SYS_ADMIN): ${String(e)}`
    )
  }
  // Registered after the dir's removal, so it runs first: unmount, then remove.
  c.add(async () => {
    execFileSync("umount", ["-l", dir], { stdio: "pipe" })
  })
  return dir
}

describe("faults: disk full", () => {
  it("a cache dir smaller than --capacity: ENOSPC evicts, reads keep succeeding, metrics and log say so, nothing corrupt left", async () => {
    const { stub, data, object, objects } = await originHolding(cleanup, "huge.bin", SIZE)
    const cache = await mountSmallTmpfs(cleanup)

    const w = await startWorker(cleanup, stub, cache, FLAGS)
    // Sequential 1 MiB reads over 24 MiB through a cache that holds under 8 MiB, then again.
    for (let pass = 0; pass < 2; pass++) {
      for (let offset = 0; offset < SIZE; offset += MIB) {
        const len = Math.min(MIB, SIZE - offset)
        const r = await readRange(w.dataPort, object, offset, len)
        if (!r.ok) throw new Error(`read at ${offset} failed: ${r.error}\n${w.output()}`)
        expect(r.bytes.equals(data.subarray(offset, offset + len))).toBe(true)
      }
    }
    expect(await metric(w, "talon_worker_disk_full_episodes_total")).toBeGreaterThanOrEqual(1)
    expect(await metric(w, "talon_worker_disk_full_errors_total")).toBeGreaterThanOrEqual(1)
    expect(await metric(w, "talon_worker_disk_full_evicted_bytes_total")).toBeGreaterThan(0)
    expect(await metric(w, "talon_worker_capacity_bytes")).toBeLessThan(8 * MIB)
    expect(await metric(w, "talon_worker_request_errors_total")).toBe(0)
    expect(w.output()).toMatch(/is full \(ENOSPC\)/)
    console.log(
      `disk full: ${await metric(w, "talon_worker_disk_full_errors_total")} ENOSPC errors in ` +
        `${await metric(w, "talon_worker_disk_full_episodes_total")} episodes, capacity now ${await metric(w, "talon_worker_capacity_bytes")} bytes`
    )
    await w.stop()

    // Nothing corrupt or partial left behind.
    expect(await wrongUnitFiles(cache, objects)).toEqual([])
    expect(await fsp.readdir(path.join(cache, "tmp"))).toEqual([])
    const pages = (await unitFiles(cache)).length
    expect(pages).toBeGreaterThan(0)

    // A restart on the same dir verifies every page it finds and drops none.
    const again = await startWorker(cleanup, stub, cache, FLAGS)
    await eventually("start-up verify of every page", async () => (await metric(again, "talon_worker_store_verified_units_total")) >= pages)
    expect(await metric(again, "talon_worker_store_verified_units_total")).toBe(pages)
    for (const reason of ["checksum", "short", "long", "size"]) {
      expect(await metric(again, `talon_worker_store_corrupt_units_total{reason="${reason}"}`)).toBe(0)
    }
    const r = await readRange(again.dataPort, object, SIZE - 3 * MIB, 3 * MIB)
    expect(r.ok && r.bytes.equals(data.subarray(SIZE - 3 * MIB))).toBe(true)
    await again.stop()
  }, 600_000)
})
