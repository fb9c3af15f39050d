/**
 * A coordinator's own record, Talon's way: a leased status of role
 * Coordinator (its control and admin addresses, readiness, health) written to
 * the cluster state store every heartbeat interval, so every coordinator's
 * cluster view lists every live coordinator. Placement and the epoch ignore
 * it (workers only). Its id, like Talon's default, is the control address it
 * is reached at (the host name for a wildcard listener). The coordinator holds
 * the cluster token itself, so its writes count as verified.
 */
import { randomUUID } from "node:crypto"
import * as os from "node:os"
import { Clock, Effect, SubscriptionRef, type Scope } from "effect"
import { NodeRole, type NodeInfo } from "../core/ids.js"
import { BUILD_VERSION } from "../core/version.js"
import { NODE_STATUS_SCHEMA_VERSION, emptyMetrics, type NodeStatus } from "../protocol/status.js"
import { formatHostPort, parseHostPort } from "../transport/address.js"
import type { RegistryView } from "./registry/view.js"
import type { ClusterStateStoreShape } from "./state/ClusterStateStore.js"
import { keepOwnRecord } from "./state/heartbeat.js"

const WILDCARD = new Set(["0.0.0.0", "::", "[::]", ""])

/** The address peers reach a listener at: a wildcard host becomes this machine's name. */
export const reachableAddress = (bound: string): string => {
  const hp = parseHostPort(bound, { allowPortZero: true })
  return hp === undefined || !WILDCARD.has(hp.host) ? bound : formatHostPort(os.hostname(), hp.port)
}

export interface SelfRecordOptions {
  readonly clusterId: string
  readonly controlAddress: string
  readonly adminAddress: string
}

/** Keeps this coordinator's record alive until the scope closes (then removes it). */
export const keepCoordinatorRecord = (
  store: ClusterStateStoreShape,
  view: SubscriptionRef.SubscriptionRef<RegistryView>,
  options: SelfRecordOptions
): Effect.Effect<NodeInfo, never, Scope.Scope> =>
  Effect.gen(function* () {
    const address = reachableAddress(options.controlAddress)
    const node: NodeInfo = { id: address, address, role: NodeRole.Coordinator }
    const incarnationId = randomUUID()
    const startedAtUnixMs = yield* Clock.currentTimeMillis
    const adminAddress = reachableAddress(options.adminAddress)
    const status = (heartbeatSeq: number): Effect.Effect<NodeStatus> =>
      Effect.gen(function* () {
        const ready = (yield* SubscriptionRef.get(view)).ready
        return {
          schemaVersion: NODE_STATUS_SCHEMA_VERSION,
          clusterId: options.clusterId,
          node,
          incarnationId,
          adminAddress,
          buildVersion: BUILD_VERSION,
          startedAtUnixMs,
          reportedAtUnixMs: Math.max(startedAtUnixMs, yield* Clock.currentTimeMillis),
          heartbeatSeq,
          // Cut off from its store it cannot serve membership: degraded until it follows again.
          health: ready ? "healthy" : "degraded",
          ready,
          metrics: emptyMetrics,
          labels: []
        }
      })
    yield* keepOwnRecord(store, status, { proof: "verified" })
    return node
  })
