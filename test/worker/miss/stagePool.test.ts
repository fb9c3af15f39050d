/**
 * Staging buffers across fills (fetchRun over a real DiskStore): while any fill streams, every
 * buffer given back is kept (up to the busy cap), so a cold read reuses buffers instead of
 * allocating one per page; once the last fill ends the pool lets all but its idle share go.
 */
import * as fsp from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import fc from "fast-check"
import { afterEach, describe, expect, it } from "vitest"
import { Backend, type BlockId } from "../../../src/core/ids.js"
import { fetchRun, type RangeFetch } from "../../../src/worker/miss/fetchRun.js"
import { StagePool } from "../../../src/worker/miss/stagePool.js"
import { DiskStore } from "../../../src/worker/store/DiskStore.js"
import { blockKey } from "../../../src/worker/store/layout.js"

const PAGE = 4096
const PAGES = 8

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

const openStore = async () => {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), "talon-stage-pool-"))
  cleanups.push(() => fsp.rm(dir, { recursive: true, force: true }))
  const store = await DiskStore.open({ dirs: [dir], capacity: 1024 * PAGE, pageSize: PAGE })
  cleanups.push(() => store.close())
  return store
}

const block = (name: string): BlockId => ({ object: { backend: Backend.S3, bucket: "b", objectPath: name }, offset: 0, blockSize: PAGE * PAGES, version: "v1" })
const bytes = Uint8Array.from({ length: PAGE * PAGES }, (_, i) => (i * 7) & 0xff)

/** Sends the range a page at a time, after `gate` resolves. */
const origin =
  (gate: Promise<void> = Promise.resolve()): RangeFetch =>
  async (_object, _version, offset, length, sink) => {
    await gate
    for (let at = 0; at < length; at += PAGE) await sink(bytes.subarray(offset + at, offset + Math.min(at + PAGE, length)))
  }

const fill = (store: DiskStore, pool: StagePool, name: string, fetchRange: RangeFetch) =>
  fetchRun({ store, pageSize: PAGE, fetchRange, stages: pool }, block(name), blockKey(block(name)), PAGE * PAGES, PAGE * PAGES, 0, PAGES, () => {})

describe("StagePool", () => {
  it("keeps what it is given up to the busy cap, and trims to the idle share (property)", () => {
    fc.assert(
      fc.property(fc.nat(8), fc.nat(8), fc.array(fc.boolean(), { maxLength: 64 }), (keep, extra, ops) => {
        const pool = new StagePool(16, keep, keep + extra)
        const out: Array<Uint8Array> = []
        for (const take of ops) {
          if (take) out.push(pool.take())
          else if (out.length > 0) pool.give(out.pop()!)
          expect(pool.idle).toBeLessThanOrEqual(keep + extra)
        }
        pool.trim()
        expect(pool.idle).toBeLessThanOrEqual(keep)
      })
    )
  })

  it("reuses every buffer while another fill streams and trims once the last fill ends", async () => {
    const store = await openStore()
    const pool = new StagePool(PAGE, 1, 64)
    let open!: () => void
    const held = fill(store, pool, "held", origin(new Promise<void>((r) => (open = r))))
    await fill(store, pool, "first", origin())
    // Still busy: every page buffer of the first fill is back in the pool, none let go.
    expect(store.fills.busy).toBe(true)
    const kept = pool.idle
    expect(kept).toBeGreaterThan(1)
    // A second cold block takes only pooled buffers: the pool never holds more than it had.
    await fill(store, pool, "second", origin())
    expect(pool.idle).toBe(kept)
    open()
    await held
    expect(store.fills.busy).toBe(false)
    expect(pool.idle).toBe(1)
    for (const name of ["held", "first", "second"]) {
      const entry = store.lookup(blockKey(block(name)))!
      expect(entry.present).toBe(PAGES)
    }
  })
})
