/**
 * Programmatic embedding: every component as an Effect layer. The headline services are
 * exported by name; each component's full API is also available as a namespace (the
 * namespaces keep same-named errors such as `Worker.ReadFailed` / `Client.ReadFailed` apart).
 *
 *   LocalCluster.layer({ workers: 2 })            // what `talon up` runs
 *   Worker.layerConfig({ pageSize: 0 })            // + a BackendStore layer
 *   Coordinator.layer({ listen: "127.0.0.1:7000" }) // + a BackendStore layer
 *   TalonClient.layer({ coordinator: "127.0.0.1:7000" })
 *   Prefetch.layer({ coordinator })               // warm a prefix: prefetch("s3://b/p/")
 *   Gateway.layerDeployment({ route: "cache", router, client })
 *   Actor.make({ name, protocol, capacity, initial, handlers }) // scoped; Remote.serve / Remote.ref
 *   Loadgen.layer                                 // load runs against any GetRange server
 */
export { LocalCluster, type LocalClusterOptions, type LocalClusterShape } from "./cluster/LocalCluster.js"
export { Coordinator } from "./coordinator/Coordinator.js"
export { Worker } from "./worker/Worker.js"
export { Sendfile } from "./worker/plane/Sendfile.js"
export { DataPlane } from "./worker/plane/DataPlane.js"
export { ServeMode } from "./worker/server/ServeMode.js"
export { TalonClient, createTalonClient } from "./client/TalonClient.js"
export { CacheMiss } from "./client/errors.js"
export { Prefetch } from "./client/prefetch.js"
export { WriteFailed, type PutBody, type PutResult } from "./client/Writer.js"
export type { ZoneStats } from "./client/zones.js"
export { BackendStore } from "./backend/BackendStore.js"
export { OriginStub } from "./origin/OriginStub.js"
export { Gateway } from "./gateway/Gateway.js"
export { Maglev, Rendezvous } from "./placement/index.js"
export {
  Loadgen,
  LoadgenError,
  type LoadgenShape,
  type LoadResult,
  type LoadSpec,
  type LoadSpecInput,
  loadSpec
} from "./loadgen/Loadgen.js"
export {
  Actor,
  ActorCrashed,
  type ActorError,
  type ActorRef,
  ActorStopped,
  Channel,
  type LocalActorError,
  MailboxFull,
  Remote,
  RemoteProtocolError,
  RemoteUnavailable,
  Supervision,
  SupervisionEvent
} from "./actor/index.js"

export * as Core from "./core/index.js"
export * as Protocol from "./protocol/index.js"
export * as Placement from "./placement/index.js"
export * as Backend from "./backend/index.js"
export * as Origin from "./origin/index.js"
export * as CoordinatorApi from "./coordinator/index.js"
export * as WorkerApi from "./worker/index.js"
export * as Transport from "./transport/index.js"
export * as Client from "./client/index.js"
export * as GatewayApi from "./gateway/index.js"
