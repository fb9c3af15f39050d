/**
 * A whole worker as one layer:
 *
 *   Worker = DataServer ← ServeMode (Pipelined | Multiplexed) ← DataPlane (Sendfile.*)
 *                       ← ReadPath ← MissPath ← BackendStore
 *                                  ← BlockStore
 *          + Membership (Register/Heartbeat through the ControlChannel)
 *          + AdminHttp  (/healthz, /readyz, /metrics)
 *
 * `Worker.layer` takes the data plane and serve mode from WorkerConfig;
 * `Worker.layerWithoutDependencies` leaves them (and the backend) to the caller, which is
 * how tests and benches pick a plane or mode explicitly.
 * Each build is fresh: two workers in one program (e.g. `talon up`) never
 * share a store, listener or counters.
 */
import { type ConfigError, Context, Effect, Layer, Option } from "effect"
import type { BackendStore } from "../backend/BackendStore.js"
import type { NodeInfo } from "../core/ids.js"
import { DataPlane } from "./plane/DataPlane.js"
import { type NativePlaneUnavailable, Sendfile } from "./plane/Sendfile.js"
import { type AdminListenError, AdminHttp } from "./admin/WorkerAdminHttp.js"
import { WorkerConfig, type WorkerSettings } from "./config.js"
import { WorkerMetrics, type WorkerStats } from "./metrics.js"
import { Membership } from "./membership/Membership.js"
import { type ReadyState, WorkerReadiness } from "./membership/Readiness.js"
import { MissPath } from "./miss/MissPath.js"
import { ReadPath, type ReadPathImpl } from "./ReadPath.js"
import { DataServer, type DataServerListenError } from "./server/DataServer.js"
import { ServeMode } from "./server/ServeMode.js"
import { BlockStore, type BlockStoreOpenFailed } from "./store/BlockStore.js"
import type { DiskStore } from "./store/DiskStore.js"

/** Why a worker could not start: its cache dirs, its data listener, its admin listener, or a setting its layers read (TALON_OTLP_ENDPOINT). */
export type WorkerStartError = BlockStoreOpenFailed | DataServerListenError | AdminListenError | ConfigError.ConfigError

export interface WorkerShape {
  readonly node: NodeInfo
  /** Bound data address `host:port`. */
  readonly dataAddress: string
  readonly dataPort: number
  /** Bound admin HTTP address `host:port`. */
  readonly adminAddress: string
  readonly adminPort: number
  readonly coordinator: string | undefined
  readonly dataPlane: string
  readonly serveMode: string
  readonly settings: WorkerSettings
  readonly store: DiskStore
  readonly stats: WorkerStats
  readonly readiness: ReadyState
  /** The read path the serve loop reads through (a co-located gateway reads resident blocks from it); none with --loops. */
  readonly readPath: ReadPathImpl | undefined
}

/** Block store, miss path and read path (no sockets): what the serve loop reads through. */
const ReadLayers = ReadPath.layer.pipe(
  Layer.provideMerge(MissPath.layer),
  Layer.provideMerge(BlockStore.layer),
  Layer.provideMerge(Layer.mergeAll(WorkerMetrics.layer, WorkerReadiness.layer))
)

const ServingLayers = Membership.layer.pipe(Layer.provideMerge(AdminHttp.layer)).pipe(
  Layer.provideMerge(DataServer.layer),
  Layer.provideMerge(ReadLayers)
)

/**
 * The handle of a running worker, from the services it was built of: what it bound, how it
 * serves, and its store and counters. Worker and WorkerLoops both return it (WorkerLoops adds
 * its loops).
 */
export const workerHandle = Effect.gen(function* () {
  const [settings, server, admin, membership, plane, mode] = yield* Effect.all([WorkerConfig, DataServer, AdminHttp, Membership, DataPlane, ServeMode])
  const [store, stats, readiness, readPath] = yield* Effect.all([BlockStore, WorkerMetrics, WorkerReadiness, Effect.serviceOption(ReadPath)])
  return {
    node: membership.node,
    dataAddress: server.address,
    dataPort: server.port,
    adminAddress: admin.address,
    adminPort: admin.port,
    coordinator: membership.coordinator,
    dataPlane: plane.name,
    serveMode: mode.name,
    settings,
    store,
    stats,
    readiness,
    readPath: Option.getOrUndefined(readPath)
  } satisfies WorkerShape
})

/** DataPlane and ServeMode chosen by `dataPlane` / `serveMode` in WorkerConfig. */
export const planeAndModeLayer = Layer.unwrapEffect(
  Effect.map(WorkerConfig, (cfg) =>
    Layer.merge(
      cfg.dataTls ? Sendfile.portableBecause("data-plane TLS: bytes pass through the TLS socket") : Sendfile.layerFor(cfg.dataPlane),
      ServeMode.layerFor(cfg.serveMode)
    )
  )
)

export class Worker extends Context.Tag("talon/Worker")<Worker, WorkerShape>() {
  /** Needs WorkerConfig, BackendStore, DataPlane and ServeMode. */
  static readonly layerWithoutDependencies: Layer.Layer<Worker, WorkerStartError, WorkerConfig | BackendStore | DataPlane | ServeMode> =
    Layer.fresh(Layer.effect(Worker, workerHandle).pipe(Layer.provide(ServingLayers)))

  /** Needs WorkerConfig and BackendStore; plane and mode come from the config. */
  static readonly layer: Layer.Layer<Worker, WorkerStartError | NativePlaneUnavailable, WorkerConfig | BackendStore> = Layer.fresh(
    Worker.layerWithoutDependencies.pipe(Layer.provide(planeAndModeLayer))
  )

  /** Needs BackendStore: settings are `explicit` > `TALON_WORKER_*` > defaults. */
  static readonly layerConfig = (
    explicit: Partial<WorkerSettings> = {}
  ): Layer.Layer<Worker, WorkerStartError | NativePlaneUnavailable | ConfigError.ConfigError, BackendStore> =>
    Worker.layer.pipe(Layer.provide(WorkerConfig.layer(explicit)))

  /** Needs BackendStore: exactly these settings over the defaults (the environment is ignored). */
  static readonly layerSettings = (
    settings: Partial<WorkerSettings>
  ): Layer.Layer<Worker, WorkerStartError | NativePlaneUnavailable | ConfigError.ConfigError, BackendStore> =>
    Worker.layer.pipe(Layer.provide(WorkerConfig.layerSettings(settings)))
}
