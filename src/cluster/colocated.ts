/**
 * `talon gateway --colocate`: a cache worker in the gateway's process, so the gateway sends the
 * blocks resident in it to clients by sendfile (see gateway/localBody.ts). The worker is the one
 * `talon worker` runs (settings from TALON_WORKER_*), with the gateway's origin identity.
 */
import { Context, Data, Effect, Layer } from "effect"
import { BackendStore } from "../backend/BackendStore.js"
import * as Router from "../backend/Router.js"
import { type ColocatedWorker, LocalBlocks } from "../gateway/localBlocks.js"
import { makeLocalReads } from "../worker/LocalReads.js"
import { Worker } from "../worker/Worker.js"

export class ColocateError extends Data.TaggedError("ColocateError")<{ readonly message: string }> {}

export const colocatedWorker: ColocatedWorker = (router) =>
  Layer.scoped(
    LocalBlocks,
    Effect.gen(function* () {
      const backend = yield* Router.make(router)
      const worker = Context.get(yield* Layer.build(Worker.layerConfig({}).pipe(Layer.provide(Layer.succeed(BackendStore, backend)))), Worker)
      yield* Effect.logInfo(`co-located worker ${worker.node.id} on ${worker.dataAddress} (${worker.dataPlane} plane)`)
      const local = worker.readPath === undefined ? "the worker runs serving loops (--loops > 1); run it with one loop" : makeLocalReads([worker.readPath])
      if (typeof local === "string") return yield* Effect.fail(new ColocateError({ message: `--colocate cannot send local blocks: ${local}` }))
      return local
    })
  )
