/**
 * `talon coordinator`: runs a coordinator until interrupted. Flags override
 * `TALON_COORDINATOR_*`, which override the config file, then the defaults.
 */
import { Command } from "@effect/cli"
import { Effect, Layer } from "effect"
import { explicitFrom, flaggedKeys, flagsOf } from "../config/cli.js"
import { coordinatorBackendLayer } from "./backend.js"
import { CoordinatorSchema, type CoordinatorOptions } from "./config.js"
import { Coordinator } from "./Coordinator.js"

/** One flag per setting, each generated from its declaration in ./config.ts. */
export const coordinatorOptions = flagsOf(CoordinatorSchema, flaggedKeys(CoordinatorSchema))

/** Flags that were given, as explicit coordinator options (the rest resolve from env, file, defaults). */
export const explicitCoordinatorOptions = explicitFrom<CoordinatorOptions, keyof CoordinatorOptions>

export const coordinator = Command.make("coordinator", coordinatorOptions, (flags) =>
  Layer.launch(Coordinator.layer(explicitCoordinatorOptions(flags)).pipe(Layer.provide(coordinatorBackendLayer))).pipe(
    Effect.asVoid
  )
).pipe(
  Command.withDescription(
    "Run the coordinator: worker membership with heartbeat liveness, the placement epoch, object metadata (StatObject/ListObjects) from the origin, and an admin HTTP API. Origin endpoints and credentials come from TALON_S3_* and TALON_AZURE_* (see the backend docs)."
  )
)
