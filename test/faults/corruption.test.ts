/**
 * Corrupted cache files, with a real `talon worker` process and the origin stub: a byte
 * flipped in a cached page (while the worker runs, and while it is down), a page torn as a
 * crash without fsync could leave it, a truncated page (while running, and while down).
 * None of them is ever served once detected: every successful read is checked byte for byte
 * against the origin's copy, the bad unit is counted in /metrics and refetched.
 */
import * as fsp from "node:fs/promises"
import { describe, expect, it, type TestContext } from "vitest"
import { type Cleanup, makeCleanup, tempDir } from "../worker/support/harness.js"
import { eventually, metric, type objectId, originBytes, originHolding, readRange, resetOrigin, startWorker, unitFiles, wrongUnitFiles } from "./support/faultWorker.js"

const PAGE = 32 * 1024
const SIZE = 1024 * 1024 + 5000
// A short minimum scrub pass: the next pass starts soon after the one that ran while the
// object was filled, instead of the default 10 s later.
const FLAGS = ["--block-size", "256K", "--page-size", "32K", "--capacity", "64M", "--scrub-min-pass-ms", "200"]

/** The tests run concurrently, each on its own origin, cache directory and worker processes. */
const ownCleanup = ({ onTestFinished }: TestContext): Cleanup => {
  const cleanup = makeCleanup()
  onTestFinished(() => cleanup.run())
  return cleanup
}

const setup = async (cleanup: Cleanup, scrubRate: string) => {
  const origin = await originHolding(cleanup, "obj.bin", SIZE)
  const cache = await tempDir(cleanup, "talon-faults-cache-")
  return { ...origin, cache, flags: [...FLAGS, "--scrub-rate", scrubRate] }
}

/** Reads the whole object, asserting every byte. */
const readAll = async (port: number, object: ReturnType<typeof objectId>, data: Buffer) => {
  const r = await readRange(port, object, 0, data.length)
  if (!r.ok) throw new Error(`read failed: ${r.error}`)
  expect(r.bytes.equals(data)).toBe(true)
}

const flipByte = async (file: string, at: number) => {
  const fh = await fsp.open(file, "r+")
  try {
    const b = Buffer.alloc(1)
    await fh.read(b, 0, 1, at)
    b[0] = b[0]! ^ 0x5a
    await fh.write(b, 0, 1, at)
  } finally {
    await fh.close()
  }
}

const pageAt = async (cache: string, objectOffset: number) => {
  const u = (await unitFiles(cache)).find((f) => f.objectOffset === objectOffset)
  if (u === undefined) throw new Error(`no cached page at object offset ${objectOffset}`)
  return u.file
}

