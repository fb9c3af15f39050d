import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Redacted, TestClock } from "effect"
import { cachedTokens, CredentialError, type TokenSource } from "../../src/backend/bearerTokens.js"

/** A source that issues `tok-1`, `tok-2`, … valid for `lifetimeMs` from the (test) clock's now. */
const countingSource = (lifetimeMs: number, fail?: () => boolean) => {
  let n = 0
  const source: TokenSource<Redacted.Redacted<string>> = {
    name: "a test token endpoint",
    fetch: Effect.gen(function* () {
      if (fail?.()) return yield* new CredentialError({ source: "a test token endpoint", retryable: true, detail: "HTTP 503" })
      n++
      const now = yield* Clock.currentTimeMillis
      return { value: Redacted.make(`tok-${n}`), expiresAtMs: now + lifetimeMs }
    })
  }
  return { source, issued: () => n }
}

const HOUR = 3_600_000

describe("cachedTokens", () => {
  it.scoped("one fetch serves every caller until the refresh point; the background renews before expiry", () =>
    Effect.gen(function* () {
      const { source, issued } = countingSource(HOUR)
      const tokens = yield* cachedTokens(source)
      const first = yield* Effect.all([tokens.get, tokens.get, tokens.get], { concurrency: "unbounded" })
      expect(first.map(Redacted.value)).toEqual(["tok-1", "tok-1", "tok-1"])
      expect(issued()).toBe(1)
      // 54 minutes in: still the first token, no renewal yet (the margin is 5 minutes).
      yield* TestClock.adjust("54 minutes")
      expect(Redacted.value(yield* tokens.get)).toBe("tok-1")
      expect(issued()).toBe(1)
      // Past 55 minutes the renewal runs by itself, before the hour is up.
      yield* TestClock.adjust("90 seconds")
      yield* Effect.yieldNow()
      expect(issued()).toBe(2)
      expect(Redacted.value(yield* tokens.get)).toBe("tok-2")
    })
  )

  it.scoped("short-lived tokens renew with a quarter of their life left", () =>
    Effect.gen(function* () {
      const { source, issued } = countingSource(60_000)
      const tokens = yield* cachedTokens(source)
      yield* tokens.get
      yield* TestClock.adjust("44 seconds")
      expect(issued()).toBe(1)
      yield* TestClock.adjust("2 seconds")
      yield* Effect.yieldNow()
      expect(issued()).toBe(2)
    })
  )

  it.scoped("invalidate (the origin refused the token) makes the next get fetch", () =>
    Effect.gen(function* () {
      const { source, issued } = countingSource(HOUR)
      const tokens = yield* cachedTokens(source)
      yield* tokens.get
      tokens.invalidate()
      expect(Redacted.value(yield* tokens.get)).toBe("tok-2")
      expect(issued()).toBe(2)
    })
  )

  it.scoped("a failed renewal keeps the still-valid token and is retried; the token never shows in the error", () =>
    Effect.gen(function* () {
      let down = false
      const { source, issued } = countingSource(HOUR, () => down)
      const tokens = yield* cachedTokens(source)
      yield* tokens.get
      down = true
      yield* TestClock.adjust("56 minutes")
      yield* Effect.yieldNow()
      expect(issued()).toBe(1)
      // The renewal failed; callers still get the old token while it is inside its life.
      expect(Redacted.value(yield* tokens.get)).toBe("tok-1")
      // Once it has expired, a get fails, naming the source and never the token.
      yield* TestClock.adjust("4 minutes")
      const got = yield* Effect.either(tokens.get)
      expect(got._tag).toBe("Left")
      if (got._tag === "Left") {
        expect(got.left.message).toBe("could not get credentials from a test token endpoint: HTTP 503")
        expect(got.left.message).not.toContain("tok-")
      }
      down = false
      yield* TestClock.adjust("15 seconds")
      yield* Effect.yieldNow()
      expect(issued()).toBe(2)
      expect(Redacted.value(yield* tokens.get)).toBe("tok-2")
    })
  )
})
