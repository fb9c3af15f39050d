/**
 * What the management page shows, as one JSON document (GET /ui/overview.json): the
 * cluster view the admin API serves, plus each worker's request rate and hit ratio and
 * the cluster's over the last minutes, from a ring of samples taken by a scoped fiber.
 */
import { Clock, Effect, type Redacted, Schedule, type Scope } from "effect"
import type { ClusterMember, ClusterStatus } from "../../protocol/clusterStatus.js"
import type { RegistryView } from "../registry/view.js"
import { History, type NodeCounters, type Point } from "./history.js"
import type { UiSource } from "./routes.js"

/** Rates per worker are over this much of the history; the chart shows all of it. */
export const RATE_WINDOW_MS = 60_000
/** How far back the chart reaches. */
export const HISTORY_MS = 10 * 60_000

export interface WorkerRow {
  readonly id: string
  readonly address: string
  readonly zone: string | null
  readonly health: ClusterMember["health"]
  readonly ready: boolean
  readonly inPlacement: boolean
  readonly capacityBytes: number | null
  readonly residentBytes: number | null
  readonly blockCount: number
  readonly lastHeartbeatAgeMs: number
  readonly requestsPerSec: number
  readonly hitRatio: number | null
}

export interface Overview {
  readonly clusterId: string
  readonly generatedAt: string
  readonly ready: boolean
  readonly notReadyReason: string | null
  readonly stateBackend: ClusterStatus["stateBackend"]
  readonly epoch: number
  readonly epochHex: string
  readonly controlAddress: string
  readonly livenessWindowMs: number
  readonly sampleIntervalMs: number
  readonly rateWindowMs: number
  readonly workers: ReadonlyArray<WorkerRow>
  readonly coordinators: ReadonlyArray<{ readonly id: string; readonly address: string; readonly health: ClusterMember["health"] }>
  readonly series: ReadonlyArray<Point>
}

const countersOf = (view: RegistryView): Map<string, NodeCounters> =>
  new Map(
    [...view.members, ...view.outOfPlacement].map((n) => [
      n.status.node.id,
      { requests: n.status.metrics.requestsTotal, hits: n.status.metrics.cacheHitsTotal, misses: n.status.metrics.cacheMissesTotal }
    ])
  )

const row = (history: History, inPlacement: boolean) => (m: ClusterMember): WorkerRow => ({
  id: m.id,
  address: m.address,
  zone: m.zone,
  health: m.health,
  ready: m.ready,
  inPlacement,
  capacityBytes: m.capacityBytes ?? null,
  residentBytes: m.residentBytes ?? null,
  blockCount: m.blockCount,
  lastHeartbeatAgeMs: m.lastHeartbeatAgeMs,
  ...history.ratesOf(m.id, RATE_WINDOW_MS)
})

/** Samples every `sampleIntervalMs` for the scope's lifetime; the page's source, with the admin token. */
export const makeUi = (
  view: Effect.Effect<RegistryView>,
  cluster: Effect.Effect<ClusterStatus>,
  sampleIntervalMs: number,
  token: Redacted.Redacted<string> | undefined
): Effect.Effect<UiSource, never, Scope.Scope> =>
  Effect.gen(function* () {
    const history = new History(Math.ceil(HISTORY_MS / sampleIntervalMs) + 1)
    const sample = Effect.zipWith(view, Clock.currentTimeMillis, (v, atMs) => history.record({ atMs, nodes: countersOf(v) }))
    yield* Effect.forkScoped(Effect.repeat(sample, Schedule.spaced(sampleIntervalMs)))

    const overview: Effect.Effect<Overview> = Effect.zipWith(cluster, Clock.currentTimeMillis, (c, now) => ({
      clusterId: c.clusterId,
      generatedAt: new Date(now).toISOString(),
      ready: c.ready,
      notReadyReason: c.notReadyReason ?? null,
      stateBackend: c.stateBackend,
      epoch: c.epoch,
      epochHex: c.epochHex,
      controlAddress: c.controlAddress,
      livenessWindowMs: c.livenessWindowMs,
      sampleIntervalMs,
      rateWindowMs: RATE_WINDOW_MS,
      workers: [...c.members.map(row(history, true)), ...c.outOfPlacement.map(row(history, false))].sort((a, b) => (a.id < b.id ? -1 : 1)),
      coordinators: c.coordinators.map((m) => ({ id: m.id, address: m.address, health: m.health })),
      series: history.points()
    }))
    return { overview, token }
  })

/** The sampling interval for a coordinator: its heartbeat interval, kept within 200 ms..5 s. */
export const sampleIntervalFor = (heartbeatIntervalMs: number): number => Math.min(5000, Math.max(200, heartbeatIntervalMs))

