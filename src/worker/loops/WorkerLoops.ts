/**
 * `--loops N`: one data port served by N processes, Node's analogue of
 * Talon's rings. The process that builds this layer becomes the cluster
 * primary and the cache's single index owner (see LeaseOwner for why); it
 * forks N serving loops (loops/child.ts) that each run the ordinary
 * DataServer → ServeMode → DataPlane stack over a leased view of the store.
 *
 *   primary = BlockStore + MissPath (fills) + owner actor (LeaseOwner table) + Membership + AdminHttp
 *   loop ×N = DataServer ← ServeMode ← DataPlane, ReadPath ← LeaseStore, a Remote.ref to the owner
 *
 * Each loop's plane answers repeated hits natively from its own hit table, over the units the loop
 * holds leases on (HitPublisher over the LeaseStore): a revoked lease or a dropped version is
 * unpublished before the lease goes back, so the table never serves an evicted or stale block.
 *
 * The owner is an actor (OwnerActor.ts) served on each loop's cluster IPC channel
 * (src/actor/Remote.ts); each loop serves its own actor there for the owner's revokes and
 * readiness. No file fds cross the channel: a loop opens leased files by path.
 *
 * Connections reach the loops by SO_REUSEPORT (each loop accepts on its own
 * socket of the port in its native plane, ReusePort.ts; the default where the
 * native plane loads), balanced (`--loops-accept dealt`, or no native plane:
 * the primary listens and deals each connection to the loop with the fewest
 * open, HandOff.ts), or through Node's cluster module when
 * `NODE_CLUSTER_SCHED_POLICY` asks for it: `rr` (round-robin: the primary
 * accepts and hands each connection to the first loop free to take it) or
 * `none` (shared: every loop accepts on one listening socket and the kernel
 * picks). With `--data-tls` the loops' own TLS servers accept, so it is
 * cluster round-robin there.
 *
 * The worker registers once with the coordinator: one node id for the port,
 * whatever N is. /metrics on the primary sums what the loops report.
 */
import cluster, { type Address, type Worker as ClusterWorker } from "node:cluster"
import * as net from "node:net"
import { fileURLToPath } from "node:url"
import { Cause, Context, Data, Deferred, Duration, Effect, Exit, FiberSet, Layer, Schedule } from "effect"
import { type ActorError, type ActorRef, Channel, Remote, Supervision } from "../../actor/index.js"
import type { BackendStore } from "../../backend/BackendStore.js"
import { AdminHttp } from "../admin/WorkerAdminHttp.js"
import { parseHostPort } from "../../transport/address.js"
import { resolveWorkerSettings, WorkerConfig, type WorkerSettings } from "../config.js"
import { Membership } from "../membership/Membership.js"
import { WorkerReadiness } from "../membership/Readiness.js"
import { WorkerMetrics } from "../metrics.js"
import { MissPath } from "../miss/MissPath.js"
import { DataServer, type DataServerShape } from "../server/DataServer.js"
import { BlockStore } from "../store/BlockStore.js"
import { planeAndModeLayer, Worker, workerHandle, type WorkerShape } from "../Worker.js"
import * as HandOff from "./HandOff.js"
import * as ReusePort from "./ReusePort.js"
import { LeaseOwner } from "./LeaseOwner.js"
import { Attach, Detach, EnforceCapacity, forLoops, makeOwnerActor } from "./OwnerActor.js"
import {
  connectionMessageKind,
  LOOP_ACCEPT_ENV,
  LOOP_ACTOR,
  LOOP_INDEX_ENV,
  LOOP_SETTINGS_ENV,
  LoopMessage,
  Ready,
  type Readiness,
  Revoke
} from "./protocol.js"

export type Scheduling = "reuseport" | "balanced" | "round-robin" | "shared"

