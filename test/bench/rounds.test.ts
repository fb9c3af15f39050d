import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Exit, Fiber, Option, Ref, Schedule, TestClock } from "effect"
import * as fc from "fast-check"
import { type Arm, type PlanStep, RoundsConfigError, roundOrder, roundsPlan, runRounds, spread } from "../../bench/lib/rounds.js"

interface Fake {
  readonly rps: number
  readonly cpu: number
}

/** A fake arm that logs (name, round, start time) and returns a fixed number per round. */
const fakeArm = (
  name: string,
  log: Ref.Ref<ReadonlyArray<readonly [string, number, number]>>,
  rps: (round: number) => number,
  runFor = 0
): Arm<Fake> => ({
  name,
  run: (ctx) =>
    Effect.gen(function* () {
      const t = yield* Clock.currentTimeMillis
      yield* Ref.update(log, (l) => [...l, [name, ctx.round, t] as const])
      if (runFor > 0) yield* Effect.sleep(runFor)
      return { rps: rps(ctx.round), cpu: 10 }
    })
})

describe("roundOrder", () => {
  it("swaps two arms every round", () => {
    expect([0, 1, 2, 3].map((r) => roundOrder(2, r))).toEqual([[0, 1], [1, 0], [0, 1], [1, 0]])
  })

  it("balances positions and predecessors for 4 arms over 4 rounds", () => {
    const rows = [0, 1, 2, 3].map((r) => roundOrder(4, r))
    for (let pos = 0; pos < 4; pos++) expect(new Set(rows.map((row) => row[pos])).size).toBe(4)
    const pairs = new Set(rows.flatMap((row) => row.slice(1).map((a, i) => `${row[i]}>${a}`)))
    expect(pairs.size).toBe(12) // every ordered pair exactly once
  })

  it("is a permutation for any arm count and round", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 9 }), fc.nat(100), (k, r) => {
        expect([...roundOrder(k, r)].sort((a, b) => a - b)).toEqual(Array.from({ length: k }, (_, i) => i))
      })
    )
  })

  it("puts every one of 5 arms in every position over 10 rounds", () => {
    const rows = Array.from({ length: 10 }, (_, r) => roundOrder(5, r))
    for (let pos = 0; pos < 5; pos++) {
      const counts = [0, 0, 0, 0, 0]
      for (const row of rows) counts[row[pos]!]!++
      expect(counts).toEqual([2, 2, 2, 2, 2])
    }
  })
})

describe("spread", () => {
  it("is nearest-rank (the lower middle value of an even count) and ignores NaN", () => {
    expect(spread([4, 1, 3, 2, NaN])).toEqual({ n: 4, median: 2, min: 1, max: 4, q1: 1, q3: 3 })
    expect(spread([]).n).toBe(0)
  })
})

/** Repeats a run that logs its plan step and start time, on the given schedule. */
const logSteps = (plan: ReturnType<typeof roundsPlan>, schedule: Schedule.Schedule<PlanStep>, runFor = 0) =>
  Effect.gen(function* () {
    const log = yield* Ref.make<ReadonlyArray<readonly [PlanStep, number]>>([])
    const run = Effect.gen(function* () {
      const step = yield* plan.current
      const now = yield* Clock.currentTimeMillis
      yield* Ref.update(log, (l) => [...l, [step, now] as const])
      if (runFor > 0) yield* Effect.sleep(runFor)
    })
    const fiber = yield* Effect.fork(Effect.repeat(run, schedule))
    return { log, fiber }
  })

describe("roundsPlan", () => {
  it.effect("yields every run's round, arm and round order as a schedule spaced by the cool-down", () =>
    Effect.gen(function* () {
      const plan = roundsPlan(3, { rounds: 2, warmupRound: true, coolDown: "2 seconds" })
      const { log, fiber } = yield* logSteps(plan, plan.schedule, 1000)
      // 9 runs of 1 s with 8 cool-downs of 2 s between them; nothing after the last.
      yield* TestClock.adjust("24 seconds")
      expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
      yield* TestClock.adjust("1 second")
      const last = yield* Fiber.join(fiber)
      const entries = yield* Ref.get(log)
      expect(entries.map(([s]) => s)).toEqual(plan.steps)
      expect(last).toEqual(plan.steps[8])
      expect(entries.map(([, t]) => t / 1000)).toEqual([0, 3, 6, 9, 12, 15, 18, 21, 24])
      expect(entries.map(([s]) => [s.round, s.position, s.warmup, s.armIndex])).toEqual([
        [0, 0, true, 0], [0, 1, true, 1], [0, 2, true, 2],
        [1, 0, false, 0], [1, 1, false, 1], [1, 2, false, 2],
        [2, 0, false, 1], [2, 1, false, 2], [2, 2, false, 0]
      ])
      for (const [s] of entries) {
        expect(s.order).toEqual(roundOrder(3, Math.max(0, s.round - 1)))
        expect(s.order[s.position]).toBe(s.armIndex)
      }
    }))

  it.effect("composes with other schedules: stop after round 2, or add a pause before every round", () =>
    Effect.gen(function* () {
      const plan = roundsPlan(2, { rounds: 4, coolDown: "1 second" })
      const firstTwo = Schedule.whileOutput(plan.schedule, (s) => s.round <= 2)
      const short = yield* logSteps(plan, firstTwo)
      yield* TestClock.adjust("10 seconds")
      yield* Fiber.join(short.fiber)
      expect((yield* Ref.get(short.log)).map(([s]) => `${s.round}:${s.armIndex}`)).toEqual(["1:0", "1:1", "2:1", "2:0"])

      const start = yield* Clock.currentTimeMillis
      const paced = Schedule.addDelay(plan.schedule, (s) => (s.position === 0 ? "30 seconds" : 0))
      const slow = yield* logSteps(plan, paced)
      yield* TestClock.adjust("2 minutes")
      yield* Fiber.join(slow.fiber)
      const times = (yield* Ref.get(slow.log)).map(([, t]) => (t - start) / 1000)
      expect(times).toEqual([0, 1, 32, 33, 64, 65, 96, 97])
    }))

  it.effect("a single run needs no recurrence, and outside a repeat the current step is the first", () =>
    Effect.gen(function* () {
      const plan = roundsPlan(1, { rounds: 1, coolDown: "1 hour" })
      expect(plan.steps).toHaveLength(1)
      expect(yield* plan.current).toEqual(plan.steps[0])
      const { log, fiber } = yield* logSteps(plan, plan.schedule)
      yield* Fiber.join(fiber)
      expect((yield* Ref.get(log)).map(([, t]) => t)).toEqual([0])
    }))
})

