/**
 * A coordinator's live membership, driven by the store: one snapshot, then
 * the watch from that snapshot's revision, with a readiness probe every
 * heartbeat interval. Any failure (store down, history compacted) marks the
 * view not ready and starts over with a fresh snapshot, so the view never
 * claims stale state is current (ADR 0001 §8). A store that hangs rather
 * than fails (a paused or partitioned etcd) is caught by a contact deadline:
 * see `staleAfterMs`.
 */
import { Clock, Duration, Effect, Schedule, Stream, SubscriptionRef } from "effect"
import type { NodeInfo } from "../../core/ids.js"
import type { ClusterStateStoreShape } from "./ClusterStateStore.js"
import { membershipEpoch } from "./epoch.js"
import { placementNodes, type StoredNode } from "./record.js"

export interface FollowedMembership {
  /** False until the first snapshot, and whenever the store cannot be followed. */
  readonly ready: boolean
  readonly revision: string | undefined
  readonly nodes: ReadonlyMap<string, StoredNode>
  /** Healthy, ready workers as of the last change. */
  readonly placement: ReadonlyArray<NodeInfo>
  readonly epoch: bigint
  readonly error: string | undefined
}

/**
 * How long the view may go without hearing from the store before it stops
 * claiming to be current: the lease TTL less one heartbeat interval. By the
 * lease TTL after the last contact, records may have expired in the store
 * unseen, so serving the view past then would be wrong; the heartbeat of
 * margin covers the watchdog's tick and a client's next poll. Timing checks
 * guarantee heartbeat < lease TTL, so the bound is positive.
 */
export const staleAfterMs = (s: { readonly leaseTtlMs: number; readonly heartbeatIntervalMs: number }): number =>
  Math.max(1, s.leaseTtlMs - s.heartbeatIntervalMs)

/** How often the store is probed: often enough that a healthy store is heard from well inside the deadline. */
export const probeIntervalMs = (s: { readonly leaseTtlMs: number; readonly heartbeatIntervalMs: number }): number =>
  Math.max(1, Math.min(s.heartbeatIntervalMs, Math.floor(staleAfterMs(s) / 3)))

const initial: FollowedMembership = { ready: false, revision: undefined, nodes: new Map(), placement: [], epoch: 0n, error: undefined }

/** Follows `clusterId` for as long as the scope lives; the ref always holds the latest view. */
export const followMembership = (store: ClusterStateStoreShape, clusterId: string) =>
  Effect.gen(function* () {
    const ref = yield* SubscriptionRef.make(initial)
    const lock = yield* Effect.makeSemaphore(1)
    // What the follower last saw; undefined while it is not following.
    let latest: { nodes: Map<string, StoredNode>; revision: string } | undefined
    // When the store last answered anything (snapshot, watch event, probe).
    let lastContact = 0
    const heard = Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => void (lastContact = now)))
    const staleMs = staleAfterMs(store.settings)
    const tickMs = Math.max(1, Math.floor(Math.min(store.settings.heartbeatIntervalMs, staleMs) / 4))
    const publish = lock.withPermits(1)(
      Effect.gen(function* () {
        if (latest === undefined) return
        const nodes = new Map(latest.nodes)
        const now = yield* Clock.currentTimeMillis
        const placement = placementNodes([...nodes.values()], now, store.settings.unhealthyAfterMs)
        const epoch = yield* membershipEpoch(placement)
        yield* SubscriptionRef.set(ref, { ready: true, revision: latest.revision, nodes, placement, epoch, error: undefined })
      })
    )
    const lost = (error: string) =>
      lock.withPermits(1)(
        Effect.suspend(() => {
          latest = undefined
          return SubscriptionRef.update(ref, (m) => ({ ...m, ready: false, error }))
        })
      )
    const follow = Effect.gen(function* () {
      const snap = yield* store.snapshot(clusterId)
      yield* heard
      const nodes = new Map(snap.nodes.map((n) => [n.status.node.id, { status: n.status, updatedAtUnixMs: n.updatedAtUnixMs }]))
      latest = { nodes, revision: snap.revision }
      yield* publish
      const watch = Stream.runForEach(store.watch(clusterId, snap.revision), (e) => {
        if (e.kind === "upserted") nodes.set(e.nodeId, e.node)
        else nodes.delete(e.nodeId)
        latest = { nodes, revision: e.revision }
        return Effect.zipRight(heard, publish)
      })
      // A watch can sit quietly through an outage (the client reconnects behind it), so probe the
      // store too: the first failure of either ends this round and the view is not ready until a
      // fresh snapshot succeeds.
      const probe = Effect.forever(
        Effect.zipRight(Effect.sleep(Duration.millis(probeIntervalMs(store.settings))), Effect.zipRight(Effect.tapError(store.checkReady, (e) => lost(e.message)), heard))
      )
      // A hung store fails neither the watch nor (until its request timeout, plus the client's own
      // retries) the probe, so silence itself ends the round once it outlasts the deadline.
      const deadline = Effect.gen(function* () {
        while (true) {
          yield* Effect.sleep(Duration.millis(tickMs))
          const silent = (yield* Clock.currentTimeMillis) - lastContact
          if (silent > staleMs) {
            const message = `no answer from the ${store.backend} state store for ${silent} ms (limit ${staleMs} ms: lease TTL ${store.settings.leaseTtlMs} ms less one heartbeat interval)`
            // Marked here, not only when the round ends: ending it interrupts calls into the hung
            // store, and their cleanup may wait on it.
            yield* lost(message)
            return yield* Effect.fail({ message })
          }
        }
      })
      yield* Effect.all([watch, probe, deadline], { concurrency: 3, discard: true })
    })
    yield* follow.pipe(
      Effect.tapError((e) => lost(e.message)),
      // A watch that ends without an error still means the view stopped following.
      Effect.zipRight(Effect.zipRight(lost("watch ended"), Effect.fail("watch ended"))),
      Effect.retry(Schedule.exponential(Duration.millis(100)).pipe(Schedule.union(Schedule.spaced(Duration.seconds(2))))),
      Effect.forkScoped
    )
    // Health turns on silence, not on writes: re-derive placement at the heartbeat interval.
    yield* publish.pipe(Effect.repeat(Schedule.spaced(Duration.millis(store.settings.heartbeatIntervalMs))), Effect.forkScoped)
    return ref
  })
