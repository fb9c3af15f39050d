/**
 * The NodeStatus a worker reports in each NodeStatusHeartbeat (control tag
 * 9): Talon's fields, from the worker's identity, counters, store, readiness
 * and admin listener.
 */
import { randomUUID } from "node:crypto"
import type { NodeInfo } from "../../core/ids.js"
import { BUILD_VERSION } from "../../core/version.js"
import { NODE_STATUS_SCHEMA_VERSION, NODE_ZONE_LABEL, canonicalLabels, type NodeHealth, type NodeStatus } from "../../protocol/status.js"
import type { WorkerStats } from "../metrics.js"

export interface WorkerIdentity {
  readonly clusterId: string
  readonly node: NodeInfo
  /** Random per process start: a restarted worker is a new incarnation that replaces the old record. */
  readonly incarnationId: string
  readonly startedAtUnixMs: number
  readonly labels: ReadonlyArray<readonly [string, string]>
}

export const newIdentity = (clusterId: string, node: NodeInfo, zone: string, now: number): WorkerIdentity => ({
  clusterId,
  node,
  incarnationId: randomUUID(),
  startedAtUnixMs: now,
  labels: canonicalLabels(zone === "" ? [] : [[NODE_ZONE_LABEL, zone]])
})

export interface StoreGauges {
  readonly blockCount: number
  readonly residentBytes: number
  readonly capacityBytes: number
}

/** What the worker says about itself beyond its counters. */
export interface SelfReport {
  /** The worker's readiness (WorkerReadiness) as of this status. */
  readonly ready: boolean
  /** The bound admin HTTP address, `host:port`. */
  readonly adminAddress: string | null
  /** From the cache dirs' probes (health.ts): anything but healthy keeps the worker out of placement. */
  readonly health: NodeHealth
}

const u64 = (n: number): number => (Number.isFinite(n) && n > 0 ? Math.min(Math.floor(n), Number.MAX_SAFE_INTEGER) : 0)

export const workerStatus = (
  id: WorkerIdentity,
  heartbeatSeq: number,
  now: number,
  stats: WorkerStats,
  store: StoreGauges,
  self: SelfReport
): NodeStatus => ({
  schemaVersion: NODE_STATUS_SCHEMA_VERSION,
  clusterId: id.clusterId,
  node: id.node,
  incarnationId: id.incarnationId,
  adminAddress: self.adminAddress,
  buildVersion: BUILD_VERSION,
  startedAtUnixMs: id.startedAtUnixMs,
  reportedAtUnixMs: Math.max(now, id.startedAtUnixMs),
  heartbeatSeq,
  health: self.health,
  ready: self.ready,
  metrics: {
    requestsTotal: u64(stats.hits + stats.misses + stats.errors),
    errorsTotal: u64(stats.errors),
    bytesServedTotal: u64(stats.bytesServed),
    cacheHitsTotal: u64(stats.hits),
    cacheMissesTotal: u64(stats.misses),
    backendErrorsTotal: u64(stats.originFetchFailures),
    evictionsTotal: u64(stats.evictions),
    inflightLoads: 0,
    blockCount: u64(store.blockCount),
    pageCount: 0,
    residentBytes: u64(store.residentBytes),
    capacityBytes: u64(store.capacityBytes),
    stateSnapshotAgeMs: 0
  },
  labels: id.labels
})
