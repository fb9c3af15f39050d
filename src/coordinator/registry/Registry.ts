/**
 * The coordinator's membership registry: one actor owns this coordinator's
 * view of the cluster. Every write goes to the `ClusterStateStore` (so every
 * coordinator on the same store serves the same members and epoch, with no
 * leader); the view comes from the store's snapshot and watch
 * (`followMembership`), with this coordinator's own accepted writes laid over
 * it until the watch delivers them. The latest view is also published on a
 * `SubscriptionRef`, so queries read it without queueing behind writes.
 */
import { Clock, Duration, Effect, Schedule, Stream, SubscriptionRef, type Scope } from "effect"
import { Actor, type ActorRef } from "../../actor/index.js"
import { NodeRole } from "../../core/ids.js"
import type { NodeStatus } from "../../protocol/status.js"
import type { ClusterStateStoreShape } from "../state/ClusterStateStore.js"
import { membershipEpoch } from "../state/epoch.js"
import { followMembership, type FollowedMembership } from "../state/MembershipView.js"
import type { StateStoreError } from "../state/errors.js"
import type { StatusProof } from "../../protocol/statusProof.js"
import { admit, legacyMove, legacyRefusal, refusalOf, staleProof, TokenRefusals, type TokenRefusal } from "./auth.js"
import { invalidRegistration, isLegacy, legacyStatus } from "./legacy.js"
import { Heartbeat, Register, RegistryProtocol, ReportStatus, Snapshot, Sweep, type RegistryAck, type RegistryMessage } from "./registryMessages.js"
import { emptyView, mergeView, pendingWrites, revisionNumber, type LocalWrite, type RegistryView } from "./view.js"

export interface RegistryCounters {
  registrations: number
  heartbeats: number
  statusHeartbeats: number
  rejectedHeartbeats: number
  /** Nodes that left placement (silent past unhealthy-after, lease expiry, or removal). */
  expirations: number
  storeWriteFailures: number
  /** Statuses, Registers and Heartbeats refused for the cluster token, by reason. */
  tokenRefusals: TokenRefusals
}

export interface RegistryOptions {
  readonly clusterId: string
  /** Records the registry accepts at most, so made-up registrations cannot grow the store without bound. */
  readonly maxMembers?: number
  /** Mailbox bound; a write arriving at a full mailbox is refused at once. */
  readonly capacity?: number
  /** How often health is re-derived when nothing else changes; default the store's heartbeat interval. */
  readonly sweepIntervalMs?: number
}

export interface Registry {
  readonly actor: ActorRef<RegistryMessage>
  /** The latest view; changes on every write, store event and sweep. */
  readonly view: SubscriptionRef.SubscriptionRef<RegistryView>
  readonly counters: RegistryCounters
  readonly clusterId: string
  readonly store: ClusterStateStoreShape
}

interface State {
  readonly local: ReadonlyMap<string, LocalWrite>
  /** Placement ids at the last publish, to count departures. */
  readonly placed: ReadonlySet<string>
}

const ack = (ok: boolean, detail: string | null = null): RegistryAck => ({ ok, detail })

export const DEFAULT_MAX_MEMBERS = 10_000