describe("runRounds", () => {
  it.effect("runs A B, B A, … with the cool-down between runs and discards the warmup round", () =>
    Effect.gen(function* () {
      const log = yield* Ref.make<ReadonlyArray<readonly [string, number, number]>>([])
      const a = fakeArm("A", log, (r) => 100 + r, 1000)
      const b = fakeArm("B", log, (r) => 2 * (100 + r) + (r === 2 ? 100 : 0), 1000)
      const fiber = yield* Effect.fork(runRounds([a, b], { rounds: 4, coolDown: "5 seconds", warmupRound: true }))
      // 10 runs of 1 s with 9 cool-downs of 5 s between them.
      yield* TestClock.adjust("55 seconds")
      const report = yield* Fiber.join(fiber)
      const entries = yield* Ref.get(log)
      expect(entries.map(([n, r]) => `${r}${n}`)).toEqual(["0A", "0B", "1A", "1B", "2B", "2A", "3A", "3B", "4B", "4A"])
      expect(entries.map(([, , t]) => t)).toEqual([0, 6, 12, 18, 24, 30, 36, 42, 48, 54].map((s) => s * 1000))
      expect(report.orders).toEqual([["A", "B"], ["B", "A"], ["A", "B"], ["B", "A"]])
      expect(report.runs).toHaveLength(8)
      expect(report.runs.every((r) => !r.warmup)).toBe(true)
      expect(report.byArm["A"]!.map((x) => x.rps)).toEqual([101, 102, 103, 104])
      expect(report.summary["A"]!["rps"]!.median).toBe(102)
      expect(report.summary["B"]!["rps"]!).toMatchObject({ median: 206, min: 202, max: 304 })
      const ratio = report.ratios["B"]!["rps"]!
      expect(ratio.perRound).toEqual([2, 304 / 102, 2, 2])
      expect(ratio.median).toBe(2)
      expect(report.ratios["B"]!["cpu"]!.median).toBe(1)
      expect(report.ratios["A"]).toBeUndefined()
    }))

  it.effect("does not start the next run before the cool-down has passed", () =>
    Effect.gen(function* () {
      const log = yield* Ref.make<ReadonlyArray<readonly [string, number, number]>>([])
      const fiber = yield* Effect.fork(
        runRounds([fakeArm("A", log, () => 1), fakeArm("B", log, () => 1)], { rounds: 2, coolDown: "10 seconds" })
      )
      yield* TestClock.adjust("9 seconds")
      expect((yield* Ref.get(log)).length).toBe(1)
      yield* TestClock.adjust("1 second")
      expect((yield* Ref.get(log)).length).toBe(2)
      yield* TestClock.adjust("20 seconds")
      const report = yield* Fiber.join(fiber)
      expect(report.runs.map((r) => r.arm)).toEqual(["A", "B", "B", "A"])
    }))

  it.effect("rotates four arms and takes ratios against the named baseline", () =>
    Effect.gen(function* () {
      const log = yield* Ref.make<ReadonlyArray<readonly [string, number, number]>>([])
      const arms = ["w", "x", "y", "z"].map((n, i) => fakeArm(n, log, () => (i + 1) * 10))
      const report = yield* runRounds(arms, { rounds: 4, baseline: "y", metrics: { rps: (f) => f.rps } })
      expect(report.runs).toHaveLength(16)
      for (const order of report.orders) expect([...order].sort()).toEqual(["w", "x", "y", "z"])
      expect(new Set(report.orders.map((o) => o[0])).size).toBe(4)
      expect(report.ratios["w"]!["rps"]!.median).toBeCloseTo(1 / 3)
      expect(report.ratios["z"]!["rps"]!.median).toBeCloseTo(4 / 3)
      expect(Object.keys(report.summary["w"]!)).toEqual(["rps"])
    }))

  it.effect("fails with the first arm failure and rejects bad options", () =>
    Effect.gen(function* () {
      const boom: Arm<Fake, string> = { name: "boom", run: () => Effect.fail("arm failed: no samples") }
      const log = yield* Ref.make<ReadonlyArray<readonly [string, number, number]>>([])
      const exit = yield* Effect.exit(runRounds([fakeArm("ok", log, () => 1), boom], { rounds: 3 }))
      expect(exit).toEqual(Exit.fail("arm failed: no samples"))
      const bad = yield* Effect.flip(runRounds([boom, boom], { rounds: 1 }))
      expect(bad).toBeInstanceOf(RoundsConfigError)
      expect(String((bad as RoundsConfigError).message)).toContain("distinct")
      const zero = yield* Effect.flip(runRounds([boom], { rounds: 0 }))
      expect(String((zero as RoundsConfigError).message)).toContain("positive integer")
    }))
})
