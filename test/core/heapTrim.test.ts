import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, TestClock } from "effect"
import fc from "fast-check"
import * as v8 from "node:v8"
import { compactHeap, decide, defaultTrimPolicy, mallocTrim, trimOnceWhenQuiet, type TrimProbe, trimWhenQuiet } from "../../src/core/heapTrim.js"

const MiB = 1024 * 1024
const policy = defaultTrimPolicy
const quietMicros = Duration.toMillis(policy.every) * 1000 * policy.quietShare

/** A probe that reports `periods` in turn (the last one repeats) and records after which sample each trim came. */
const scripted = (periods: ReadonlyArray<{ readonly cpuMicros: number; readonly heapBytes: number }>) => {
  const trims: Array<number> = []
  let i = 0
  const probe = (): TrimProbe => ({
    sample: () => periods[Math.min(i++, periods.length - 1)]!,
    trim: () => {
      trims.push(i)
      return 20 * MiB
    }
  })
  return { probe, trims, sampled: () => i }
}

describe("heapTrim.decide", () => {
  it("trims only when quiet and grown past the slack; the floor only falls without a trim", () => {
    fc.assert(
      fc.property(fc.nat(64 * MiB), fc.nat(2 * 1000 * 1000), fc.nat(96 * MiB), (floor, cpuMicros, heapBytes) => {
        const next = decide(policy, { floor }, { cpuMicros, heapBytes })
        expect(next.trim).toBe(cpuMicros <= quietMicros && heapBytes > floor + policy.slack)
        expect(next.state.floor).toBe(next.trim ? floor : Math.min(floor, heapBytes))
      })
    )
  })
})

describe("heapTrim.trimWhenQuiet", () => {
  it.effect("waits out a busy process, trims once when it goes quiet, and not again until the heap grows", () =>
    Effect.gen(function* () {
      // Per period: CPU used and committed heap, as the process would report them.
      const periods = [
        { cpuMicros: 2_000_000, heapBytes: 40 * MiB }, // busy (start-up, load): no trim
        { cpuMicros: 1_000, heapBytes: 40 * MiB }, // quiet and grown: trim, heap down to 20
        { cpuMicros: 1_000, heapBytes: 21 * MiB }, // quiet, within the slack: no trim
        { cpuMicros: 1_000, heapBytes: 30 * MiB } // grown again: trim
      ]
      const { probe, trims, sampled } = scripted(periods)
      const fiber = yield* Effect.fork(trimWhenQuiet(policy, probe))
      yield* TestClock.adjust(Duration.times(policy.every, 4))
      expect(sampled()).toBe(4)
      expect(trims).toEqual([2, 4])
      yield* Fiber.interrupt(fiber)
    })
  )
})

describe("heapTrim.trimOnceWhenQuiet", () => {
  it.effect("waits out start-up, trims in the second quiet period in a row, and never again", () =>
    Effect.gen(function* () {
      const periods = [
        { cpuMicros: 2_000_000, heapBytes: 40 * MiB }, // start-up: no trim
        { cpuMicros: 1_000, heapBytes: 40 * MiB }, // quiet once: not yet
        { cpuMicros: 900_000, heapBytes: 40 * MiB }, // busy again: starts over
        { cpuMicros: 1_000, heapBytes: 40 * MiB }, // quiet
        { cpuMicros: 1_000, heapBytes: 40 * MiB }, // quiet again: trim
        { cpuMicros: 1_000, heapBytes: 60 * MiB } // grown again after load: left alone
      ]
      const { probe, trims, sampled } = scripted(periods)
      const fiber = yield* Effect.fork(trimOnceWhenQuiet(policy, probe))
      yield* TestClock.adjust(Duration.times(policy.every, 9))
      expect(trims).toEqual([5])
      expect(sampled()).toBe(5)
      expect(fiber.unsafePoll()).not.toBeNull()
    })
  )
})

describe("heapTrim.compactHeap", () => {
  it("gives back the pages a burst of short-lived objects left committed", () => {
    // A burst: many small objects, most of them then dropped, the survivors spread over every page.
    let kept: Array<{ readonly a: number; readonly b: string }> = []
    for (let i = 0; i < 400_000; i++) kept.push({ a: i, b: `burst-${i}` })
    kept = kept.filter((_, i) => i % 50 === 0)
    const before = v8.getHeapStatistics().total_heap_size
    const after = compactHeap()
    expect(kept.length).toBe(8_000)
    expect(before - after).toBeGreaterThan(8 * MiB)
  })
})

describe("heapTrim.mallocTrim", () => {
  it.runIf(process.platform === "linux")("loads the addon on first use and gives back the pages freed buffers left inside malloc's heap", () => {
    // Buffers below glibc's mmap threshold come from malloc's heap; every tenth is kept, so the
    // freed ones sit between live blocks, where glibc never trims by itself.
    let buffers: Array<Buffer> = []
    for (let i = 0; i < 2_000; i++) buffers.push(Buffer.alloc(32 * 1024, i))
    buffers = buffers.filter((_, i) => i % 10 === 0)
    compactHeap()
    expect(mallocTrim()).toBe(true)
    expect(buffers.every((b, i) => b[0] === (i * 10) % 256)).toBe(true)
  })
})