/**
 * SO_REUSEPORT where the native plane loads, unless `--loops-accept dealt` or
 * NODE_CLUSTER_SCHED_POLICY says otherwise. A loop serves its connections for
 * their whole life, so what matters is how fast a burst of connects reaches the
 * loops and how evenly it spreads. Dealt by the primary (balanced), the split is
 * within one connection, but every connection crosses the loop's IPC channel one
 * handle at a time, each send waiting for the last one's ack: a 1024-connect
 * burst waited up to seconds to be served. With SO_REUSEPORT each loop accepts a
 * burst itself, natively, and the kernel's hash spreads it about evenly
 * (bench/dataplane-bench.ts, BENCHMARKS.md). Node's own policies spread a burst
 * worse: on a shared socket whichever loop wakes first takes most of it; cluster
 * round-robin deals to whichever loop acknowledges first (47/17 of 64 measured
 * by bench/dataplane-loops-probe.ts).
 */
export const schedulingFor = (cfg: Pick<WorkerSettings, "dataTls" | "dataPlane" | "loopsAccept">): Scheduling => {
  const policy = process.env["NODE_CLUSTER_SCHED_POLICY"]
  if (policy === "none") return "shared"
  if (policy === "rr" || cfg.dataTls) return "round-robin"
  if (cfg.loopsAccept === "dealt" || cfg.dataPlane === "portable" || ReusePort.reusePortAddon() === undefined) return "balanced"
  return "reuseport"
}

export class LoopsStartError extends Data.TaggedError("LoopsStartError")<{ readonly detail: string }> {
  override get message() {
    return `cannot start the worker's serving loops: ${this.detail}`
  }
}

export interface LoopInfo {
  /** Cluster worker id (unique per fork; a restarted loop gets a new one). */
  readonly id: number
  /** 1..N */
  readonly index: number
  readonly pid: number
}

export interface LoopsControl {
  readonly loops: number
  readonly scheduling: Scheduling
  /** The loops running now. */
  readonly running: () => ReadonlyArray<LoopInfo>
  /** Leases outstanding and what each loop reported. */
  readonly report: () => ReturnType<LeaseOwner["report"]>
  /** Loops restarted after an unexpected exit. */
  readonly restarts: () => number
  /** Balanced (dealt) scheduling: open connections per loop (cluster worker id) as dealt; empty otherwise. */
  readonly dealt: () => ReadonlyMap<number, number>
}

export class LoopsControlTag extends Context.Tag("talon/worker/LoopsControl")<LoopsControlTag, LoopsControl>() {}

const childEntry = fileURLToPath(new URL("./child-entry.mjs", import.meta.url))

/** How often the owner checks capacity on its own (fills check it at once). */
const CAPACITY_CHECK = Duration.seconds(1)
/** A loop that exits unexpectedly is replaced after this pause (so a crash loop cannot spin). */
const LOOP_RESTART_SCHEDULE = Schedule.spaced(Duration.millis(500))
/** How long a stopping loop may drain its connections before it is killed. */
const STOP_GRACE = Duration.seconds(10)

/** A serving loop's process ended while the worker was not stopping: its supervision restarts it. */
class LoopExited extends Data.TaggedError("LoopExited")<{ readonly index: number; readonly pid: number | undefined; readonly how: string }> {
  override get message() {
    return `worker loop ${this.index} (pid ${this.pid}) exited unexpectedly (${this.how}); starting a new one`
  }
}

const hasExited = (w: ClusterWorker) => w.process.exitCode !== null || w.process.signalCode !== null

const exitOf = (w: ClusterWorker) =>
  Effect.async<string>((resume) => {
    if (hasExited(w)) return resume(Effect.succeed(w.process.signalCode ?? `code ${w.process.exitCode}`))
    w.once("exit", (code, signal) => resume(Effect.succeed(signal ?? `code ${code}`)))
  })

/** SIGTERM, then SIGKILL if the loop is still draining after STOP_GRACE; done when it has exited. */
const stopLoop = (w: ClusterWorker) =>
  Effect.suspend(() => {
    if (hasExited(w)) return Effect.void
    w.process.kill("SIGTERM")
    return exitOf(w).pipe(
      Effect.timeout(STOP_GRACE),
      Effect.catchAll(() => Effect.zipRight(Effect.sync(() => w.process.kill("SIGKILL")), exitOf(w))),
      Effect.asVoid
    )
  })

