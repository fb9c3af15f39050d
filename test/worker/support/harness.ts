/** Starts a real worker (sockets, files) from its layers for a test; every start registers its own stop. */
import * as fsp from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { Layer, ManagedRuntime } from "effect"
import type { BackendStore } from "../../../src/backend/BackendStore.js"
import type { DataPlane } from "../../../src/worker/plane/DataPlane.js"
import { Sendfile } from "../../../src/worker/plane/Sendfile.js"
import { WorkerConfig, type WorkerSettings } from "../../../src/worker/config.js"
import { ServeMode } from "../../../src/worker/server/ServeMode.js"
import { Worker, type WorkerShape } from "../../../src/worker/Worker.js"

export interface Cleanup {
  readonly add: (f: () => Promise<void>) => void
  readonly run: () => Promise<void>
}

export const makeCleanup = (): Cleanup => {
  const fns: Array<() => Promise<void>> = []
  return {
    add: (f) => void fns.push(f),
    run: async () => {
      for (const f of fns.splice(0).reverse()) await f()
    }
  }
}

export const tempDir = async (cleanup: Cleanup, prefix: string): Promise<string> => {
  const d = await fsp.mkdtemp(path.join(os.tmpdir(), prefix))
  cleanup.add(() => fsp.rm(d, { recursive: true, force: true }))
  return d
}

export interface RunningWorker {
  readonly worker: WorkerShape
  readonly stop: () => Promise<void>
}

/** A standalone worker on ephemeral loopback ports, portable plane, pipelined mode unless given. */
export const startWorker = async (
  cleanup: Cleanup,
  backend: Layer.Layer<BackendStore>,
  settings: Partial<WorkerSettings>,
  mode: Layer.Layer<ServeMode> = ServeMode.Pipelined,
  plane: Layer.Layer<DataPlane, unknown> = Sendfile.Portable
): Promise<RunningWorker> => {
  const layer = Worker.layerWithoutDependencies.pipe(
    Layer.provide(Layer.mergeAll(plane, mode, backend)),
    Layer.provide(
      WorkerConfig.layerSettings({
        dataAddress: "127.0.0.1:0",
        adminAddress: "127.0.0.1:0",
        coordinator: "",
        ...settings
      })
    )
  )
  const runtime = ManagedRuntime.make(layer)
  let stopped = false
  const stop = async () => {
    if (stopped) return
    stopped = true
    await runtime.dispose()
  }
  cleanup.add(stop)
  const worker = await runtime.runPromise(Worker)
  return { worker, stop }
}
