/** Worker settings for in-process test clusters: loopback on ephemeral ports, a cache dir per worker. */
import * as path from "node:path"
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
