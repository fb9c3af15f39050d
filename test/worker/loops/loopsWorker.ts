/** A `--loops 2` worker for the loops tests (each start forks processes), and polling for what its loops report. */
import { Layer, ManagedRuntime } from "effect"
import type { BackendStore } from "../../../src/backend/BackendStore.js"
import type { WorkerSettings } from "../../../src/worker/config.js"
import { WorkerLoops } from "../../../src/worker/loops/WorkerLoops.js"
import { eventuallyAsync } from "../../support/eventually.js"
import type { Cleanup } from "../support/harness.js"

/** WorkerLoops over `backend` on ephemeral loopback ports, standalone, two loops unless `settings` say otherwise. */
export const startLoops = async (scope: Cleanup, backend: Layer.Layer<BackendStore>, settings: Partial<WorkerSettings>) => {
  const runtime = ManagedRuntime.make(
    WorkerLoops.layerSettings({
      dataAddress: "127.0.0.1:0",
      adminAddress: "127.0.0.1:0",
      coordinator: "",
      loops: 2,
      ...settings
    }).pipe(Layer.provide(backend))
  )
  scope.add(() => runtime.dispose())
  return runtime.runPromise(WorkerLoops)
}

/** Polls `cond` (a fact about other processes, reported asynchronously) until it holds or the bound passes. */
export const eventually = (cond: () => boolean, what: string, ms = 20_000): Promise<void> =>
  eventuallyAsync(
    () => {
      if (!cond()) throw new Error("not yet")
    },
    { what, within: ms, every: "50 millis" }
  )
