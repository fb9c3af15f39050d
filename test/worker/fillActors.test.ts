/**
 * The fill scheduler's actors over a real DiskStore: one block actor per block with units in
 * flight, retired once its units settle (no actor outlives its fills), joiners released per
 * unit, and a failed run leaving nothing behind so the next miss fetches again. The origin
 * here is a RangeFetch over an in-memory object with a gate, so the test decides when bytes
 * arrive; test/worker/fillScheduler.test.ts covers the same paths against the origin stub.
 */
import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Exit, Scope } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Backend, type BlockId } from "../../src/core/ids.js"
import { ReadFailed } from "../../src/worker/errors.js"
import type { RangeFetch } from "../../src/worker/miss/fetchRun.js"
import { type FillSchedulerShape, makeFillScheduler } from "../../src/worker/miss/FillScheduler.js"
import { DiskStore } from "../../src/worker/store/DiskStore.js"
import { blockKey } from "../../src/worker/store/layout.js"
import { pattern } from "./support/dirBackend.js"
import { eventuallyAsync } from "../support/eventually.js"

const KiB = 1024
const PAGE = 16 * KiB
const BLOCK = 8 * PAGE

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

const blockOf = (objectPath: string): BlockId => ({ object: { backend: Backend.S3, bucket: "b", objectPath }, offset: 0, blockSize: BLOCK, version: "v1" })

/** An origin holding one object per path; each fetch waits for `gate` (when set) and may be told to fail. */
const makeOrigin = (objects: Record<string, Uint8Array>) => {
  const o = {
    fetches: 0,
    gate: undefined as Promise<void> | undefined,
    failWith: undefined as ReadFailed | undefined,
    fetch: (async (object, _version, offset, length, sink) => {
      o.fetches++
      if (o.gate !== undefined) await o.gate
      if (o.failWith !== undefined) throw o.failWith
      const bytes = objects[object.objectPath]!
      for (let at = offset; at < offset + length; at += 4 * KiB) await sink(bytes.subarray(at, Math.min(at + 4 * KiB, offset + length)))
    }) satisfies RangeFetch
  }
  return o
}

const start = async (origin: ReturnType<typeof makeOrigin>) => {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), "talon-fill-actors-"))
  cleanups.push(() => fsp.rm(dir, { recursive: true, force: true }))
  const store = await DiskStore.open({ dirs: [dir], capacity: 64 * BLOCK, pageSize: PAGE })
  cleanups.push(() => store.close())
  const scope = Effect.runSync(Scope.make())
  cleanups.push(() => Effect.runPromise(Scope.close(scope, Exit.void)))
  const scheduler: FillSchedulerShape = await Effect.runPromise(
    Scope.extend(makeFillScheduler({ store, pageSize: PAGE, fetchRange: origin.fetch }), scope)
  )
  const fill = (id: BlockId, first: number, end: number) => Effect.runPromise(Effect.either(scheduler.fill(id, BLOCK, BLOCK, first, end)))
  const blocks = () => Effect.runPromise(scheduler.blocks)
  return { store, fill, blocks }
}

/** Asks `f` until it holds (the machine may be loaded: no fixed sleeps). */
const eventually = (f: () => Promise<boolean>, what: string) =>
  eventuallyAsync(
    async () => {
      if (!(await f())) throw new Error("not yet")
    },
    { what, every: "5 millis" }
  )

/** The units' bytes as the store holds them on disk. */
const stored = (store: DiskStore, id: BlockId, first: number, end: number): Buffer => {
  const entry = store.lookup(blockKey(id))!
  return Buffer.concat(Array.from({ length: end - first }, (_, i) => fs.readFileSync(entry.unitPath(first + i))))
}

