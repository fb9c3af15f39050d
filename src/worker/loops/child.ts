/**
 * One serving loop of `--loops N` (a cluster child of WorkerLoops): the
 * ordinary DataServer → ServeMode → DataPlane stack, reading through a
 * LeaseStore, with version lookups and fills delegated to the owner.
 * Exits when the owner goes away (cluster does that on IPC disconnect).
 */
import cluster from "node:cluster"
import { Cause, Context, Duration, Effect, Exit, Fiber, Layer, Schedule } from "effect"
import { Channel } from "../../actor/index.js"
import { WorkerConfig, type WorkerSettings } from "../config.js"
import { WorkerReadiness } from "../membership/Readiness.js"
import { WorkerMetrics } from "../metrics.js"
import { MissPath } from "../miss/MissPath.js"
import { Sendfile } from "../plane/Sendfile.js"
import { ReadPath, ReadPathImpl } from "../ReadPath.js"
import { DataServer } from "../server/DataServer.js"
import { HitSourceTag } from "../server/HitPublisher.js"
import { ServeMode } from "../server/ServeMode.js"
import { LeaseStore } from "./LeaseStore.js"
import { counterDeltas, makeLoopMissPath, ownerRef, serveLoop, tellOwner } from "./OwnerClient.js"
import * as HandedSockets from "./HandedSockets.js"
import { Counters, LOOP_ACCEPT_ENV, LOOP_INDEX_ENV, LOOP_SETTINGS_ENV, Release, Usage } from "./protocol.js"
import * as ReusePort from "./ReusePort.js"
import { parseHostPort } from "../../transport/address.js"

/** How often a loop reports its counters and the leases it served (the owner's LRU). */
const REPORT_EVERY = Duration.seconds(1)

const LoopServices = Layer.scopedContext(
  Effect.gen(function* () {
    const cfg = yield* WorkerConfig
    const stats = yield* WorkerMetrics
    const ready = yield* WorkerReadiness
    const loop = cluster.worker?.id
    if (typeof process.send !== "function" || loop === undefined) {
      return yield* Effect.dieMessage("a worker loop must be forked by its owner (no IPC channel)")
    }
    const channel = Channel.fromProcess(process)
    const owner = yield* ownerRef(channel)
    const store = yield* Effect.acquireRelease(
      Effect.sync(() => new LeaseStore((leases) => tellOwner(owner, new Release({ loop, leases })), cfg.maxOpenFiles)),
      (s) => Effect.sync(() => s.close())
    )
    const miss = makeLoopMissPath(owner, loop, store, cfg.versionTtlMs)
    const reader = new ReadPathImpl(store, miss, stats, cfg.blockSize, cfg.pageSize, cfg.capacity)
    const deltas = counterDeltas(stats)
    const report = () => {
      const delta = deltas()
      if (delta !== undefined) tellOwner(owner, new Counters({ loop, delta }))
      // Sent even when empty: `busy` is a snapshot, and an empty one clears the last.
      const { used, busy } = store.usage()
      tellOwner(owner, new Usage({ loop, used, busy }))
    }
    yield* Effect.forkScoped(Effect.repeat(Effect.sync(report), Schedule.spaced(REPORT_EVERY)))
    // The owner's readiness comes before the DataServer listens, so a loop never answers "not ready" by mistake.
    yield* serveLoop(channel, owner, loop, store, ready).pipe(
      Effect.catchAll((e) => Effect.dieMessage(`worker loop ${loop}: the owner did not answer its hello: ${e.message}`))
    )
    // The plane's hit table answers this loop's hits from its leases (DataServer publishes them).
    return Context.make(MissPath, miss).pipe(Context.add(ReadPath, reader), Context.add(HitSourceTag, store))
  })
)

/** The data server: on this loop's own SO_REUSEPORT socket, over the connections the owner hands it, or listening through node:cluster. */
const dataServer = (settings: WorkerSettings) => {
  const accept = process.env[LOOP_ACCEPT_ENV]
  if (accept !== "handoff" && accept !== "reuseport") return DataServer.layer
  const hp = parseHostPort(settings.dataAddress, { allowPortZero: true }) ?? { host: settings.dataAddress, port: 0 }
  const sockets = accept === "reuseport" ? ReusePort.layer(hp) : HandedSockets.layer(hp)
  return DataServer.layerWithoutDependencies.pipe(Layer.provide(sockets))
}

const loopLayer = (settings: WorkerSettings) => {
  const config = WorkerConfig.layerSettings(settings)
  return dataServer(settings).pipe(
    Layer.provideMerge(LoopServices),
    Layer.provideMerge(
      Layer.mergeAll(
        WorkerMetrics.layer,
        WorkerReadiness.layer,
        Sendfile.layerFor(settings.dataPlane),
        ServeMode.layerFor(settings.serveMode)
      )
    ),
    Layer.provide(config)
  )
}

const raw = process.env[LOOP_SETTINGS_ENV]
if (raw === undefined) {
  console.error(`worker loop: ${LOOP_SETTINGS_ENV} is not set; loops are started by \`talon worker --loops N\``)
  process.exit(2)
}
const settings = JSON.parse(raw) as WorkerSettings
const index = process.env[LOOP_INDEX_ENV] ?? "?"

// Not NodeRuntime.runMain: @effect/platform-node costs seconds of start-up per loop and this needs only signals.
const fiber = Effect.runFork(Layer.launch(loopLayer(settings)).pipe(Effect.annotateLogs("loop", index)))
const stop = () => void Effect.runFork(Fiber.interrupt(fiber))
process.once("SIGTERM", stop)
process.once("SIGINT", stop)
fiber.addObserver((exit) => {
  if (Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause)) process.exit(0)
  console.error(`worker loop ${index} failed: ${Cause.pretty(exit.cause)}`)
  process.exit(1)
})
