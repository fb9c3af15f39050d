export { CLIENT_DEFAULTS, resolveClientOptions, type TalonClientOptions } from "./config.js"
export {
  CoordinatorUnavailable,
  InvalidRequest,
  NoWorkers,
  ObjectNotFound,
  ReadFailed,
  VersionChanged,
  type TalonClientError
} from "./errors.js"
export { TalonClient, createTalonClient, makeTalonClient, parseTarget, toListPrefix } from "./TalonClient.js"
export type { ListEntry, ObjectInfo, ObjectTarget, TalonClientPromise, TalonClientShape } from "./TalonClient.js"
export { WorkerRejected, WorkerUnavailable } from "./WorkerPool.js"
