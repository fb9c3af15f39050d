/**
 * Talon's coordinator families (crates/talon-coordinator/src/observability/metrics.rs): control
 * requests, errors and latency by operation, placement, registrations and heartbeats by
 * outcome, state-store latency and errors, snapshot age, live nodes by role and health. Plain
 * counters bumped around the control handler and the state store; rendered on scrape.
 */
import { Clock, Effect, Stream } from "effect"
import { Exposition, Histogram, type Labels } from "../core/exposition.js"
import { NodeRole } from "../core/ids.js"
import { VERSION } from "../core/version.js"
import type { ControlMessage } from "../protocol/index.js"
import type { RegistryView } from "./registry/view.js"
import type { ClusterStateStoreShape } from "./state/ClusterStateStore.js"
import type { StateStoreError } from "./state/errors.js"

export const CONTROL_OPERATIONS = ["register", "heartbeat", "status_heartbeat", "placement_lookup", "membership_query", "other"] as const
export type ControlOperation = (typeof CONTROL_OPERATIONS)[number]

/** Talon's operation label of a control message (its ControlOperation::from_message). */
export const operationOf = (tag: string): ControlOperation =>
  tag === "Register"
    ? "register"
    : tag === "Heartbeat"
      ? "heartbeat"
      : tag === "NodeStatusHeartbeat"
        ? "status_heartbeat"
        : tag === "PlacementLookup"
          ? "placement_lookup"
          : tag === "MembershipQuery" || tag === "MembershipQueryV2"
            ? "membership_query"
            : "other"

const STATE_OPERATIONS = ["readiness", "snapshot", "upsert"] as const
type StateOperation = (typeof STATE_OPERATIONS)[number]

const STATE_ERROR_KINDS = ["authentication", "permission_denied", "timeout", "unavailable", "compacted", "invalid"] as const

/** Talon's state-store error kinds. */
const kindOf = (e: StateStoreError): string => {
  switch (e._tag) {
    case "StoreAuthFailed":
      return "authentication"
    case "StoreTimeout":
      return "timeout"
    case "StoreUnavailable":
      return "unavailable"
    case "WatchCompacted":
      return "compacted"
    case "TokenRejected":
    case "TakeoverRefused":
      return "permission_denied"
    default:
      return "invalid"
  }
}

const failed = (reply: ControlMessage): boolean => reply._tag === "Ack" && !reply.ok

