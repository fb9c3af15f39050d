import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, TestClock } from "effect"
import { eventually, eventuallyAsync } from "./eventually.js"

describe("eventually", () => {
  it.effect("retries a failing expect until it holds, pausing on the live clock under TestClock", () =>
    Effect.gen(function* () {
      let calls = 0
      const value = yield* eventually(
        Effect.sync(() => {
          calls++
          expect(calls).toBeGreaterThanOrEqual(3)
          return calls
        }),
        { every: "1 millis" }
      )
      expect(value).toBe(3)
      // The test's own clock did not move: the pauses were real.
      expect(yield* TestClock.currentTimeMillis).toBe(0)
    })
  )

  it.effect("gives up after `within`, saying what never held and how the last try failed", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(
        eventually(Effect.fail("still 2 connections open"), { what: "every connection closed", within: "30 millis", every: "5 millis" })
      )
      expect(Exit.isFailure(exit)).toBe(true)
      const message = Exit.isFailure(exit) ? String(exit.cause.toString()) : ""
      expect(message).toContain("every connection closed did not hold within 30ms")
      expect(message).toContain("still 2 connections open")
    })
  )

  it("has an async form for async tests", async () => {
    let calls = 0
    expect(await eventuallyAsync(async () => ++calls >= 2 || Promise.reject(new Error("not yet")), { every: "1 millis" })).toBe(true)
    await expect(eventuallyAsync(() => Promise.reject(new Error("never")), { within: "20 millis", every: "5 millis" })).rejects.toThrow(/never/)
  })
})
