/**
 * Waiting for something the system under test reaches on its own (a sweep, a heartbeat, a
 * lease running out, a connection closing) by asking again until the answer is right, with
 * a bounded total wait and a failure that says what never happened and why the last try
 * failed. Where an event can be awaited directly (a process exit, a Deferred, a log line),
 * await it instead.
 *
 * The pauses between tries run on the live clock even under `it.effect` (TestClock), so a
 * test that drives its services' time with `TestClock.adjust` can still wait for real I/O;
 * the check itself runs with the test's services.
 */
import { Cause, Data, Duration, Effect, Schedule, TestServices } from "effect"

export class NotEventually extends Data.TaggedError("NotEventually")<{ readonly message: string }> {}

export interface EventuallyOptions {
  /** What is awaited, in words, for the failure message. */
  readonly what?: string
  /** The longest total wait (default 10 seconds). */
  readonly within?: Duration.DurationInput
  /** The pause between tries (default 20 millis). */
  readonly every?: Duration.DurationInput
}

/** `check` until it succeeds; a failure or a defect (a failed `expect`) means "not yet". */
export const eventually = <A, E, R>(check: Effect.Effect<A, E, R>, options: EventuallyOptions = {}): Effect.Effect<A, NotEventually, R> => {
  const within = Duration.decode(options.within ?? "10 seconds")
  const every = options.every ?? "20 millis"
  return Effect.suspend(() => {
    let tries = 0
    const once = Effect.sandbox(Effect.suspend(() => (tries++, check)))
    return TestServices.provideWithLive(once, (self) => Effect.retry(self, Schedule.spaced(every).pipe(Schedule.upTo(within)))).pipe(
      Effect.catchAll((cause) =>
        Effect.fail(
          new NotEventually({
            message: `${options.what ?? "the condition"} did not hold within ${Duration.format(within)} (${tries} tries); the last try: ${Cause.pretty(cause)}`
          })
        )
      )
    )
  })
}

/** `eventually` for an async test: `check` (throwing or rejecting means "not yet") until it resolves. */
export const eventuallyAsync = <A>(check: () => Promise<A> | A, options: EventuallyOptions = {}): Promise<A> =>
  Effect.runPromise(
    eventually(
      Effect.promise(async () => check()),
      options
    )
  )
