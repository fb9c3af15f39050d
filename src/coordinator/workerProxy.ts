/**
 * StatObject and ListObjects answered through a live worker, as Talon's coordinator does:
 * workers hold the origin's credentials, so the coordinator needs none for the one read-only
 * call it would otherwise make itself. Any worker will do (a stat does not depend on where an
 * object's blocks live), which also breaks the circularity a client would hit: it needs a
 * version to place blocks, and placement to pick a worker.
 *
 * Workers are tried in turn under one deadline for the whole request; each attempt gets the
 * time left minus a small reserve per worker still to try, so one silent worker cannot spend
 * the budget of the rest. A worker's refusal (`Ack{ok:false}`) is also tried elsewhere (a
 * worker can advertise before its origin client works); every attempt's error is in the final
 * refusal, so an operator sees which worker failed how.
 */
import { Clock, Effect, type Scope } from "effect"
import type { NodeInfo } from "../core/ids.js"
import type { ControlMessage } from "../protocol/index.js"
import { ControlChannel } from "../transport/ControlChannel.js"
import type { ControlTlsFiles } from "../transport/controlTls.js"

/** Talon's budgets: a listing may drain many origin pages, a stat is one HEAD. */
export const STAT_BUDGET_MS = 5_000
export const LIST_BUDGET_MS = 25_000
/** Time kept back for each worker after the one being tried. */
const RETRY_RESERVE_MS = 1_000
/** Refusal details are bounded, so a cluster of hundreds of broken workers still fits one control frame. */
const MAX_ERRORS_CHARS = 4_096

export interface WorkerProxy {
  /** The first worker's reply to `message`, or an `Ack{ok:false}` naming every attempt's error. */
  readonly ask: (message: ControlMessage) => Effect.Effect<ControlMessage>
}

export interface WorkerProxyOptions {
  /** Workers to ask, live ones first (the registry's healthy, ready members). */
  readonly workers: Effect.Effect<ReadonlyArray<NodeInfo>>
  readonly statBudgetMs?: number
  readonly listBudgetMs?: number
  /** Dial workers over TLS with these files (workers serving --data-tls). */
  readonly tls?: ControlTlsFiles | undefined
}

/** A refusal that is the origin's answer (no such object or bucket): another worker would only repeat it. */
const ORIGIN_ANSWERED = /does not exist|not found|no such/i

const refused = (detail: string): ControlMessage => ({ _tag: "Ack", ok: false, detail })

/** The budget for the worker being tried: the time left, minus a reserve for each later one (never more than a fair share). */
export const attemptBudgetMs = (remainingMs: number, workersLeft: number): number => {
  const fair = remainingMs / workersLeft
  return Math.max(0, remainingMs - Math.min(RETRY_RESERVE_MS, fair) * (workersLeft - 1))
}

export const makeWorkerProxy = (options: WorkerProxyOptions): Effect.Effect<WorkerProxy, never, Scope.Scope> =>
  Effect.gen(function* () {
    // One pipelined channel per worker address, reused across requests; ones whose worker left are closed.
    const channels = new Map<string, ControlChannel>()
    yield* Effect.addFinalizer(() => Effect.forEach(channels.values(), (c) => c.close, { discard: true }))
    const channelFor = (address: string) => {
      let channel = channels.get(address)
      if (channel === undefined) {
        channel = ControlChannel.unsafeMake(address, { retries: 0, connectTimeout: "2 seconds", tls: options.tls })
        channels.set(address, channel)
      }
      return channel
    }
    const prune = (live: ReadonlyArray<NodeInfo>) =>
      Effect.suspend(() => {
        const keep = new Set(live.map((w) => w.address))
        const gone = [...channels.entries()].filter(([address]) => !keep.has(address))
        for (const [address] of gone) channels.delete(address)
        return Effect.forEach(gone, ([, c]) => c.close, { discard: true })
      })
    // Successive requests start at successive workers so no one worker takes every stat.
    let next = 0

    const ask = (message: ControlMessage): Effect.Effect<ControlMessage> =>
      Effect.gen(function* () {
        const live = yield* options.workers
        yield* prune(live)
        if (live.length === 0) {
          return refused(
            `no live worker to answer ${message._tag}: this coordinator holds no origin credentials and asks a worker (start a worker, or give the coordinator origin credentials with --object-metadata origin)`
          )
        }
        const start = next++ % live.length
        const order = [...live.slice(start), ...live.slice(0, start)]
        const budget = message._tag === "ListObjects" ? (options.listBudgetMs ?? LIST_BUDGET_MS) : (options.statBudgetMs ?? STAT_BUDGET_MS)
        const deadline = (yield* Clock.currentTimeMillis) + budget
        const errors: Array<string> = []
        let tried = 0
        for (let i = 0; i < order.length; i++) {
          const remaining = deadline - (yield* Clock.currentTimeMillis)
          if (remaining <= 0) break
          const worker = order[i]!
          const timeoutMs = Math.max(1, Math.floor(attemptBudgetMs(remaining, order.length - i)))
          tried++
          const reply = yield* Effect.either(channelFor(worker.address).request(message, { timeout: timeoutMs }))
          if (reply._tag === "Left") errors.push(`${worker.id} at ${worker.address}: ${reply.left.message}`)
          else if (reply.right._tag === "Ack" && !reply.right.ok && !ORIGIN_ANSWERED.test(reply.right.detail ?? "")) errors.push(`${worker.id} at ${worker.address} refused: ${reply.right.detail ?? "no detail"}`)
          else return reply.right
        }
        const joined = errors.join("; ")
        return refused(
          `no worker answered ${message._tag} (${tried} of ${order.length} tried within ${budget} ms): ${
            joined.length > MAX_ERRORS_CHARS ? `${joined.slice(0, MAX_ERRORS_CHARS)}...` : joined || "out of time"
          }`
        )
      })

    return { ask }
  })
