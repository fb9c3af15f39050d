/**
 * A fetch shared by every caller that asks while it runs (one membership
 * refresh, one StatObject per object). It runs on a fiber of the client's scope,
 * detached from the callers so an interrupted caller cannot fail the others, and
 * its Deferred always completes: with the fetch's exit, or, when the client's
 * scope closed first (the fiber interrupted, possibly before it started), with
 * `closed()`, so no caller waits forever.
 */
import { Deferred, type Effect, Exit, type Fiber, FiberId } from "effect"

export type ScopedRun = <A, E>(effect: Effect.Effect<A, E>) => Fiber.RuntimeFiber<A, E>

export const runShared = <A, E>(
  run: ScopedRun,
  effect: Effect.Effect<A, E>,
  hooks: {
    /** Called with the Deferred before the fiber starts (record it as in flight). */
    readonly started: (pending: Deferred.Deferred<A, E>) => void
    /** Called once the fiber has ended, before the Deferred completes. */
    readonly ended: () => void
    readonly closed: () => E
  }
): Deferred.Deferred<A, E> => {
  const pending = Deferred.unsafeMake<A, E>(FiberId.none)
  hooks.started(pending)
  run(effect).addObserver((exit) => {
    hooks.ended()
    Deferred.unsafeDone(pending, Exit.isInterrupted(exit) ? Exit.fail(hooks.closed()) : exit)
  })
  return pending
}
