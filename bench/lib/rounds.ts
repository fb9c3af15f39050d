/**
 * Paired, order-swapped benchmark rounds (DESIGN.md "Benchmarks and measurement").
 *
 * Machine drift on a shared VM moves single runs by 20–30 % between minutes, so
 * arms are never compared across rounds: each round runs every arm once, the
 * order changes every round so drift lands on all arms alike, and the verdict is
 * the median of per-round ratios against a baseline arm. Medians and quartiles are
 * nearest-rank (src/loadgen/quantile.ts), as everywhere else in the benchmarks.
 *
 * Orders come from a Williams design (a balanced Latin square): with two arms it
 * is simply A B, B A, A B, …; with k arms every arm takes every position equally
 * often and, for even k, follows every other arm exactly once per k rounds (odd k
 * needs 2k rounds, the rows and their mirror images).
 *
 * The plan itself is a `Schedule` (`roundsPlan`): each step yields a run's round, arm and its
 * round's arm order, spaced by the cool-down, so a script can repeat its own effect on it or
 * combine it with other schedules; `runRounds` is that repeat plus the summaries.
 */
import { Data, Duration, Effect, Ref, Schedule } from "effect"
import { median, type Spread, spread } from "../../src/loadgen/quantile.js"

export { median, type Spread, spread }

/** One arm of a comparison: a name and the effect that measures it once. */
export interface Arm<A, E = never, R = never> {
  readonly name: string
  readonly run: (ctx: RunContext) => Effect.Effect<A, E, R>
}

/** Where a run sits in the plan; `round` is 0 for the discarded warmup round, else 1-based. */
export interface RunContext {
  readonly round: number
  readonly position: number
  readonly warmup: boolean
}

export interface RunRecord<A> extends RunContext {
  readonly arm: string
  readonly result: A
}

export interface RatioSpread extends Spread {
  /** The per-round `arm / baseline` values, in round order (NaN where a value was missing). */
  readonly perRound: ReadonlyArray<number>
}

export type MetricFns<A> = Readonly<Record<string, (a: A) => number | null | undefined>>

export interface RoundsOptions<A> {
  /** Measured rounds (each runs every arm once). */
  readonly rounds: number
  /** Pause between consecutive runs (not after the last); default none. */
  readonly coolDown?: Duration.DurationInput
  /** Run one extra round first and discard it (JIT, page cache, TCP warm-up). */
  readonly warmupRound?: boolean
  /** Which numbers to summarise; default every finite numeric own property of the results. */
  readonly metrics?: MetricFns<A>
  /** Arm the ratios are taken against; default the first arm. */
  readonly baseline?: string
  /** Called after every run, warmup included, e.g. to print progress. */
  readonly onRun?: (record: RunRecord<A>) => Effect.Effect<void>
}

export interface RoundsReport<A> {
  readonly arms: ReadonlyArray<string>
  readonly baseline: string
  /** Arm order of each measured round, `orders[i]` for round i + 1. */
  readonly orders: ReadonlyArray<ReadonlyArray<string>>
  /** Measured runs only (the warmup round is not here), in execution order. */
  readonly runs: ReadonlyArray<RunRecord<A>>
  /** `byArm[arm][round - 1]` = that arm's result in that round. */
  readonly byArm: Readonly<Record<string, ReadonlyArray<A>>>
  /** `summary[arm][metric]` over the measured rounds. */
  readonly summary: Readonly<Record<string, Readonly<Record<string, Spread>>>>
  /** `ratios[arm][metric]`: per-round `arm / baseline`, for every arm but the baseline. */
  readonly ratios: Readonly<Record<string, Readonly<Record<string, RatioSpread>>>>
}

/** Indices of the arms in the order they run in `round` (0-based), Williams design. */
export const roundOrder = (arms: number, round: number): ReadonlyArray<number> => {
  if (arms <= 1) return arms === 1 ? [0] : []
  const first: Array<number> = [0]
  for (let lo = 1, hi = arms - 1; first.length < arms; ) {
    first.push(lo++)
    if (first.length < arms) first.push(hi--)
  }
  const period = arms % 2 === 0 ? arms : 2 * arms
  const r = round % period
  const row = first.map((a) => (a + (r % arms)) % arms)
  return r >= arms ? row.reverse() : row
}

const numericKeys = <A>(results: ReadonlyArray<A>): MetricFns<A> => {
  const keys = new Set<string>()
  for (const r of results) {
    if (r === null || typeof r !== "object") continue
    for (const [k, v] of Object.entries(r)) if (typeof v === "number") keys.add(k)
  }
  const fns: Record<string, (a: A) => number | undefined> = {}
  for (const k of keys) fns[k] = (a) => (a as Record<string, unknown>)[k] as number | undefined
  return fns
}

const num = (v: number | null | undefined): number => (typeof v === "number" ? v : NaN)

