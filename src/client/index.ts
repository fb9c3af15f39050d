export { CLIENT_DEFAULTS, resolveClientOptions, type TalonClientOptions } from "./config.js"
export {
  CacheMiss,
  CoordinatorUnavailable,
  InvalidRequest,
  NoWorkers,
  ObjectNotFound,
  RateLimited,
  ReadFailed,
  VersionChanged,
  type TalonClientError
} from "./errors.js"
export { TalonClient, createTalonClient, makeTalonClient, parseTarget, toListPrefix } from "./TalonClient.js"
export type { ControlPlaneStats, ListEntry, ReadAheadStats, ObjectInfo, ObjectTarget, RawRead, TalonClientPromise, TalonClientShape } from "./TalonClient.js"
export { ClientConfig } from "./ClientConfig.js"
export { Coordinators, coordinatorList } from "./Coordinators.js"
export { MembershipCache, type WorkerMembership } from "./MembershipCache.js"
export { Reader } from "./Reader.js"
export { StatCache } from "./StatCache.js"
export { Workers } from "./Workers.js"
export { CachedReads, type CachedReadError } from "./cachedReads.js"
export { WorkerRejected, WorkerUnavailable } from "./WorkerPool.js"
export { Prefetch, LISTING_CAP, type PrefetchFailure, type PrefetchProgress, type PrefetchRequest, type PrefetchSummary } from "./prefetch.js"
export { clusterCapacity, type ClusterCapacity } from "./prefetchCapacity.js"
export { CapacityUnknown, NothingToPrefetch, PrefetchIncomplete, PrefetchTooLarge } from "./prefetchErrors.js"
export { Writer, WriteFailed, type PutBody, type PutResult } from "./Writer.js"
export { ZoneAffinity, preferZone, type ZoneStats } from "./zones.js"
