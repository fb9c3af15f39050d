/**
 * In-process state store: one coordinator, no external service. Leases run
 * on the Effect Clock (so tests can drive them with TestClock); a background
 * fiber expires silent records so watchers see removals without a write.
 */
import { Clock, Duration, Effect, PubSub, Schedule, Stream } from "effect"
import type { StateStoreSettings } from "./config.js"
import { makeStore, type ClusterStateStoreShape, type NodeEvent, type StoreCore, type WriteResult } from "./ClusterStateStore.js"
import { WatchCompacted, type TakeoverRefused, type TokenRejected } from "./errors.js"
import { rejectReason, type StoredNode } from "./record.js"
import { tokenProblem } from "./token.js"

const HISTORY_LIMIT = 1024

interface Entry {
  readonly node: StoredNode
  readonly expiresAtUnixMs: number
}

type EventBody = NodeEvent extends infer E ? (E extends NodeEvent ? Omit<E, "revision"> : never) : never

const keyOf = (clusterId: string, nodeId: string): string => JSON.stringify([clusterId, nodeId])
const rev = (n: number): string => `memory:${n}`
const revOf = (e: NodeEvent): number => Number(e.revision.slice("memory:".length))

export const makeMemoryStore = (settings: StateStoreSettings) =>
  Effect.gen(function* () {
    const records = new Map<string, Entry>()
    const history: Array<NodeEvent> = []
    let revision = 0
    const hub = yield* PubSub.unbounded<NodeEvent>()

    // Callers run these without yielding in between, so each judge-then-write is atomic.
    const publish = (event: EventBody): void => {
      revision += 1
      const e = { ...event, revision: rev(revision) } as NodeEvent
      history.push(e)
      if (history.length > HISTORY_LIMIT) history.shift()
      hub.unsafeOffer(e)
    }
    const prune = (now: number): void => {
      for (const [k, e] of records) {
        if (e.expiresAtUnixMs > now) continue
        records.delete(k)
        publish({ kind: "removed", clusterId: e.node.status.clusterId, nodeId: e.node.status.node.id })
      }
    }
    const pruneNow = Effect.map(Clock.currentTimeMillis, prune)

    yield* Effect.forkScoped(
      Effect.repeat(pruneNow, Schedule.spaced(Duration.millis(Math.max(10, Math.min(1000, settings.leaseTtlMs / 10)))))
    )

    const core: StoreCore = {
      backend: "memory",
      put: (status, now, options) =>
        Effect.suspend((): Effect.Effect<WriteResult, TokenRejected | TakeoverRefused> => {
          prune(now)
          const key = keyOf(status.clusterId, status.node.id)
          const current = records.get(key)?.node.status
          const refused = tokenProblem(settings.clusterToken, settings.tokenCheck, options.proof ?? "missing", current, status)
          if (refused !== null) return Effect.fail(refused)
          const reject = rejectReason(current, status)
          if (reject !== null) return Effect.succeed({ disposition: reject, revision: rev(revision) })
          const node: StoredNode = { status, updatedAtUnixMs: now }
          records.set(key, { node, expiresAtUnixMs: now + settings.leaseTtlMs })
          publish({ kind: "upserted", clusterId: status.clusterId, nodeId: status.node.id, node })
          return Effect.succeed({ disposition: "applied" as const, revision: rev(revision) })
        }),
      remove: (clusterId, nodeId, incarnationId) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          prune(now)
          const key = keyOf(clusterId, nodeId)
          const current = records.get(key)
          if (current === undefined) return { disposition: "not-found" as const, revision: rev(revision) }
          if (current.node.status.incarnationId !== incarnationId) return { disposition: "stale" as const, revision: rev(revision) }
          records.delete(key)
          publish({ kind: "removed", clusterId, nodeId })
          return { disposition: "applied" as const, revision: rev(revision) }
        }),
      list: (clusterId) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          prune(now)
          const nodes = [...records.values()].filter((e) => e.node.status.clusterId === clusterId).map((e) => e.node)
          return { nodes, revision: rev(revision) }
        }),
      watch: (clusterId, afterRevision) =>
        Stream.unwrapScoped(
          Effect.gen(function* () {
            const live = yield* PubSub.subscribe(hub)
            yield* pruneNow
            const from = afterRevision === undefined ? revision : Number(afterRevision.slice("memory:".length))
            const oldest = history.length > 0 ? revOf(history[0]!) : revision + 1
            if (!afterRevision?.startsWith("memory:") && afterRevision !== undefined) {
              return yield* new WatchCompacted({ requested: afterRevision, oldest: rev(oldest) })
            }
            if (!Number.isSafeInteger(from) || from > revision || from + 1 < oldest) {
              return yield* new WatchCompacted({ requested: rev(from), oldest: rev(oldest) })
            }
            const backlog = history.filter((e) => e.clusterId === clusterId && revOf(e) > from)
            const seen = backlog.length > 0 ? revOf(backlog[backlog.length - 1]!) : from
            return Stream.concat(
              Stream.fromIterable(backlog),
              Stream.fromQueue(live).pipe(Stream.filter((e) => e.clusterId === clusterId && revOf(e) > seen))
            )
          })
        ),
      checkReady: Effect.sync(() => rev(revision))
    }
    return makeStore(core, settings) satisfies ClusterStateStoreShape
  })