export const makeRegistry = (
  store: ClusterStateStoreShape,
  options: RegistryOptions
): Effect.Effect<Registry, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { clusterId } = options
    const maxMembers = options.maxMembers ?? DEFAULT_MAX_MEMBERS
    const unhealthyAfterMs = store.settings.unhealthyAfterMs
    const counters: RegistryCounters = {
      registrations: 0,
      heartbeats: 0,
      statusHeartbeats: 0,
      rejectedHeartbeats: 0,
      expirations: 0,
      storeWriteFailures: 0,
      tokenRefusals: new TokenRefusals()
    }
    const followed = yield* followMembership(store, clusterId)
    const view = yield* SubscriptionRef.make(emptyView)

    /** Recomputes the view from the store's latest and the local writes, and publishes it. */
    const publish = (state: State): Effect.Effect<State> =>
      Effect.gen(function* () {
        const latest: FollowedMembership = yield* SubscriptionRef.get(followed)
        const local = pendingWrites(latest, state.local)
        const now = yield* Clock.currentTimeMillis
        const merged = mergeView(latest, local, now, unhealthyAfterMs)
        const next: RegistryView = { ...merged, epoch: yield* membershipEpoch(merged.placement) }
        const placed = new Set(next.placement.map((n) => n.id))
        if (latest.ready) for (const id of state.placed) if (!placed.has(id)) counters.expirations++
        yield* SubscriptionRef.set(view, next)
        return { local, placed: latest.ready ? placed : state.placed }
      })

    /** A refusal for the cluster token: counted by reason, logged once per node, answered with what to fix. */
    const refuse = (state: State, nodeId: string, reason: TokenRefusal, detail: string) =>
      Effect.as(counters.tokenRefusals.refused(nodeId, reason, detail), [ack(false, detail), state] as const)

    // `proof` is what the status proved about the cluster token (auth.ts); the store applies the rule.
    const write = (state: State, status: NodeStatus, proof: StatusProof): Effect.Effect<readonly [RegistryAck, State]> =>
      store.put(status, { proof }).pipe(
        Effect.zip(Clock.currentTimeMillis),
        Effect.flatMap(([result, now]) => {
          counters.tokenRefusals.accepted(status.node.id)
          if (result.disposition !== "applied") return Effect.succeed([ack(true), state] as const)
          const local = new Map(state.local)
          local.set(status.node.id, { node: { status, updatedAtUnixMs: now }, revision: revisionNumber(result.revision) })
          return Effect.map(publish({ ...state, local }), (s) => [ack(true), s] as const)
        }),
        Effect.catchAll((e: StateStoreError) => {
          const refusal = refusalOf(e)
          if (refusal !== undefined) return refuse(state, status.node.id, refusal, e.message)
          counters.storeWriteFailures++
          return Effect.succeed([ack(false, e.message), state] as const)
        })
      )

    /**
     * While the store cannot be followed, writes are refused at once: a coordinator cut off from
     * its store sends nodes on to the next coordinator of their list instead of queueing their
     * heartbeats behind store timeouts.
     */
    const unavailable = Effect.map(SubscriptionRef.get(view), (v) =>
      v.ready ? undefined : ack(false, `coordinator not ready: the cluster state store is unavailable (${v.error ?? "no snapshot yet"}); send to another coordinator`)
    )


    const current = (id: string) => Effect.map(SubscriptionRef.get(view), (v) => v.nodes.find((n) => n.status.node.id === id))

    const actor = yield* Actor.make({
      name: `coordinator-registry(${clusterId})`,
      protocol: RegistryProtocol,
      capacity: options.capacity ?? 4096,
      initial: { local: new Map(), placed: new Set() } as State,
      handlers: {
        ReportStatus: (state, { status: received }) =>
          Effect.gen(function* () {
            const down = yield* unavailable
            if (down !== undefined) return [down, state] as const
            if (received.clusterId !== clusterId) {
              counters.rejectedHeartbeats++
              return [
                ack(false, `node status belongs to cluster ${JSON.stringify(received.clusterId)}, this coordinator serves ${JSON.stringify(clusterId)}; set the worker's cluster id to match`),
                state
              ] as const
            }
            if (received.node.role !== NodeRole.Worker) {
              counters.rejectedHeartbeats++
              return [
                ack(false, `status of ${JSON.stringify(received.node.id.slice(0, 256))} refused: only workers send statuses (coordinators write their own records to the state store); report role Worker`),
                state
              ] as const
            }
            const known = yield* current(received.node.id)
            if (known === undefined && (yield* SubscriptionRef.get(view)).nodes.length >= maxMembers) {
              counters.rejectedHeartbeats++
              return [ack(false, `status refused: the cluster already has ${maxMembers} nodes; retry after some expire`), state] as const
            }
            const { proof, status } = admit(store.settings, received)
            const stale = proof === "verified" ? staleProof(store.settings, status, yield* Clock.currentTimeMillis) : undefined
            if (stale !== undefined) {
              counters.rejectedHeartbeats++
              return yield* refuse(state, status.node.id, "stale", stale)
            }
            const reply = yield* write(state, status, proof)
            if (reply[0].ok) counters.statusHeartbeats++
            else counters.rejectedHeartbeats++
            return reply
          }),
        Register: (state, { node }) =>
          Effect.gen(function* () {
            const refused = invalidRegistration(node)
            if (refused !== undefined) return [ack(false, refused), state] as const
            const down = yield* unavailable
            if (down !== undefined) return [down, state] as const
            const legacy = legacyRefusal(store.settings, "Register")
            if (legacy !== undefined) return yield* refuse(state, node.id, "legacy", legacy)
            const known = yield* current(node.id)
            if (known === undefined && (yield* SubscriptionRef.get(view)).nodes.length >= maxMembers) {
              return [ack(false, `Register refused: the coordinator already tracks ${maxMembers} nodes; retry after some expire`), state] as const
            }
            if (known !== undefined && !isLegacy(known.status)) {
              // A node that sends status heartbeats owns its record; a Register must not displace it.
              counters.registrations++
              return [ack(true), state] as const
            }
            const moved = known === undefined ? undefined : legacyMove(store.settings, known.status, node)
            if (moved !== undefined) return yield* refuse(state, node.id, "takeover", moved)
            const now = yield* Clock.currentTimeMillis
            const status = legacyStatus(clusterId, node, known?.status.metrics.blockCount ?? 0, now, known?.status)
            const reply = yield* write(state, status, "missing")
            if (reply[0].ok) counters.registrations++
            return reply
          }),
        Heartbeat: (state, { node, blockCount }) =>
          Effect.gen(function* () {
            const down = yield* unavailable
            if (down !== undefined) return [down, state] as const
            const legacy = legacyRefusal(store.settings, "Heartbeat")
            if (legacy !== undefined) return yield* refuse(state, node, "legacy", legacy)
            const known = yield* current(node)
            if (known === undefined) {
              counters.rejectedHeartbeats++
              return [ack(false, `node ${node} is not registered (expired or never registered); register again`), state] as const
            }
            counters.heartbeats++
            if (!isLegacy(known.status)) return [ack(true), state] as const
            const now = yield* Clock.currentTimeMillis
            return yield* write(state, legacyStatus(clusterId, known.status.node, blockCount, now, known.status), "missing")
          }),
        Sweep: (state) => Effect.map(publish(state), (s) => [undefined, s] as const),
        Snapshot: (state) => Effect.map(SubscriptionRef.get(view), (v) => [v, state] as const)
      }
    })

    // Every change the store delivers, and the passage of time (health turns on silence), sweeps.
    const sweep = actor.tell(new Sweep()).pipe(Effect.ignore)
    yield* Stream.runForEach(followed.changes, () => sweep).pipe(Effect.forkScoped)
    const every = options.sweepIntervalMs ?? store.settings.heartbeatIntervalMs
    yield* sweep.pipe(Effect.repeat(Schedule.spaced(Duration.millis(Math.max(10, every)))), Effect.forkScoped)

    return { actor, view, counters, clusterId, store }
  })

export { Heartbeat, Register, ReportStatus, Snapshot, Sweep }
