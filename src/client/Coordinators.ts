/**
 * The client's coordinators: the `coordinator` setting is one `host:port` or a
 * comma-separated list of them. A request goes to the entry in use; when it does
 * not answer (connect refused, connection lost, no reply within the control
 * timeout, a broken reply) or refuses because it is not ready (cut off from its
 * cluster state store) the next entries are asked in turn, and the first one
 * that answers becomes the entry in use until it fails in turn. Moving is logged
 * and counted; when no entry answers the client counts as cut off from the
 * coordinators (the membership and stat caches then fall back, see
 * MembershipCache.ts and StatCache.ts) until one answers again.
 */
import { ConfigError, Effect } from "effect"
import type { ControlMessage } from "../protocol/index.js"
import { formatHostPort, parseHostPortList } from "../transport/address.js"
import { ControlChannel, type ControlError } from "../transport/ControlChannel.js"
import { controlTlsFilesOf } from "../transport/controlTls.js"
import { ClientConfig } from "./ClientConfig.js"
import { CoordinatorUnavailable } from "./errors.js"

export interface CoordinatorCounters {
  /** The entry requests go to first (the last one that answered). */
  readonly coordinator: string
  readonly coordinatorReachable: boolean
  /** Milliseconds since no coordinator answered, while none does. */
  readonly coordinatorDownForMs: number | undefined
  /** Requests no coordinator answered. */
  readonly coordinatorFailures: number
  /** Times the entry in use stopped answering and another one took over. */
  readonly coordinatorFailovers: number
}

/** The coordinator setting as dial addresses, or a config error saying what a valid one looks like. */
export const coordinatorList = (setting: string): Effect.Effect<ReadonlyArray<string>, ConfigError.ConfigError> => {
  const list = parseHostPortList(setting)
  return list === undefined
    ? Effect.fail(
        ConfigError.InvalidData(
          ["TALON_CLIENT_COORDINATOR"],
          `coordinator must be host:port or a comma-separated list of them, e.g. 10.0.0.1:7000,10.0.0.2:7000 (got ${JSON.stringify(setting)})`
        )
      )
    : Effect.succeed(list.map((hp) => formatHostPort(hp.host, hp.port)))
}

/**
 * A coordinator that cannot follow its state store answers every membership,
 * placement and status request with `Ack(false, "coordinator not ready: ...")`
 * (Talon's wire has no other signal for it). That is this coordinator being
 * unavailable, not an answer: another entry of the list may well be ready.
 */
export const NOT_READY_PREFIX = "coordinator not ready"

/** The reason text when `reply` is a not-ready refusal, else undefined. */
export const notReadyRefusal = (reply: ControlMessage): string | undefined =>
  reply._tag === "Ack" && !reply.ok && reply.detail !== null && reply.detail.startsWith(NOT_READY_PREFIX) ? reply.detail : undefined

export class Coordinators extends Effect.Service<Coordinators>()("talon/client/Coordinators", {
  scoped: Effect.gen(function* () {
    const options = yield* ClientConfig
    const addresses = yield* coordinatorList(options.coordinator)
    const channels = yield* Effect.forEach(addresses, (address) =>
      ControlChannel.make(address, {
        requestTimeout: `${options.controlTimeoutMs} millis`,
        connectTimeout: `${options.connectTimeoutMs} millis`,
        // With a single coordinator a lost connection is retried on it (it may be restarting);
        // with several, once, and then the next entry is asked.
        retries: addresses.length > 1 ? 1 : 2,
        tls: controlTlsFilesOf(options)
      })
    )
    const all = addresses.join(",")
    // Counters are read synchronously (no runtime call), so the clock is captured once.
    const clock = yield* Effect.clock
    const now = (): number => clock.unsafeCurrentTimeMillis()
    let active = 0
    let downSince: number | undefined
    let failures = 0
    let failovers = 0

    const unavailable = (detail: string, cause?: ControlError) =>
      new CoordinatorUnavailable({ coordinator: all, detail, cause })

    const answered = (index: number, problems: ReadonlyArray<string>): Effect.Effect<void> =>
      Effect.suspend(() => {
        const logs: Array<Effect.Effect<void>> = []
        if (index !== active) {
          const from = addresses[active]!
          active = index
          failovers++
          logs.push(
            Effect.logWarning(
              `coordinator ${from} does not answer (${problems.join("; ")}): moved to coordinator ${addresses[index]}`
            )
          )
        }
        if (downSince !== undefined) {
          logs.push(Effect.logInfo(`coordinator ${addresses[index]} answers again after ${now() - downSince} ms without a coordinator`))
          downSince = undefined
        }
        return Effect.all(logs, { discard: true })
      })

    const noneAnswered = (problems: ReadonlyArray<string>): Effect.Effect<void> =>
      Effect.suspend(() => {
        failures++
        if (downSince !== undefined) return Effect.void
        downSince = now()
        const who = addresses.length > 1 ? `no coordinator of ${all} answers` : `coordinator ${all} does not answer`
        return Effect.logWarning(
          `${who} (${problems.join("; ")}): reads go on with the last membership for up to ${options.staleLimitMs} ms and stats come from workers; the coordinators are retried in the background`
        )
      })

    /**
     * One request, to the entry in use and then to the others in turn until one answers. A
     * `probe` (a message an older coordinator may not know) that none answers is not counted
     * or logged as an outage: the caller asks something else next.
     */
    const ask = (message: ControlMessage, probe = false): Effect.Effect<ControlMessage, CoordinatorUnavailable> =>
      Effect.suspend(() => {
        const start = active
        const problems: Array<string> = []
        const attempt = (i: number): Effect.Effect<ControlMessage, CoordinatorUnavailable> => {
          const index = (start + i) % addresses.length
          return channels[index]!.request(message).pipe(
            Effect.flatMap((reply) => {
              const refused = notReadyRefusal(reply)
              return refused === undefined ? Effect.succeed(reply) : Effect.fail({ message: refused, cause: undefined })
            }),
            Effect.tap(() => answered(index, problems)),
            Effect.catchAll((e: { readonly message: string; readonly cause?: unknown }) => {
              problems.push(addresses.length > 1 ? `${addresses[index]}: ${e.message}` : e.message)
              if (i + 1 < addresses.length) return attempt(i + 1)
              const cause = "_tag" in e ? (e as ControlError) : undefined
              const failed = Effect.fail(unavailable(problems.join("; "), cause))
              return probe ? failed : Effect.zipRight(noneAnswered(problems), failed)
            })
          )
        }
        return attempt(0)
      })

    const unexpected = (what: string, reply: ControlMessage): CoordinatorUnavailable =>
      unavailable(
        `unexpected reply to ${what}: ${reply._tag === "Ack" ? `Ack(${reply.ok}${reply.detail === null ? "" : `, ${reply.detail}`})` : reply._tag}`
      )

    return {
      /** Every entry of the setting, in order. */
      addresses,
      ask,
      unexpected,
      /** The failure a caller reports when it did not even try (the coordinators are known down). */
      unavailable,
      /** Whether the last request was answered by some coordinator. */
      reachable: (): boolean => downSince === undefined,
      counters: (): CoordinatorCounters => ({
        coordinator: addresses[active]!,
        coordinatorReachable: downSince === undefined,
        coordinatorDownForMs: downSince === undefined ? undefined : now() - downSince,
        coordinatorFailures: failures,
        coordinatorFailovers: failovers
      })
    }
  })
}) {}
