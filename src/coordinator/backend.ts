/**
 * The origin the `talon coordinator` command answers StatObject/ListObjects from, when it
 * has credentials: S3 and/or Azure, routed by each object's backend tag, configured from the
 * environment (TALON_S3_*, TALON_AZURE_*). With none configured the layer provides nothing
 * and the coordinator asks a live worker instead (Talon's design).
 */
import { Effect, Layer } from "effect"
import { BackendStore } from "../backend/BackendStore.js"
import * as Router from "../backend/Router.js"

export const coordinatorBackendLayer = Layer.unwrapEffect(
  Effect.map(Router.RouterConfig, (options) =>
    options.s3 === undefined && options.azure === undefined
      ? Layer.empty
      : Layer.scoped(BackendStore, Router.make(options))
  )
)
