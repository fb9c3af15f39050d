/**
 * `talon up`: a whole cache cluster in one process, composed from the same layers the
 * separate subcommands run — origin stub (seeded), coordinator, N workers — so what a
 * newcomer runs first is what production runs, just on loopback.
 */
import { FileSystem } from "@effect/platform"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as os from "node:os"
import * as path from "node:path"
import { Context, Data, Effect, Layer, type Scope } from "effect"
import { BackendStore } from "../backend/BackendStore.js"
import * as Router from "../backend/Router.js"
import { Coordinator, type CoordinatorShape } from "../coordinator/Coordinator.js"
import { DEFAULT_BLOCK_SIZE } from "../core/ids.js"
import { Gateway, type GatewayShape } from "../gateway/Gateway.js"
import { CredentialsConfig, type RouteName } from "../gateway/config.js"
import { OriginStub, type OriginStubShape } from "../origin/OriginStub.js"
import { seed } from "../origin/seed.js"
import { Worker, type WorkerShape } from "../worker/Worker.js"
import { WorkerConfig, type WorkerSettings } from "../worker/config.js"
import { makeLocalReads } from "../worker/LocalReads.js"

export interface LocalClusterOptions {
  /** Where origin data and cache dirs live; default a fresh temp dir removed at shutdown. */
  readonly dir?: string | undefined
  /** Keep a temp `dir` after shutdown. */
  readonly keep?: boolean
  readonly workers?: number
  /** Bind every listener on port 0 instead of the documented defaults (tests, several clusters at once). */
  readonly ephemeral?: boolean
  readonly host?: string
  /** Per-worker settings applied to every worker (block size, page size, capacity, plane, mode...). */
  readonly worker?: Partial<WorkerSettings>
  readonly heartbeatIntervalMs?: number
  /** The gateway's route (default cache); `false` starts no gateway. */
  readonly gateway?: RouteName | false
  /** The gateway sends blocks resident in these workers by sendfile (default true). */
  readonly colocate?: boolean
}

export interface LocalClusterShape {
  readonly dir: string
  readonly origin: OriginStubShape
  readonly coordinator: CoordinatorShape
  readonly workers: ReadonlyArray<WorkerShape>
  readonly gateway: GatewayShape | undefined
}

export class LocalClusterError extends Data.TaggedError("LocalClusterError")<{ readonly message: string }> {}

const DEFAULT_PORTS = { origin: 9100, gateway: 9000, gatewayAdmin: 9001, control: 7000, admin: 8000, workerData: 7001, workerAdmin: 8001 }

const workDir = (options: LocalClusterOptions): Effect.Effect<string, LocalClusterError, Scope.Scope> => {
  if (options.dir !== undefined) {
    const dir = path.resolve(options.dir)
    return Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeDirectory(dir, { recursive: true })).pipe(
      Effect.as(dir),
      Effect.mapError((e) => new LocalClusterError({ message: `cannot create ${dir}: ${e.message}` })),
      Effect.provide(NodeFileSystem.layer)
    )
  }
  return Effect.flatMap(FileSystem.FileSystem, (fs) =>
    Effect.acquireRelease(
      fs.makeTempDirectory({ directory: os.tmpdir(), prefix: "talon-up-" }).pipe(
        Effect.mapError((e) => new LocalClusterError({ message: `cannot create a temp dir: ${e.message}` }))
      ),
      (dir) => (options.keep ? Effect.void : Effect.ignore(fs.remove(dir, { recursive: true })))
    )
  ).pipe(Effect.provide(NodeFileSystem.layer))
}

const make = (options: LocalClusterOptions = {}) =>
  Effect.gen(function* () {
    const host = options.host ?? "127.0.0.1"
    const port = (p: number) => (options.ephemeral ? 0 : p)
    const dir = yield* workDir(options)
    const originRoot = path.join(dir, "origin")
    yield* seed(originRoot)
    const origin = yield* OriginStub.make({ root: originRoot, host, port: port(DEFAULT_PORTS.origin) })
    const backend = yield* Router.make(Router.localOptions(origin.url))
    const heartbeatIntervalMs = options.heartbeatIntervalMs ?? 1000
    // Layer.build, not Effect.provide: the services must live as long as this scope, not one effect.
    const coordinator = Context.get(
      yield* Layer.build(
        Coordinator.layer({
          listen: `${host}:${port(DEFAULT_PORTS.control)}`,
          adminListen: `${host}:${port(DEFAULT_PORTS.admin)}`,
          heartbeatIntervalMs
        }).pipe(Layer.provide(Layer.succeed(BackendStore, backend)))
      ),
      Coordinator
    )
    const workers: Array<WorkerShape> = []
    for (let i = 0; i < (options.workers ?? 2); i++) {
      // Settings the cluster does not fix (plane, serve mode, hit table, page size, ...) still
      // come from TALON_WORKER_* as for `talon worker`.
      const settings = WorkerConfig.layer({
        ...options.worker,
        id: `worker-${i + 1}`,
        dataAddress: `${host}:${port(DEFAULT_PORTS.workerData + i)}`,
        adminAddress: `${host}:${port(DEFAULT_PORTS.workerAdmin + i)}`,
        coordinator: coordinator.controlAddress,
        cacheDirs: [path.join(dir, `cache-${i + 1}`)],
        heartbeatIntervalMs
      })
      const ctx = yield* Layer.build(
        Worker.layer.pipe(Layer.provide(settings), Layer.provide(Layer.succeed(BackendStore, backend)))
      )
      workers.push(Context.get(ctx, Worker))
    }
    const route = options.gateway ?? "cache"
    let gateway: GatewayShape | undefined
    if (route !== false) {
      // As in a real deployment, the gateway checks callers only against configured
      // credentials (TALON_GATEWAY_*); with none, a local demo runs open and says so.
      const credentials = yield* CredentialsConfig
      const local = options.colocate === false ? undefined : makeLocalReads(workers.flatMap((w) => (w.readPath === undefined ? [] : [w.readPath])))
      if (typeof local === "string") yield* Effect.logWarning(`the gateway serves every read through the data port: ${local}`)
      gateway = Context.get(
        yield* Layer.build(
          Gateway.layerDeployment({
            gateway: {
              listen: `${host}:${port(DEFAULT_PORTS.gateway)}`,
              adminListen: `${host}:${port(DEFAULT_PORTS.gatewayAdmin)}`,
              auth: credentials.s3 !== undefined || credentials.azure !== undefined
            },
            route,
            router: Router.localOptions(origin.url),
            client: {
              coordinator: coordinator.controlAddress,
              blockSize: options.worker?.blockSize ?? DEFAULT_BLOCK_SIZE
            },
            ...(local === undefined || typeof local === "string" ? {} : { local })
          })
        ),
        Gateway
      )
    }
    return { dir, origin, coordinator, workers, gateway } satisfies LocalClusterShape
  })

export class LocalCluster extends Context.Tag("talon/LocalCluster")<LocalCluster, LocalClusterShape>() {
  static readonly make = make
  static readonly layer = (options: LocalClusterOptions = {}) => Layer.scoped(LocalCluster, make(options))
}