describe("fill scheduler actors", () => {
  it("one actor per block in flight, one fetch per run, every actor retired once its units settle", { timeout: 60_000 }, async () => {
    const a = pattern(BLOCK, 1)
    const b = pattern(BLOCK, 2)
    const origin = makeOrigin({ a, b })
    let open!: () => void
    origin.gate = new Promise<void>((r) => (open = r))
    const { store, fill, blocks } = await start(origin)
    const misses = [
      ...Array.from({ length: 10 }, () => fill(blockOf("a"), 0, 8)),
      ...Array.from({ length: 5 }, (_, i) => fill(blockOf("b"), i, i + 2))
    ]
    await eventually(async () => origin.fetches >= 2, "both blocks' first runs reach the origin")
    expect(await blocks()).toBe(2)
    open()
    const results = await Promise.all(misses)
    for (const r of results) expect(r._tag).toBe("Right")
    // a: one run; b: the first miss's run [0, 2), then each later miss only its units not yet in flight.
    expect(origin.fetches).toBeLessThanOrEqual(2 + 4)
    expect(Buffer.compare(stored(store, blockOf("a"), 0, 8), Buffer.from(a))).toBe(0)
    expect(Buffer.compare(stored(store, blockOf("b"), 0, 6), Buffer.from(b.subarray(0, 6 * PAGE)))).toBe(0)
    await eventually(async () => (await blocks()) === 0, "every block actor retired")
    // Present units are not fetched again.
    const before = origin.fetches
    expect((await fill(blockOf("a"), 2, 5))._tag).toBe("Right")
    expect(origin.fetches).toBe(before)
  })

  it("a failing run fails every joiner with its ReadFailed, leaves no actor, and the next miss fetches again", { timeout: 60_000 }, async () => {
    const c = pattern(BLOCK, 3)
    const origin = makeOrigin({ c })
    let open!: () => void
    origin.gate = new Promise<void>((r) => (open = r))
    origin.failWith = new ReadFailed({ reason: "origin said 503 SlowDown" })
    const { store, fill, blocks } = await start(origin)
    const misses = Array.from({ length: 12 }, (_, i) => fill(blockOf("c"), i % 4, 4 + (i % 4)))
    await eventually(async () => origin.fetches >= 1, "the run reaches the origin")
    open()
    for (const r of await Promise.all(misses)) {
      expect(r._tag).toBe("Left")
      if (r._tag === "Left") expect(r.left).toBe(origin.failWith)
    }
    await eventually(async () => (await blocks()) === 0, "the failed block's actor retired")
    expect(store.missingRuns(blockKey(blockOf("c")), 0, 8)).toEqual([[0, 8]])
    origin.gate = undefined
    origin.failWith = undefined
    const fetched = origin.fetches
    expect((await fill(blockOf("c"), 0, 8))._tag).toBe("Right")
    expect(origin.fetches).toBe(fetched + 1)
    expect(Buffer.compare(stored(store, blockOf("c"), 0, 8), Buffer.from(c))).toBe(0)
    await eventually(async () => (await blocks()) === 0, "retired after the retry")
  })

  it("a handler that dies restarts on the supervision schedule: the miss that hit it fails, the next one fills", { timeout: 60_000 }, async () => {
    const d = pattern(BLOCK, 4)
    const origin = makeOrigin({ d })
    const { store, fill, blocks } = await start(origin)
    const missingRuns = store.missingRuns.bind(store)
    let crashes = 1
    store.missingRuns = (key, first, end) => {
      if (crashes-- > 0) throw new Error("index lookup died")
      return missingRuns(key, first, end)
    }
    const crashed = await fill(blockOf("d"), 0, 8)
    expect(crashed._tag).toBe("Left")
    if (crashed._tag === "Left") expect(crashed.left).toMatchObject({ _tag: "ActorCrashed" })
    expect(origin.fetches).toBe(0)
    expect((await fill(blockOf("d"), 0, 8))._tag).toBe("Right")
    expect(origin.fetches).toBe(1)
    expect(Buffer.compare(stored(store, blockOf("d"), 0, 8), Buffer.from(d))).toBe(0)
    await eventually(async () => (await blocks()) === 0, "retired after the restart")
  })
})
