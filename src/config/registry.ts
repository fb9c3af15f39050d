/** Every component's settings schema, in the order docs/configuration.md lists them. */
import { ClientSchema, ClusterViewSchema } from "../client/config.js"
import { PrefetchSchema } from "../client/prefetchConfig.js"
import { UpSchema } from "../cluster/config.js"
import { CoordinatorSchema } from "../coordinator/config.js"
import { StateStoreSchema } from "../coordinator/state/config.js"
import { GatewayCommandSchema, GatewayCredentialsSchema, GatewaySchema } from "../gateway/config.js"
import { LoadgenSchema } from "../loadgen/config.js"
import { MountSchema } from "../mount/config.js"
import { OriginSchema } from "../origin/config.js"
import { WorkerSchema } from "../worker/config.js"
import type { Component } from "./Setting.js"
import { TracesSchema } from "./traces.js"

export const ALL_COMPONENTS: ReadonlyArray<Component<any>> = [
  WorkerSchema,
  CoordinatorSchema,
  StateStoreSchema,
  GatewaySchema,
  GatewayCommandSchema,
  GatewayCredentialsSchema,
  ClientSchema,
  ClusterViewSchema,
  PrefetchSchema,
  OriginSchema,
  UpSchema,
  LoadgenSchema,
  MountSchema,
  TracesSchema
]
