/**
 * A process's own record kept alive: one put per heartbeat interval with the
 * next sequence number, each accepted put renewing the lease. When the scope
 * closes the record is removed (a clean leave), so peers see the node go at
 * once instead of after the lease TTL.
 */
import { Duration, Effect, Schedule } from "effect"
import type { NodeStatus } from "../../protocol/status.js"
import type { ClusterStateStoreShape, PutOptions } from "./ClusterStateStore.js"

/**
 * Runs until the scope closes. `status(seq)` builds the status for heartbeat
 * `seq` (the incarnation id must not change). A failed put is logged and
 * retried at the next beat (logged once per distinct problem); the lease covers the gaps.
 */
export const keepOwnRecord = (
  store: ClusterStateStoreShape,
  status: (heartbeatSeq: number) => Effect.Effect<NodeStatus>,
  options: PutOptions = {}
) =>
  Effect.gen(function* () {
    let seq = 0
    let last: NodeStatus | undefined
    // Logged when the problem changes, not on every beat of an outage.
    let lastProblem = ""
    const beat = Effect.flatMap(
      Effect.suspend(() => status(seq++)),
      (s) => {
        last = s
        return store.put(s, options).pipe(
          Effect.tap(() => Effect.sync(() => void (lastProblem = ""))),
          Effect.tapError((e) => {
            if (e.message === lastProblem) return Effect.void
            lastProblem = e.message
            return Effect.logWarning(`status heartbeat for ${s.node.id} not stored: ${e.message}; retrying every beat`)
          }),
          Effect.ignore
        )
      }
    )
    yield* Effect.addFinalizer(() =>
      last === undefined ? Effect.void : Effect.ignore(store.remove(last.clusterId, last.node.id, last.incarnationId))
    )
    yield* beat.pipe(Effect.repeat(Schedule.spaced(Duration.millis(store.settings.heartbeatIntervalMs))), Effect.forkScoped)
  })