/**
 * The primary's DataServer: N forked loops listening on the configured address.
 * Also provides LoopsControl. Fails if a loop exits before it listens.
 *
 * Each loop is a fiber of this layer's scope that supervises the loop's process (the actors'
 * Supervision with a fixed pause between restarts): an incarnation forks the process, wires its
 * IPC actors in its own scope and ends when the process exits; closing the layer's scope stops
 * every loop (SIGTERM to all at once, SIGKILL after STOP_GRACE).
 */
const LoopsListener = Layer.scopedContext(
  Effect.gen(function* () {
    const [cfg, store, miss, stats, state] = yield* Effect.all([WorkerConfig, BlockStore, MissPath, WorkerMetrics, WorkerReadiness])
    if (!cluster.isPrimary) return yield* Effect.fail(new LoopsStartError({ detail: "this process is itself a cluster worker" }))
    if (!(cfg.loops >= 2)) return yield* Effect.fail(new LoopsStartError({ detail: `--loops ${cfg.loops}: the multi-loop server needs at least 2` }))
    const scheduling = schedulingFor(cfg)
    if (process.env["NODE_CLUSTER_SCHED_POLICY"] === undefined && scheduling === "round-robin") {
      // Frozen by Node at the first fork of this process; later WorkerLoops in the same process share it.
      cluster.schedulingPolicy = cluster.SCHED_RR
    }
    // Every fiber this layer starts (loops, tells from node:cluster callbacks) ends with its scope.
    const fibers = yield* FiberSet.make<unknown, unknown>()
    const run = yield* FiberSet.runtime(fibers)<never>()
    const clock = yield* Effect.clock
    // Read-only from here (control.report); every change goes through the actor's mailbox.
    const owner = new LeaseOwner(store, stats, () => clock.unsafeCurrentTimeMillis())
    const readiness = (): Readiness => ({ ready: state.ready, registered: state.registered, detail: state.detail })
    const actor = yield* makeOwnerActor({ table: owner, miss, ttlMs: cfg.versionTtlMs, readiness })
    /** Each running loop's actor, reached over its IPC channel. */
    const loopRefs = new Map<number, ActorRef<LoopMessage, ActorError>>()
    const tell = (ref: ActorRef<LoopMessage, ActorError>, msg: LoopMessage) => void run(Effect.ignore(ref.tell(msg)))
    const unsubscribe = state.subscribe(() => {
      const ready = new Ready({ readiness: readiness() })
      for (const ref of loopRefs.values()) tell(ref, ready)
    })
    yield* Effect.addFinalizer(() => Effect.sync(unsubscribe))

    const running = new Map<number, { readonly worker: ClusterWorker; readonly index: number }>()
    let stopping = false
    let restarts = 0
    const dealer =
      scheduling === "balanced"
        ? yield* HandOff.listen(cfg.dataAddress).pipe(Effect.mapError((detail) => new LoopsStartError({ detail })))
        : undefined
    // Held until the layer closes: the port stays this worker's while loops die and restart.
    const reserved =
      scheduling === "reuseport"
        ? yield* ReusePort.reserve(ReusePort.reusePortAddon()!, cfg.dataAddress).pipe(Effect.mapError((e) => new LoopsStartError({ detail: e.message })))
        : undefined
    const owned = dealer ?? reserved
    // node:cluster shares one listening handle per address *as configured*: two WorkerLoops of one
    // process both asking for port 0 would end up on one port. So port 0 becomes a concrete free port first.
    const dataAddress = owned !== undefined ? formatAddress(owned.host, owned.port) : yield* concreteAddress(cfg.dataAddress)
    const settingsJson = JSON.stringify({ ...cfg, dataAddress } satisfies WorkerSettings)
    const accept = dealer !== undefined ? "handoff" : reserved !== undefined ? "reuseport" : undefined
    const loopEnv = { [LOOP_SETTINGS_ENV]: settingsJson, ...(accept !== undefined ? { [LOOP_ACCEPT_ENV]: accept } : {}) }

    /** One life of loop `index`: its process and IPC actors, until the process exits. */
    const incarnation = (index: number, listened: Deferred.Deferred<Address, LoopsStartError>) =>
      Effect.scoped(
        Effect.gen(function* () {
          const w = yield* Effect.acquireRelease(
            Effect.sync(() => {
              cluster.setupPrimary({ exec: childEntry, args: [], execArgv: [], silent: false })
              const w = cluster.fork({ ...loopEnv, [LOOP_INDEX_ENV]: String(index) })
              if (owned === undefined) {
                w.once("listening", (address) => Deferred.unsafeDone(listened, Exit.succeed(address)))
                return w
              }
              w.on("message", (m: unknown) => {
                const kind = connectionMessageKind(m)
                if (kind === "closed") dealer?.closed(w.id)
                else if (kind === "serving") {
                  dealer?.serving(w)
                  Deferred.unsafeDone(listened, Exit.succeed({ address: owned.host, port: owned.port, addressType: 4 }))
                }
              })
              return w
            }),
            stopLoop
          )
          running.set(w.id, { worker: w, index })
          // The owner actor served on the loop's IPC channel, and the loop's actor reached over it.
          const channel = Channel.fromProcess(w.process)
          const loopRef = yield* Effect.zipLeft(
            Remote.ref(channel, { name: LOOP_ACTOR, protocol: LoopMessage }),
            Remote.serve(forLoops(actor), channel)
          )
          loopRefs.set(w.id, loopRef)
          // Asked, not told: the mailbox holds Attach ahead of anything the loop sends.
          yield* Effect.orDie(actor.ask(new Attach({ loop: w.id, revoke: (leases) => tell(loopRef, new Revoke({ leases })) })))
          yield* Effect.addFinalizer(() =>
            Effect.sync(() => {
              running.delete(w.id)
              loopRefs.delete(w.id)
              dealer?.gone(w.id)
            }).pipe(Effect.zipRight(Effect.ignore(actor.ask(new Detach({ loop: w.id })))))
          )
          const how = yield* exitOf(w)
          if (stopping) return
          if (!(yield* Deferred.isDone(listened))) {
            yield* Deferred.fail(
              listened,
              new LoopsStartError({ detail: `loop ${index} exited before it listened on ${dataAddress} (${how}); its log above says why` })
            )
            return
          }
          return yield* Effect.fail(Cause.fail(new LoopExited({ index, pid: w.process.pid, how })))
        })
      )

    const supervision = Supervision.restart(LOOP_RESTART_SCHEDULE, () => Effect.sync(() => void restarts++))
    const listening: Array<Deferred.Deferred<Address, LoopsStartError>> = []
    for (let i = 1; i <= cfg.loops; i++) {
      const listened = yield* Deferred.make<Address, LoopsStartError>()
      listening.push(listened)
      yield* FiberSet.run(fibers, Supervision.supervise(`worker loop ${i}`, incarnation(i, listened), supervision))
    }
    // Before the fibers are interrupted (finalizers run last-added first): no restarts from here
    // on, and every loop gets its SIGTERM at once so they drain side by side.
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        stopping = true
        for (const { worker } of running.values()) if (!hasExited(worker)) worker.process.kill("SIGTERM")
      })
    )
    yield* Effect.forkScoped(Effect.repeat(Effect.ignore(actor.ask(new EnforceCapacity())), Schedule.spaced(CAPACITY_CHECK)))
    const [first] = yield* Effect.all(listening.map(Deferred.await))
    const bound = { host: first!.address ?? "127.0.0.1", port: first!.port }

    const host = bound.host.includes(":") ? `[${bound.host}]` : bound.host
    const server: DataServerShape = {
      host: bound.host,
      port: bound.port,
      address: `${host}:${bound.port}`,
      connections: () => stats.connectionsOpen
    }
    const control: LoopsControl = {
      loops: cfg.loops,
      scheduling,
      running: () => [...running.values()].map((r) => ({ id: r.worker.id, index: r.index, pid: r.worker.process.pid ?? -1 })),
      report: () => owner.report(),
      restarts: () => restarts,
      dealt: () => dealer?.open() ?? new Map()
    }
    return Context.make(DataServer, server).pipe(Context.add(LoopsControlTag, control))
  })
)