export class CoordinatorTalonMetrics {
  readonly #requests = new Map<ControlOperation, { errors: number; latency: Histogram }>(
    CONTROL_OPERATIONS.map((op) => [op, { errors: 0, latency: new Histogram() }])
  )
  readonly #placement = new Histogram()
  #placementErrors = 0
  readonly #registrations = { accepted: 0, rejected: 0 }
  readonly #heartbeats = { legacy: { accepted: 0, rejected: 0 }, status: { accepted: 0, rejected: 0 } }
  readonly #state = new Map<StateOperation, Histogram>(STATE_OPERATIONS.map((op) => [op, new Histogram()]))
  readonly #stateErrors = new Map<string, number>()
  /** When the state store last answered (snapshot, watch event, readiness probe), ms since the epoch. */
  #lastContact: number | undefined

  /** `handle` with each reply counted and timed under its operation. */
  instrument = (handle: (m: ControlMessage) => Effect.Effect<ControlMessage>) => (message: ControlMessage) =>
    Effect.suspend(() => {
      const started = performance.now()
      return Effect.tap(handle(message), (reply) =>
        Effect.sync(() => this.#record(message._tag, failed(reply), (performance.now() - started) / 1000))
      )
    })

  #record(tag: string, error: boolean, seconds: number) {
    const op = this.#requests.get(operationOf(tag))!
    op.latency.observe(seconds)
    if (error) op.errors++
    if (tag === "PlacementLookup") {
      this.#placement.observe(seconds)
      if (error) this.#placementErrors++
    } else if (tag === "Register") {
      this.#registrations[error ? "rejected" : "accepted"]++
    } else if (tag === "Heartbeat" || tag === "NodeStatusHeartbeat") {
      this.#heartbeats[tag === "Heartbeat" ? "legacy" : "status"][error ? "rejected" : "accepted"]++
    }
  }

  #timed<A, R>(op: StateOperation, effect: Effect.Effect<A, StateStoreError, R>): Effect.Effect<A, StateStoreError, R> {
    return Effect.suspend(() => {
      const started = performance.now()
      return effect.pipe(
        Effect.tapBoth({
          onFailure: (e) =>
            Effect.sync(() => {
              const key = `${op}\u0000${kindOf(e)}`
              this.#stateErrors.set(key, (this.#stateErrors.get(key) ?? 0) + 1)
            }),
          onSuccess: () => this.#heard
        }),
        Effect.ensuring(Effect.sync(() => this.#state.get(op)!.observe((performance.now() - started) / 1000)))
      )
    })
  }

  readonly #heard = Effect.map(Clock.currentTimeMillis, (now) => void (this.#lastContact = now))

  /** The store with its calls timed and their failures counted (Talon's readiness, snapshot and upsert). */
  store = (store: ClusterStateStoreShape): ClusterStateStoreShape => ({
    ...store,
    put: (status, options) => this.#timed("upsert", store.put(status, options)),
    snapshot: (clusterId) => this.#timed("snapshot", store.snapshot(clusterId)),
    checkReady: this.#timed("readiness", store.checkReady),
    watch: (clusterId, after) => Stream.tap(store.watch(clusterId, after), () => this.#heard)
  })

  render(input: {
    readonly view: RegistryView
    readonly nowMs: number
    readonly controlRequests: Readonly<Record<string, number>>
    readonly connections: number
    readonly uptimeSeconds: number
  }): string {
    const requests = new Map<ControlOperation, number>(CONTROL_OPERATIONS.map((op) => [op, 0]))
    for (const [tag, n] of Object.entries(input.controlRequests)) requests.set(operationOf(tag), requests.get(operationOf(tag))! + n)
    const byOp = (f: (op: ControlOperation) => number) => CONTROL_OPERATIONS.map((op) => [[["operation", op]], f(op)] as const)
    const live: Array<readonly [Labels, number]> = []
    for (const role of ["coordinator", "worker"] as const) {
      for (const health of ["healthy", "degraded", "unhealthy", "unknown"] as const) {
        const n = input.view.nodes.filter((n) => n.status.node.role === (role === "coordinator" ? NodeRole.Coordinator : NodeRole.Worker) && n.health === health).length
        live.push([
          [
            ["role", role],
            ["health", health]
          ],
          n
        ])
      }
    }
    // Every operation and kind, zero until it happens: a rate over a series that does not exist yet reads as no data.
    const stateErrors = STATE_OPERATIONS.flatMap((operation) =>
      STATE_ERROR_KINDS.map(
        (kind) =>
          [
            [
              ["operation", operation],
              ["kind", kind]
            ],
            this.#stateErrors.get(`${operation}\u0000${kind}`) ?? 0
          ] as const
      )
    )
    const age = this.#lastContact === undefined ? input.uptimeSeconds : Math.max(0, input.nowMs - this.#lastContact) / 1000
    return new Exposition()
      .gauge("talon_coordinator_build_info", "Coordinator build information.", [[[["version", VERSION]], 1]])
      .counter("talon_coordinator_control_errors_total", "Control requests returning an error by operation.", byOp((op) => this.#requests.get(op)!.errors))
      .histogram(
        "talon_coordinator_control_duration_seconds",
        "Control request latency in seconds by operation.",
        CONTROL_OPERATIONS.map((op) => [[["operation", op]], this.#requests.get(op)!.latency] as const)
      )
      .counter("talon_coordinator_registration_total", "Worker registrations by outcome.", [
        [[["result", "accepted"]], this.#registrations.accepted],
        [[["result", "rejected"]], this.#registrations.rejected]
      ])
      .counter(
        "talon_coordinator_heartbeat_total",
        "Node heartbeats by kind and outcome.",
        (["legacy", "status"] as const).flatMap((kind) =>
          (["accepted", "rejected"] as const).map(
            (result) =>
              [
                [
                  ["kind", kind],
                  ["result", result]
                ],
                this.#heartbeats[kind][result]
              ] as const
          )
        )
      )
      .histogram("talon_coordinator_placement_duration_seconds", "Placement lookup latency in seconds.", [[[], this.#placement]])
      .counter("talon_coordinator_placement_errors_total", "Placement lookup failures.", [[[], this.#placementErrors]])
      .histogram(
        "talon_coordinator_state_store_duration_seconds",
        "Shared-state operation latency in seconds.",
        STATE_OPERATIONS.map((op) => [[["operation", op]], this.#state.get(op)!] as const)
      )
      .counter("talon_coordinator_state_store_errors_total", "Shared-state operation failures by operation and kind.", stateErrors)
      .gauge("talon_coordinator_state_snapshot_age_seconds", "Age of the latest successful shared-state snapshot in seconds.", [[[], age]])
      .gauge("talon_coordinator_live_nodes", "Live leased nodes by role and reported health.", live)
      .gauge("talon_coordinator_active_connections", "Control-plane connections currently open.", [[[], input.connections]])
      .gauge("talon_coordinator_process_uptime_seconds", "Coordinator process uptime in seconds.", [[[], input.uptimeSeconds]])
      .text()
  }
}
