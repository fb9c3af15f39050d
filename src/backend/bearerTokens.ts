/**
 * Short-lived access tokens (OAuth bearer tokens, STS session credentials) shared by every
 * request of one backend: fetched on first use, refreshed in the background before they
 * expire, and re-fetched at once when the origin refuses one. Time comes from `Clock`, so
 * tests move it with TestClock. The secret is held in a `Redacted` and never logged: log
 * lines and errors name the source and the lifetime only.
 */
import { Clock, Data, Duration, Effect, Option, Redacted, type Scope, SynchronizedRef } from "effect"

/** A secret with the instant (epoch ms, by `Clock`) after which the origin refuses it. */
export interface Expiring<A> {
  readonly value: A
  readonly expiresAtMs: number
}

/** The token endpoint refused or failed; `retryable` when a later attempt may succeed. */
export class CredentialError extends Data.TaggedError("CredentialError")<{
  /** Which flow, e.g. "GCE metadata server at 169.254.169.254". */
  readonly source: string
  readonly retryable: boolean
  readonly detail: string
}> {
  override get message() {
    return `could not get credentials from ${this.source}: ${this.detail}`
  }
}

/** Where tokens come from: one named fetch (the name appears in logs and errors, never the token). */
export interface TokenSource<A> {
  readonly name: string
  readonly fetch: Effect.Effect<Expiring<A>, CredentialError>
}

export interface CachedTokens<A> {
  readonly source: string
  /** A value valid now: the cached one, or a fresh one when none is (or it is about to expire). */
  readonly get: Effect.Effect<A, CredentialError>
  /** Drops the cached value (the origin refused it), so the next `get` fetches. Safe from plain callbacks. */
  readonly invalidate: () => void
}

/** Refresh when a quarter of the lifetime, at most 5 minutes, is left: long before expiry, yet not constantly for short-lived tokens. */
const refreshMargin = (lifetimeMs: number): number => Math.min(5 * 60_000, Math.max(0, lifetimeMs) / 4)

interface Slot<A> {
  readonly value: A
  readonly expiresAtMs: number
  readonly refreshAtMs: number
}

/**
 * The cache over `source`. A background fiber (living in the scope) renews the value at its
 * refresh point; `get` fetches itself only when nothing valid is held (first use, a refused
 * token, a failed renewal), and concurrent callers then share one fetch.
 */
export const cachedTokens = <A>(source: TokenSource<A>): Effect.Effect<CachedTokens<A>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const slot = yield* SynchronizedRef.make<Option.Option<Slot<A>>>(Option.none())
    let invalidated = false

    const fetchNew: Effect.Effect<Slot<A>, CredentialError> = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const got = yield* source.fetch
      const lifetime = got.expiresAtMs - now
      yield* Effect.logDebug(`${source.name}: new credentials, valid for ${Math.round(lifetime / 1000)} s`)
      return { value: got.value, expiresAtMs: got.expiresAtMs, refreshAtMs: got.expiresAtMs - refreshMargin(lifetime) }
    })

    /** The held value if it may still be used; otherwise a fetch, under the lock. */
    const current = (force: boolean): Effect.Effect<A, CredentialError> =>
      SynchronizedRef.modifyEffect(slot, (held) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          if (invalidated) {
            invalidated = false
            held = Option.none()
          }
          if (!force && Option.isSome(held) && now < held.value.refreshAtMs) return [held.value.value, held] as const
          const next = yield* Effect.either(fetchNew)
          if (next._tag === "Right") return [next.right.value, Option.some(next.right)] as const
          // The endpoint is down, but the held value has not expired: keep using it.
          if (!force && Option.isSome(held) && now < held.value.expiresAtMs) return [held.value.value, held] as const
          return yield* Effect.fail(next.left)
        })
      )

    // Renewal sleeps by Clock until the refresh point. A failed renewal leaves the old value
    // in use (it has not expired yet) and is tried again shortly, bounded by the expiry.
    // It starts with the first value, so an unused backend never wakes up.
    const renew: Effect.Effect<void> = Effect.gen(function* () {
      const held = yield* SynchronizedRef.get(slot)
      const now = yield* Clock.currentTimeMillis
      if (Option.isNone(held)) return yield* Effect.sleep(Duration.seconds(1))
      const wait = held.value.refreshAtMs - now
      if (wait > 0) return yield* Effect.sleep(Duration.millis(wait))
      yield* current(true).pipe(
        Effect.catchAll((error) =>
          Effect.logWarning(`${source.name}: renewal failed, retrying: ${error.detail}`).pipe(
            Effect.zipRight(Effect.sleep(Duration.millis(Math.max(1_000, Math.min(10_000, (held.value.expiresAtMs - now) / 4)))))
          )
        )
      )
    })
    const scope = yield* Effect.scope
    let renewing = false
    const startRenewal = Effect.suspend(() => {
      if (renewing) return Effect.void
      renewing = true
      return Effect.asVoid(Effect.forkIn(Effect.forever(renew), scope))
    })

    return {
      source: source.name,
      get: Effect.tap(current(false), () => startRenewal),
      invalidate: () => {
        invalidated = true
      }
    }
  })

/** A bearer token as the `authorization` header value. */
export const bearer = (token: Redacted.Redacted<string>): string => `Bearer ${Redacted.value(token)}`
