/**
 * `talon worker`: runs one worker until interrupted. Flags override
 * `TALON_WORKER_*`, which override the config file, then the defaults.
 */
import { Command } from "@effect/cli"
import { Effect, Layer } from "effect"
import * as Router from "../backend/Router.js"
import * as HeapTrim from "../core/heapTrim.js"
import { explicitFrom, flaggedKeys, flagsOf } from "../config/cli.js"
import { WorkerSchema, type WorkerSettings } from "./config.js"
import { workerProcessLayer } from "./loops/WorkerLoops.js"

/** One flag per setting, each generated from its declaration in ./config.ts. */
export const workerOptions = flagsOf(WorkerSchema, flaggedKeys(WorkerSchema))

/** Flags that were given, as explicit settings (the rest resolve from env, file, defaults). */
export const explicitWorkerSettings = explicitFrom<WorkerSettings, keyof WorkerSettings>

/** The origin the `talon worker` command fills from: S3 and/or Azure from the environment (TALON_S3_*, TALON_AZURE_*). */
export const workerBackendLayer = Router.layerConfig

export const worker = Command.make("worker", workerOptions, (flags) =>
  Layer.launch(workerProcessLayer(explicitWorkerSettings(flags)).pipe(Layer.provide(workerBackendLayer), Layer.merge(HeapTrim.layer()))).pipe(Effect.asVoid)
).pipe(
  Command.withDescription(
    "Run a cache worker: a block cache on local disk (whole or paged blocks, LRU under --capacity), filled from the origin on a miss and served over the Talon data protocol; registers and heartbeats with the coordinator; admin HTTP with health and Prometheus metrics. Origin endpoints and credentials come from TALON_S3_* and TALON_AZURE_* (see the backend docs)."
  )
)
