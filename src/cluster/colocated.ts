/**
 * `talon gateway --colocate`: a cache worker in the gateway's process, so the gateway sends the
 * blocks resident in it to clients by sendfile (see gateway/localBody.ts). The worker is the one
 * `talon worker` runs (settings from TALON_WORKER_*), with the gateway's origin identity.
 */
import { Context, Data, Effect, Layer } from "effect"
import { BackendStore } from "../backend/BackendStore.js"
import * as Router from "../backend/Router.js"
import { type ColocatedWorker, LocalBlocks } from "../gateway/localBlocks.js"
import { resolveClientOptions } from "../client/config.js"
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
      // The gateway's reads are charged to its client's tenant, local hits included.
      const { tenant } = yield* resolveClientOptions()
      const local =
        worker.readPath === undefined
          ? "the worker serves through --loops > 1 loop processes, and this process (where the gateway's sockets are) serves no reads itself; run the co-located worker with one loop (TALON_WORKER_LOOPS=1)"
          : makeLocalReads([worker.readPath], { limiters: [worker.stats.tenants], tenant })
      if (typeof local === "string") return yield* Effect.fail(new ColocateError({ message: `--colocate cannot send local blocks: ${local}` }))
      return local
    })
  )
