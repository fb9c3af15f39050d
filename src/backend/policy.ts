import { Config, Duration, Effect, Schedule } from "effect"
import type { BackendError } from "./BackendStore.js"

/** How a backend talks to its origin: timeouts, retries and connection reuse. */
export interface RequestPolicy {
  /** Time allowed for the response head, and for each body chunk while the reader is waiting. */
  readonly timeoutMs: number
  /** Extra attempts after the first, for retryable failures only. */
  readonly retries: number
  readonly retryBaseMs: number
  readonly retryMaxMs: number
  /** Keep-alive sockets per origin host; range reads run many requests at once. */
  readonly maxSockets: number
}

export const defaultPolicy: RequestPolicy = {
  timeoutMs: 30_000,
  retries: 4,
  retryBaseMs: 100,
  retryMaxMs: 5_000,
  maxSockets: 128
}

/** `<prefix>_TIMEOUT_MS`, `_RETRIES`, `_RETRY_BASE_MS`, `_RETRY_MAX_MS`, `_MAX_SOCKETS`. */
export const policyConfig = (prefix: string): Config.Config<RequestPolicy> =>
  Config.all({
    timeoutMs: Config.integer(`${prefix}_TIMEOUT_MS`).pipe(Config.withDefault(defaultPolicy.timeoutMs)),
    retries: Config.integer(`${prefix}_RETRIES`).pipe(Config.withDefault(defaultPolicy.retries)),
    retryBaseMs: Config.integer(`${prefix}_RETRY_BASE_MS`).pipe(Config.withDefault(defaultPolicy.retryBaseMs)),
    retryMaxMs: Config.integer(`${prefix}_RETRY_MAX_MS`).pipe(Config.withDefault(defaultPolicy.retryMaxMs)),
    maxSockets: Config.integer(`${prefix}_MAX_SOCKETS`).pipe(Config.withDefault(defaultPolicy.maxSockets))
  })

/** Exponential backoff with jitter (0.5×–1.5×), capped, for at most `retries` more attempts. */
export const retrySchedule = (policy: RequestPolicy): Schedule.Schedule<unknown, unknown> =>
  Schedule.exponential(Duration.millis(policy.retryBaseMs), 2).pipe(
    Schedule.jitteredWith({ min: 0.5, max: 1.5 }),
    Schedule.modifyDelay((_, delay) => Duration.min(delay, Duration.millis(policy.retryMaxMs))),
    Schedule.intersect(Schedule.recurs(policy.retries))
  )

/** Only transient origin failures are worth another attempt; 404, 412, 416 and 403 never are. */
export const isRetryable = (error: BackendError): boolean =>
  error._tag === "BackendRequestError" && error.retryable

export const isRetryableStatus = (status: number): boolean =>
  status === 408 || status === 429 || (status >= 500 && status !== 501 && status !== 505)

export const withRetries = <A, R>(
  policy: RequestPolicy,
  effect: Effect.Effect<A, BackendError, R>
): Effect.Effect<A, BackendError, R> =>
  Effect.retry(effect, { schedule: retrySchedule(policy), while: isRetryable })