describe.concurrent("faults: corrupted cache files", () => {
  it("a byte flipped in a cached page while the worker runs is found by the scrub, never served after, and refetched", async (ctx) => {
    const cleanup = ownCleanup(ctx)
    const { stub, data, cache, flags, object, objects } = await setup(cleanup, "256M")
    const w = await startWorker(cleanup, stub, cache, flags)
    await readAll(w.dataPort, object, data)
    // Hits (the native plane may now answer this page from its hit table, without JS).
    for (let i = 0; i < 3; i++) {
      const hit = await readRange(w.dataPort, object, 3 * PAGE + 10, 100)
      expect(hit.ok && hit.bytes.equals(data.subarray(3 * PAGE + 10, 3 * PAGE + 110))).toBe(true)
    }
    await resetOrigin(stub)
    await flipByte(await pageAt(cache, 3 * PAGE), 50)
    const flippedAt = performance.now()

    await eventually("the scrub to drop the flipped page", async () => (await metric(w, 'talon_worker_store_corrupt_units_total{reason="checksum"}')) >= 1)
    console.log(`flipped byte (running, scrub 256M/s over ${SIZE} bytes): dropped within ${Math.round(performance.now() - flippedAt)} ms`)
    // Never served again: the hit reads right bytes (refetched: the origin sent that page again).
    const hit = await readRange(w.dataPort, object, 3 * PAGE + 10, 100)
    expect(hit.ok && hit.bytes.equals(data.subarray(3 * PAGE + 10, 3 * PAGE + 110))).toBe(true)
    await readAll(w.dataPort, object, data)
    expect(await originBytes(stub)).toBe(PAGE)
    expect(w.output()).toContain("(checksum: xxh64")
    await w.stop()
    expect(await wrongUnitFiles(cache, objects)).toEqual([])
  }, 300_000)

  it("a flipped byte and a torn page left on disk while the worker was down are dropped at start-up, never served", async (ctx) => {
    const cleanup = ownCleanup(ctx)
    const { stub, data, cache, flags, object, objects } = await setup(cleanup, "0")
    const first = await startWorker(cleanup, stub, cache, flags)
    await readAll(first.dataPort, object, data)
    await first.stop()

    await flipByte(await pageAt(cache, 5 * PAGE), PAGE - 1)
    // What a crash without fsync may leave: the file renamed at full size, its data never written.
    await fsp.writeFile(await pageAt(cache, 9 * PAGE), Buffer.alloc(PAGE))
    await resetOrigin(stub)

    const startedAt = performance.now()
    const second = await startWorker(cleanup, stub, cache, flags)
    await readAll(second.dataPort, object, data)
    console.log(`flipped + torn page (down): restart to first full read ${Math.round(performance.now() - startedAt)} ms`)
    const narrow = await readRange(second.dataPort, object, 9 * PAGE + 7, 3)
    expect(narrow.ok && narrow.bytes.equals(data.subarray(9 * PAGE + 7, 9 * PAGE + 10))).toBe(true)
    expect(await metric(second, 'talon_worker_store_corrupt_units_total{reason="checksum"}')).toBe(2)
    // Exactly the two bad pages came from the origin again; every other page was served warm.
    expect(await originBytes(stub)).toBe(2 * PAGE)
    await second.stop()
    expect(await wrongUnitFiles(cache, objects)).toEqual([])
  }, 300_000)

  it("a truncated page fails reads only until the size check drops it, then is refetched; one truncated while down is dropped at start-up", async (ctx) => {
    const cleanup = ownCleanup(ctx)
    const { stub, data, cache, flags, object, objects } = await setup(cleanup, "0")
    const w = await startWorker(cleanup, stub, cache, flags)
    await readAll(w.dataPort, object, data)
    await resetOrigin(stub)
    await fsp.truncate(await pageAt(cache, 2 * PAGE), PAGE / 2)
    const truncatedAt = performance.now()

    // Reads past the cut may fail until the truncation is seen; none may return wrong bytes.
    let failures = 0
    await eventually("reads past the cut to succeed again", async () => {
      const r = await readRange(w.dataPort, object, 2 * PAGE, 2 * PAGE)
      if (!r.ok) {
        failures++
        return false
      }
      expect(r.bytes.equals(data.subarray(2 * PAGE, 4 * PAGE))).toBe(true)
      return true
    })
    const recoveredMs = performance.now() - truncatedAt
    expect(await metric(w, 'talon_worker_store_corrupt_units_total{reason="short"}')).toBeGreaterThanOrEqual(1)
    expect(await originBytes(stub)).toBe(PAGE)
    await readAll(w.dataPort, object, data)
    await w.stop()

    await fsp.truncate(await pageAt(cache, 7 * PAGE), 100)
    await resetOrigin(stub)
    const second = await startWorker(cleanup, stub, cache, flags)
    await readAll(second.dataPort, object, data)
    expect(await metric(second, 'talon_worker_store_corrupt_units_total{reason="size"}')).toBe(1)
    expect(await originBytes(stub)).toBe(PAGE)
    await second.stop()
    expect(await wrongUnitFiles(cache, objects)).toEqual([])
    console.log(`truncated page (running): ${failures} failed reads, recovered ${Math.round(recoveredMs)} ms after the cut`)
  }, 300_000)
})
