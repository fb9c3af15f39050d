/**
 * Supervision: what happens when an actor's handler dies (a defect, not a declared failure).
 *
 * A restart starts a new incarnation with a fresh state from the actor's `initial` (re-run if it
 * is an Effect, so an actor can rebuild from its source of truth). The last committed state is
 * not kept: a handler that died may have half-changed mutable parts of it, and a state that
 * made a handler die once would likely do so again. The mailbox is kept, so messages queued
 * behind the fatal one are handled by the new incarnation in their order.
 *
 * The schedule receives each crash's Cause and decides whether (and after what delay) to
 * restart; once it ends, the actor stops for good and every waiting caller gets `ActorStopped`.
 */
import { Cause, Data, Effect, Exit, Schedule } from "effect"

export type SupervisionEvent = Data.TaggedEnum<{
  /** A new incarnation starts after the `attempt`-th crash since the actor was made. */
  Restarted: { readonly actor: string; readonly attempt: number; readonly defect: string }
  /** The schedule ended: the actor stays stopped after `restarts` restarts. */
  GaveUp: { readonly actor: string; readonly restarts: number; readonly defect: string }
}>
export const SupervisionEvent = Data.taggedEnum<SupervisionEvent>()

export interface Supervision {
  /** Restart policy; its input is the crash's Cause, its delays pause before each restart. */
  readonly schedule: Schedule.Schedule<unknown, Cause.Cause<unknown>>
  /** Called on every restart and on giving up, after the log line. */
  readonly onEvent?: (event: SupervisionEvent) => Effect.Effect<void>
}

/** No restarts: the first crash stops the actor. */
export const none: Supervision = { schedule: Schedule.stop }

/** Restart on `schedule` (e.g. `Schedule.exponential("10 millis").pipe(Schedule.intersect(Schedule.recurs(5)))`). */
export const restart = (
  schedule: Schedule.Schedule<unknown, Cause.Cause<unknown>>,
  onEvent?: (event: SupervisionEvent) => Effect.Effect<void>
): Supervision => (onEvent ? { schedule, onEvent } : { schedule })

/** One line for a crash: the defect's message when it is an Error, else its string form. */
export const describeDefect = (cause: Cause.Cause<unknown>): string => {
  const squashed = Cause.squash(cause)
  if (squashed instanceof Error) return `${squashed.name}: ${squashed.message}`
  return typeof squashed === "string" ? squashed : JSON.stringify(squashed) ?? String(squashed)
}

/**
 * Runs incarnations of an actor until one ends normally or the schedule gives up; returns why
 * the actor stopped. `incarnation` fails (with the crash's Cause) only when its handler died.
 */
export const supervise = <R>(
  actor: string,
  incarnation: Effect.Effect<void, Cause.Cause<unknown>, R>,
  supervision: Supervision
): Effect.Effect<string, never, R> =>
  Effect.gen(function* () {
    const driver = yield* Schedule.driver(supervision.schedule)
    for (let restarts = 0; ; ) {
      const exit = yield* Effect.exit(incarnation)
      if (Exit.isSuccess(exit)) return "stopped"
      const crash = Exit.isFailure(exit) && Cause.isFailType(exit.cause) ? exit.cause.error : exit.cause
      const defect = describeDefect(crash)
      const again = yield* Effect.either(driver.next(crash))
      if (again._tag === "Left") {
        yield* Effect.logError(`actor ${actor} crashed (${defect}); supervision gave up after ${restarts} restart(s)`)
        if (supervision.onEvent) yield* supervision.onEvent(SupervisionEvent.GaveUp({ actor, restarts, defect }))
        return `crashed: ${defect}; gave up after ${restarts} restart(s)`
      }
      restarts++
      yield* Effect.logWarning(`actor ${actor} crashed (${defect}); restart ${restarts}`)
      if (supervision.onEvent) yield* supervision.onEvent(SupervisionEvent.Restarted({ actor, attempt: restarts, defect }))
    }
  })
