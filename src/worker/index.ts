/** The worker's public API: the whole worker as a layer, its parts as layers, settings and the CLI command. */
export { Worker, type WorkerShape, type WorkerStartError } from "./Worker.js"
export {
  WorkerConfig,
  WORKER_DEFAULTS,
  WORKER_ENV,
  WorkerSchema,
  resolveWorkerSettings,
  type WorkerSettings,
  type DataPlaneName,
  type ServeModeName
} from "./config.js"
export { WorkerMetrics, WorkerStats, renderPrometheus } from "./metrics.js"
export { BlockStore, BlockStoreOpenFailed } from "./store/BlockStore.js"
export { DiskStore, type DiskStoreOptions, type StoreStats, type KnownVersion } from "./store/DiskStore.js"
export { MissPath, type MissPathShape } from "./miss/MissPath.js"
export { VersionCache } from "./miss/VersionCache.js"
export { ReadPath, ReadPathImpl, type RangeReply, type ReadOutcome } from "./ReadPath.js"
export { ReadFailed } from "./errors.js"
export { DataServer, DataServerListenError, WORKER_CAPS, type DataServerShape } from "./server/DataServer.js"
export { ServeMode, type ServeModeShape, type ServeConnection, type ConnectionContext } from "./server/ServeMode.js"
export { RequestHandler, type Reply } from "./server/RequestHandler.js"
export { Membership, type MembershipShape } from "./membership/Membership.js"
export { WorkerReadiness, ReadyState } from "./membership/Readiness.js"
export { AdminHttp, AdminListenError, type AdminHttpShape } from "./admin/WorkerAdminHttp.js"
export { worker, workerOptions, explicitWorkerSettings, workerBackendLayer } from "./cli.js"