const formatAddress = (host: string, port: number) => `${host.includes(":") ? `[${host}]` : host}:${port}`

/** `host:0` → `host:<a port free right now>` (checked by binding it); any other address as is, once known bindable. */
const concreteAddress = (address: string) =>
  Effect.async<string, LoopsStartError>((resume) => {
    const hp = parseHostPort(address, { allowPortZero: true })
    if (hp === undefined) return resume(Effect.fail(new LoopsStartError({ detail: `--data-addr ${address}: expected host:port` })))
    const probe = net.createServer()
    probe.once("error", (e) => resume(Effect.fail(new LoopsStartError({ detail: `cannot listen on ${address}: ${e.message}` }))))
    probe.listen({ host: hp.host, port: hp.port, exclusive: true }, () => {
      const port = (probe.address() as net.AddressInfo).port
      probe.close(() => resume(Effect.succeed(`${hp.host.includes(":") ? `[${hp.host}]` : hp.host}:${port}`)))
    })
  })

/** A worker of N loops: `store` is the owner's (the only index of the cache dirs), `stats` the owner's counters plus everything the loops reported. */
export interface WorkerLoopsShape extends WorkerShape {
  readonly loops: LoopsControl
}

const OwnerCore = MissPath.layer.pipe(
  Layer.provideMerge(BlockStore.layer),
  Layer.provideMerge(Layer.mergeAll(WorkerMetrics.layer, WorkerReadiness.layer))
)