/** Summaries of completed runs; exported so scripts can summarise runs they stored earlier. */
export const summarise = <A>(
  arms: ReadonlyArray<string>,
  byArm: Readonly<Record<string, ReadonlyArray<A>>>,
  baseline: string,
  metrics?: MetricFns<A>
): Pick<RoundsReport<A>, "summary" | "ratios"> => {
  const fns = metrics ?? numericKeys(arms.flatMap((a) => byArm[a] ?? []))
  const summary: Record<string, Record<string, Spread>> = {}
  const ratios: Record<string, Record<string, RatioSpread>> = {}
  const base = byArm[baseline] ?? []
  for (const arm of arms) {
    const results = byArm[arm] ?? []
    summary[arm] = {}
    for (const [metric, f] of Object.entries(fns)) summary[arm]![metric] = spread(results.map((r) => num(f(r))))
    if (arm === baseline) continue
    ratios[arm] = {}
    for (const [metric, f] of Object.entries(fns)) {
      const perRound = results.map((r, i) => {
        const b = i < base.length ? num(f(base[i]!)) : NaN
        const v = num(f(r))
        return b === 0 || !Number.isFinite(b) || !Number.isFinite(v) ? NaN : v / b
      })
      ratios[arm]![metric] = { ...spread(perRound), perRound }
    }
  }
  return { summary, ratios }
}

/** One run of the plan: where it sits, which arm it measures, and its round's whole arm order. */
export interface PlanStep extends RunContext {
  readonly armIndex: number
  readonly order: ReadonlyArray<number>
}

export interface PlanOptions {
  readonly rounds: number
  readonly warmupRound?: boolean
  readonly coolDown?: Duration.DurationInput
}

/**
 * The order-swapped plan as a Schedule. Run it with `Effect.repeat(run, plan.schedule)`: the first
 * run is `steps[0]` and starts at once; recurrence i yields `steps[i]` once the cool-down after the
 * previous run has passed, and the schedule ends after the last step (no trailing cool-down).
 * Inside the repeated effect, `current` is the step being run. Being a Schedule, the plan composes:
 * e.g. `Schedule.whileOutput(plan.schedule, (s) => s.round <= 2)` stops after two rounds.
 */
export interface RoundsPlan {
  readonly steps: ReadonlyArray<PlanStep>
  readonly schedule: Schedule.Schedule<PlanStep>
  readonly current: Effect.Effect<PlanStep>
}

export const roundsPlan = (arms: number, options: PlanOptions): RoundsPlan => {
  const steps: Array<PlanStep> = []
  const addRound = (order: ReadonlyArray<number>, round: number, warmup: boolean) =>
    order.forEach((armIndex, position) => steps.push({ round, position, warmup, armIndex, order }))
  if (options.warmupRound) addRound(roundOrder(arms, 0), 0, true)
  for (let r = 0; r < options.rounds; r++) addRound(roundOrder(arms, r), r + 1, false)
  const schedule = Schedule.unfold(1, (i) => i + 1).pipe(
    Schedule.whileOutput((i) => i < steps.length),
    // The final (stopping) decision outputs the last step too, so Effect.repeat returns it.
    Schedule.map((i) => steps[Math.min(i, steps.length - 1)]!),
    Schedule.zipLeft(Schedule.spaced(options.coolDown ?? Duration.zero))
  )
  // Effect.repeat provides the output that led to each repetition; the first run has none yet.
  const current = Effect.map(Schedule.CurrentIterationMetadata, (meta) =>
    meta.recurrence === 0 ? steps[0]! : (meta.output as PlanStep)
  )
  return { steps, schedule, current }
}

export class RoundsConfigError extends Data.TaggedError("RoundsConfigError")<{ readonly message: string }> {}

/**
 * Runs every arm once per round for `rounds` rounds in balanced, changing orders,
 * sleeping `coolDown` between consecutive runs; fails with the first arm failure.
 */
export const runRounds = <A, E, R>(
  arms: ReadonlyArray<Arm<A, E, R>>,
  options: RoundsOptions<A>
): Effect.Effect<RoundsReport<A>, E | RoundsConfigError, R> =>
  Effect.gen(function* () {
    const names = arms.map((a) => a.name)
    if (arms.length === 0) return yield* Effect.fail(new RoundsConfigError({ message: "rounds need at least one arm" }))
    if (new Set(names).size !== names.length) {
      return yield* Effect.fail(new RoundsConfigError({ message: `arm names must be distinct, got ${names.join(", ")}` }))
    }
    if (!Number.isInteger(options.rounds) || options.rounds < 1) {
      return yield* Effect.fail(new RoundsConfigError({ message: `rounds must be a positive integer, got ${options.rounds}` }))
    }
    const baseline = options.baseline ?? names[0]!
    if (!names.includes(baseline)) {
      return yield* Effect.fail(new RoundsConfigError({ message: `baseline ${baseline} is not one of the arms (${names.join(", ")})` }))
    }
    const plan = roundsPlan(arms.length, options)
    const done = yield* Ref.make<ReadonlyArray<RunRecord<A>>>([])
    const run = Effect.gen(function* () {
      const { round, position, warmup, armIndex } = yield* plan.current
      const arm = arms[armIndex]!
      const result = yield* arm.run({ round, position, warmup })
      const record: RunRecord<A> = { round, position, warmup, arm: arm.name, result }
      yield* Ref.update(done, (rs) => [...rs, record])
      if (options.onRun) yield* options.onRun(record)
    })
    yield* Effect.repeat(run, plan.schedule)

    const runs = (yield* Ref.get(done)).filter((r) => !r.warmup)
    const byArm: Record<string, Array<A>> = Object.fromEntries(names.map((n) => [n, [] as Array<A>]))
    for (const r of runs) byArm[r.arm]!.push(r.result)
    const orders = plan.steps.filter((s) => !s.warmup && s.position === 0).map((s) => s.order.map((i) => names[i]!))
    return { arms: names, baseline, orders, runs, byArm, ...summarise(names, byArm, baseline, options.metrics) }
  })
