/**
 * `talon coordinator`: runs a coordinator until interrupted. Flags override
 * `TALON_COORDINATOR_*`, which override the config file, then the defaults.
 */
import { Command } from "@effect/cli"
import { Effect, Layer, Option } from "effect"
import { explicitFrom, flaggedKeys, flagsOf } from "../config/cli.js"
import * as HeapTrim from "../core/heapTrim.js"
import { coordinatorBackendLayer } from "./backend.js"
import { CoordinatorSchema, type CoordinatorOptions, type CoordinatorSettings } from "./config.js"
import { StateStoreSchema, type StateStoreInput, type StateStoreSettings } from "./state/config.js"
import { Coordinator } from "./Coordinator.js"

const ownFlags = flagsOf(CoordinatorSchema, flaggedKeys(CoordinatorSchema))
const stateFlags = flagsOf(StateStoreSchema, flaggedKeys(StateStoreSchema))
const stateKeys = new Set<string>(flaggedKeys(StateStoreSchema))

/** One flag per setting, generated from its declaration (./config.ts, and the state store's in ./state/config.ts). */
export const coordinatorOptions = { ...ownFlags, ...stateFlags }

type Parsed = { readonly [K in keyof typeof coordinatorOptions]: Option.Option<unknown> }

/** Flags that were given, as explicit coordinator options (the rest resolve from env, file, defaults). */
export const explicitCoordinatorOptions = (parsed: Parsed): Partial<CoordinatorOptions> => {
  const own: Record<string, Option.Option<unknown>> = {}
  const state: Record<string, Option.Option<unknown>> = {}
  for (const [key, value] of Object.entries(parsed)) (stateKeys.has(key) ? state : own)[key] = value
  const options: Partial<CoordinatorOptions> = explicitFrom<CoordinatorSettings, keyof CoordinatorSettings>(own as never)
  const store = explicitFrom<StateStoreInput, keyof StateStoreInput>(state as never) as Partial<StateStoreSettings>
  return Object.keys(store).length === 0 ? options : { ...options, state: store }
}

export const coordinator = Command.make("coordinator", coordinatorOptions, (flags) =>
  Layer.launch(Coordinator.layer(explicitCoordinatorOptions(flags)).pipe(Layer.provide(coordinatorBackendLayer), Layer.merge(HeapTrim.layer()))).pipe(
    Effect.asVoid
  )
).pipe(
  Command.withDescription(
    "Run the coordinator: worker membership with heartbeat liveness, served from a cluster state store (memory, or etcd shared by several active-active coordinators: --state etcd --etcd-endpoints URLs; the cluster token comes from TALON_CLUSTER_TOKEN), the placement epoch, object metadata (StatObject/ListObjects) from the origin, and an admin HTTP API. Origin endpoints and credentials come from TALON_S3_* and TALON_AZURE_* (see the backend docs)."
  )
)