const PrimaryLayers = Membership.layer.pipe(Layer.provideMerge(AdminHttp.layer)).pipe(
  Layer.provideMerge(LoopsListener),
  Layer.provideMerge(OwnerCore)
)

const make = Effect.gen(function* () {
  const worker = yield* workerHandle
  const loops = yield* LoopsControlTag
  const pids = loops.running().map((l) => l.pid)
  yield* Effect.logInfo(
    `worker data listener on ${worker.dataAddress} (${worker.dataPlane} plane, ${worker.serveMode} mode, ${loops.loops} loops, ${loops.scheduling}; pids ${pids.join(", ")})`
  )
  return { ...worker, loops } satisfies WorkerLoopsShape
})

export class WorkerLoops extends Context.Tag("talon/worker/WorkerLoops")<WorkerLoops, WorkerLoopsShape>() {
  /** Needs WorkerConfig (with loops ≥ 2) and BackendStore; plane and mode come from the config. */
  static readonly layer: Layer.Layer<WorkerLoops, unknown, WorkerConfig | BackendStore> = Layer.fresh(
    Layer.effect(WorkerLoops, make).pipe(Layer.provide(PrimaryLayers), Layer.provide(planeAndModeLayer))
  )

  /** Needs BackendStore: exactly these settings over the defaults (the environment is ignored). */
  static readonly layerSettings = (settings: Partial<WorkerSettings>): Layer.Layer<WorkerLoops, unknown, BackendStore> =>
    WorkerLoops.layer.pipe(Layer.provide(WorkerConfig.layerSettings(settings)))
}

/**
 * What `talon worker` runs: the single-process Worker for `--loops 1`, else
 * WorkerLoops. Settings are `explicit` > `TALON_WORKER_*` > defaults.
 */
export const workerProcessLayer = (explicit: Partial<WorkerSettings>): Layer.Layer<never, unknown, BackendStore> =>
  Layer.unwrapEffect(
    Effect.map(resolveWorkerSettings(explicit), (settings): Layer.Layer<never, unknown, BackendStore> => {
      const config = WorkerConfig.layerSettings(settings)
      return settings.loops > 1 ? WorkerLoops.layer.pipe(Layer.provide(config)) : Worker.layer.pipe(Layer.provide(config))
    })
  )
