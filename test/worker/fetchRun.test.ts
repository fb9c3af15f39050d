/**
 * The fill byte pipeline (fetchRun) over a real DiskStore: however the origin cuts its body into
 * chunks, every unit lands with exactly its bytes and the XXH64 of them, a page staged whole, a
 * unit larger than one staging buffer written a buffer at a time; an origin sending too much or
 * too little fails the run and leaves no unit and no temp file behind.
 */
import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import fc from "fast-check"
import { afterEach, describe, expect, it } from "vitest"
import { Backend, type BlockId } from "../../src/core/ids.js"
import { ReadFailed } from "../../src/worker/errors.js"
import { fetchRun, type RangeFetch } from "../../src/worker/miss/fetchRun.js"
import { StagePool } from "../../src/worker/miss/stagePool.js"
import { hasher } from "../../src/worker/store/checksum.js"
import { DiskStore } from "../../src/worker/store/DiskStore.js"
import { blockKey, TMP_DIR } from "../../src/worker/store/layout.js"
import { pattern } from "./support/dirBackend.js"

const KiB = 1024
const PAGE = 16 * KiB

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

let dir = ""
const openStore = async (pageSize: number) => {
  dir = await fsp.mkdtemp(path.join(os.tmpdir(), "talon-fetch-run-"))
  cleanups.push(() => fsp.rm(dir, { recursive: true, force: true }))
  const store = await DiskStore.open({ dirs: [dir], capacity: 1024 * PAGE, pageSize })
  cleanups.push(() => store.close())
  return store
}

let blocks = 0
const freshBlock = (blockSize: number): BlockId => ({
  object: { backend: Backend.S3, bucket: "b", objectPath: `o${blocks++}` },
  offset: 0,
  blockSize,
  version: "v1"
})

/** An origin that sends `bytes[offset, offset+length)` cut at `cuts` (chunk sizes, cycled), plus `extra` bytes. */
const origin =
  (bytes: Uint8Array, cuts: ReadonlyArray<number>, extra = 0): RangeFetch =>
  async (_object, _version, offset, length, sink) => {
    const body = Buffer.concat([bytes.subarray(offset, offset + length), Buffer.alloc(Math.max(0, extra), 7)]).subarray(0, length + extra)
    let at = 0
    for (let i = 0; at < body.length; i++) {
      const n = Math.min(cuts[i % cuts.length]!, body.length - at)
      await sink(body.subarray(at, at + n))
      at += n
    }
  }

/** Runs units `[0, units)` of a block of `bytes`; the settled units and the run's outcome. */
const run = async (store: DiskStore, id: BlockId, bytes: Uint8Array, fetchRange: RangeFetch, units: number, stages?: StagePool) => {
  const settled = new Map<number, unknown>()
  const outcome = await fetchRun(
    { store, pageSize: store.pageSize, fetchRange, ...(stages === undefined ? {} : { stages }) },
    id,
    blockKey(id),
    bytes.length,
    bytes.length,
    0,
    units,
    (unit, error) => {
      expect(settled.has(unit)).toBe(false)
      settled.set(unit, error)
    }
  ).then(
    () => undefined,
    (e: unknown) => e
  )
  return { settled, outcome }
}

/** Each unit's bytes on disk equal the block's, and its recorded checksum is theirs. */
const expectStored = (store: DiskStore, id: BlockId, bytes: Uint8Array, unitSize: number) => {
  const entry = store.lookup(blockKey(id))!
  const units = Math.ceil(bytes.length / unitSize)
  for (let i = 0; i < units; i++) {
    const want = bytes.subarray(i * unitSize, Math.min(bytes.length, (i + 1) * unitSize))
    const unit = entry.units[i]!
    expect(Buffer.compare(fs.readFileSync(entry.unitPath(i)), want)).toBe(0)
    expect(unit.sum).toBe(hasher().h64Raw(want))
  }
}

const tempFiles = () => fs.readdirSync(path.join(dir, TMP_DIR))

describe("fetchRun", () => {
  it("pages land with their bytes and checksums however the body is chunked", { timeout: 60_000 }, async () => {
    const store = await openStore(PAGE)
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 * PAGE }),
        fc.array(fc.integer({ min: 1, max: 3 * PAGE }), { minLength: 1, maxLength: 6 }),
        async (size, cuts) => {
          const id = freshBlock(8 * PAGE)
          const bytes = pattern(size, blocks)
          const units = Math.ceil(size / PAGE)
          const { settled, outcome } = await run(store, id, bytes, origin(bytes, cuts), units)
          expect(outcome).toBeUndefined()
          expect([...settled.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: units }, (_, i) => i))
          for (const e of settled.values()) expect(e).toBeUndefined()
          expectStored(store, id, bytes, PAGE)
        }
      ),
      { numRuns: 25 }
    )
    await store.flush()
    expect(tempFiles()).toEqual([])
  })

  it("a whole block larger than a staging buffer is written a buffer at a time, one checksum over all of it", { timeout: 60_000 }, async () => {
    const store = await openStore(0)
    const bytes = pattern(5 * PAGE + 123, 9)
    const id = freshBlock(8 * PAGE)
    const { settled, outcome } = await run(store, id, bytes, origin(bytes, [5000, 40_000, 1]), 1, new StagePool(2 * PAGE, 2))
    expect(outcome).toBeUndefined()
    expect(settled.get(0)).toBeUndefined()
    expectStored(store, id, bytes, bytes.length)
    await store.flush()
    expect(tempFiles()).toEqual([])
  })

  it("an origin sending more or less than asked fails the run: no unit indexed, no temp file left", { timeout: 60_000 }, async () => {
    for (const pageSize of [PAGE, 0]) {
      const store = await openStore(pageSize)
      const stages = new StagePool(PAGE, 2)
      for (const [extra, what] of [
        [5, "more"],
        [-(PAGE + 9), "less"]
      ] as const) {
        const bytes = pattern(3 * PAGE, 4)
        const id = freshBlock(4 * PAGE)
        const units = pageSize > 0 ? 3 : 1
        const { settled, outcome } = await run(store, id, bytes, origin(bytes, [7000], extra), units, stages)
        expect(outcome, `${what} bytes, page size ${pageSize}`).toBeInstanceOf(ReadFailed)
        expect((outcome as ReadFailed).staleVersion).toBe(true)
        expect(settled.size).toBe(units)
        // Pages completed before the failure may be committed; the rest carry the error.
        const entry = store.lookup(blockKey(id))
        for (const [unit, error] of settled) {
          if (error === undefined) expect(entry?.units[unit]).toBeDefined()
          else expect(entry?.units[unit]).toBeUndefined()
        }
        await store.flush()
        expect(tempFiles()).toEqual([])
      }
    }
  })
})
