/** In-process test clusters' footing: an origin and coordinator, and loopback worker settings with a cache dir per worker. */
import * as path from "node:path"
import { Effect } from "effect"
import * as Router from "../../src/backend/Router.js"
import { OriginStub } from "../../src/origin/OriginStub.js"
import { patientCoordinator } from "./loopbackCoordinator.js"
import { scopedTempDir } from "./scopedTempDir.js"
import type { WorkerSettings } from "../../src/worker/config.js"

/** `id`'s settings: data and admin on 127.0.0.1:0, its cache in `<dir>/<id>`, joined to `coordinator`, then `settings`. */
export const loopbackWorkerSettings = (
  id: string,
  dir: string,
  coordinator: string,
  settings: Partial<WorkerSettings> = {}
): Partial<WorkerSettings> => ({
  id,
  dataAddress: "127.0.0.1:0",
  adminAddress: "127.0.0.1:0",
  coordinator,
  cacheDirs: [path.join(dir, id)],
  ...settings
})

/**
 * What an in-process cluster stands on: a scoped temp dir, an origin stub in `<dir>/origin`
 * (the backend every member reads through) and a patient coordinator over it.
 */
export const originWithCoordinator = (prefix: string) =>
  Effect.gen(function* () {
    const dir = yield* scopedTempDir(prefix)
    const origin = yield* OriginStub.make({ root: path.join(dir, "origin") })
    const backend = Router.layerLocal(origin.url)
    const coordinator = yield* patientCoordinator(backend)
    return { dir, origin, backend, coordinator }
  })
