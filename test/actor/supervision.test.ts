import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Fiber, Logger, Option, Schedule, TestClock } from "effect"
import { Actor, ActorCrashed, ActorStopped, Supervision, SupervisionEvent } from "../../src/actor/index.js"
import { Account, accountHandlers, Balance, Crash, Deposit, emptyAccount } from "./fixtures/account.js"

/** Waits (on the test clock's own terms) until some fiber sleeps, i.e. the supervisor is pausing before a restart. */
const untilSleeping = Effect.repeat(Effect.zipRight(Effect.yieldNow(), TestClock.sleeps()), { until: (s) => s.length > 0 })

const capture = () => {
  const events: Array<SupervisionEvent> = []
  const logs: Array<string> = []
  const logger = Logger.make(({ logLevel, message }) => {
    logs.push(`${logLevel.label} ${(Array.isArray(message) ? message : [message]).join(" ")}`)
  })
  return { events, logs, onEvent: (e: SupervisionEvent) => Effect.sync(() => void events.push(e)), logger: Logger.add(logger) }
}

describe("Supervision", () => {
  it.scoped("restarts with a fresh state after each delay, reports it, and gives up when the schedule ends", () =>
    Effect.gen(function* () {
      const { events, logs, onEvent, logger } = capture()
      const account = yield* Actor.make({
        name: "flaky",
        protocol: Account,
        capacity: 8,
        initial: emptyAccount,
        handlers: accountHandlers,
        supervision: Supervision.restart(Schedule.spaced("1 second").pipe(Schedule.intersect(Schedule.recurs(2))), onEvent)
      }).pipe(Effect.provide(logger))
      expect(yield* account.ask(new Deposit({ amount: 50 }))).toBe(50)

      for (const attempt of [1, 2]) {
        const crash = yield* account.post(new Crash({ why: `boom ${attempt}` }))
        const queued = yield* Effect.fork(Effect.flatten(yield* account.post(new Balance()))) // the reply, or its failure
        const crashed = yield* Effect.flip(crash)
        expect(crashed).toEqual(new ActorCrashed({ actor: "flaky", request: "Crash", defect: `Error: boom ${attempt}` }))
        yield* untilSleeping
        yield* TestClock.adjust("999 millis")
        expect(Option.isNone(yield* Fiber.poll(queued))).toBe(true) // still pausing before the restart
        yield* TestClock.adjust("1 millis")
        // The queued message survived the crash and met a fresh state.
        expect(yield* Fiber.join(queued)).toBe(0)
        expect(events.at(-1)).toEqual(SupervisionEvent.Restarted({ actor: "flaky", attempt, defect: `Error: boom ${attempt}` }))
        expect(logs).toContain(`WARN actor flaky crashed (Error: boom ${attempt}); restart ${attempt}`)
      }

      const crash = yield* account.post(new Crash({ why: "boom 3" }))
      const pending = yield* account.post(new Balance())
      expect(yield* Effect.flip(crash)).toBeInstanceOf(ActorCrashed)
      const stopped = yield* Effect.flip(pending)
      expect(stopped).toEqual(new ActorStopped({ actor: "flaky", reason: "crashed: Error: boom 3; gave up after 2 restart(s)" }))
      expect(yield* Effect.flip(account.ask(new Balance()))).toEqual(stopped)
      expect(events.map((e) => e._tag)).toEqual(["Restarted", "Restarted", "GaveUp"])
      expect(events[2]).toEqual(SupervisionEvent.GaveUp({ actor: "flaky", restarts: 2, defect: "Error: boom 3" }))
      expect(logs).toContain("ERROR actor flaky crashed (Error: boom 3); supervision gave up after 2 restart(s)")
      yield* account.stop // returns at once for an actor that already ended
    }))

  it.scoped("without supervision the first crash stops the actor", () =>
    Effect.gen(function* () {
      const account = yield* Actor.make({ name: "once", protocol: Account, capacity: 4, initial: emptyAccount, handlers: accountHandlers })
      expect(yield* Effect.flip(account.ask(new Crash({ why: "bad state" })))).toBeInstanceOf(ActorCrashed)
      const e = yield* Effect.flip(account.ask(new Deposit({ amount: 1 })))
      expect(e).toBeInstanceOf(ActorStopped)
      expect(e.message).toContain("gave up after 0 restart(s)")
    }))

  it.scoped("the schedule sees each crash's cause, so a policy can restart some defects and not others", () =>
    Effect.gen(function* () {
      const { events, onEvent } = capture()
      const fatal = (cause: Cause.Cause<unknown>) => Supervision.describeDefect(cause).includes("fatal")
      const account = yield* Actor.make({
        name: "picky",
        protocol: Account,
        capacity: 4,
        initial: emptyAccount,
        handlers: accountHandlers,
        supervision: Supervision.restart(Schedule.recurWhile((cause: Cause.Cause<unknown>) => !fatal(cause)), onEvent)
      })
      for (let i = 0; i < 3; i++) yield* Effect.flip(account.ask(new Crash({ why: "transient" })))
      expect(yield* account.ask(new Deposit({ amount: 5 }))).toBe(5)
      yield* Effect.flip(account.ask(new Crash({ why: "fatal corruption" })))
      expect(yield* Effect.flip(account.ask(new Balance()))).toBeInstanceOf(ActorStopped)
      expect(events.map((e) => e._tag)).toEqual(["Restarted", "Restarted", "Restarted", "GaveUp"])
    }))
})
