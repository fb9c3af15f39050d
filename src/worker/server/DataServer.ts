/**
 * The data listener: the framed protocol over the worker's SocketServer (SocketServer.ts, the
 * @effect/platform interface), one serve loop per connection (serveConnection.ts), replies
 * through the DataPlane writer in the ServeMode's order. The serve mode and the data plane are
 * layers under it; the socket server is built for the plane (paused sockets for a plane that
 * reads them itself, the plane's batch accept on the listening fd).
 */
import * as SocketServer from "@effect/platform/SocketServer"
import { Context, Data, Effect, Layer, Option, Runtime, Schedule } from "effect"
import * as net from "node:net"
import { DataPlane } from "../plane/DataPlane.js"
import { setSendBuffer } from "../plane/Native.js"
import { loadNativeAddon } from "../plane/NativeAddon.js"
import { parseHostPort } from "../../transport/address.js"
import { WorkerConfig } from "../config.js"
import { WorkerMetrics } from "../metrics.js"
import { MissPath } from "../miss/MissPath.js"
import { WorkerReadiness } from "../membership/Readiness.js"
import { ReadPath } from "../ReadPath.js"
import { BlockStore } from "../store/BlockStore.js"
import { HIT_SWEEP_MS, HitPublisher, HitSourceTag } from "./HitPublisher.js"
import { ServeMode } from "./ServeMode.js"
import { TenantLimiter } from "../tenants/TenantLimiter.js"
import { RequestHandler } from "./RequestHandler.js"
import { serveConnection } from "./serveConnection.js"
import { Writes } from "./Writes.js"
import * as DataSocket from "./SocketServer.js"
import { controlTlsFilesOf } from "../../transport/controlTls.js"
import { BackendStore } from "../../backend/BackendStore.js"
import { listObjects } from "./Listing.js"
import { admitBlock } from "./Admissions.js"

export { WORKER_CAPS } from "./frames.js"

export class DataServerListenError extends Data.TaggedError("DataServerListenError")<{
  readonly address: string
  readonly detail: string
}> {
  override get message() {
    return `cannot listen for data connections on ${this.address}: ${this.detail}`
  }
}

export interface DataServerShape {
  /** The bound address (the real port when configured with port 0). */
  readonly host: string
  readonly port: number
  readonly address: string
  /** Open connections right now. */
  readonly connections: () => number
}

/** Listens on `--data-addr` the way the plane needs (a listen failure is a DataServerListenError). */
const dataSocketServer = Layer.unwrapEffect(
  Effect.gen(function* () {
    const cfg = yield* WorkerConfig
    const plane = yield* DataPlane
    const hp = parseHostPort(cfg.dataAddress, { allowPortZero: true })
    if (hp === undefined) {
      return yield* Effect.fail(new DataServerListenError({ address: cfg.dataAddress, detail: "expected host:port" }))
    }
    const tlsFiles = cfg.dataTls ? controlTlsFilesOf(cfg) : undefined
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    return DataSocket.layer({
      host: hp.host,
      port: hp.port,
      backlog: 4096,
      // A plane that reads connections itself gets them paused: libuv must never read them.
      pauseOnConnect: plane.read !== undefined,
      ...(plane.adoptListener !== undefined ? { adopt: plane.adoptListener } : {}),
      ...(tlsFiles === undefined
        ? {}
        : {
            tls: {
              files: tlsFiles,
              refused: (peer: string, why: string) => void runFork(Effect.logWarning(`refused a data connection from ${peer}: ${why}`)),
              reloaded: (outcome: string) => void runFork(Effect.logInfo(`data TLS certificate reloaded: ${outcome}`))
            }
          })
    }).pipe(
      Layer.catchAll((e) =>
        Layer.fail(new DataServerListenError({ address: cfg.dataAddress, detail: e.cause instanceof Error ? e.cause.message : String(e.cause) }))
      )
    )
  })
)

const make = Effect.gen(function* () {
  const [cfg, plane, mode, stats] = yield* Effect.all([WorkerConfig, DataPlane, ServeMode, WorkerMetrics])
  const [miss, readiness, sockets] = yield* Effect.all([MissPath, WorkerReadiness, SocketServer.SocketServer])
  const handler = new RequestHandler(yield* ReadPath, miss, readiness, stats)
  // performance.now: monotonic and sub-millisecond, read once per admitted read without allocating.
  const limiter = cfg.rateLimits.enabled ? new TenantLimiter(cfg.rateLimits, () => performance.now()) : undefined
  handler.limiter = limiter
  // ListObjects on the data port needs the origin's client (a --loops serving loop has none: it refuses).
  const origin = Option.getOrUndefined(yield* Effect.serviceOption(BackendStore))
  if (origin !== undefined) handler.lister = (prefix) => Effect.runPromise(listObjects(origin, prefix))
  stats.tenants = limiter
  // This process's own block store (a --loops serving loop leases its owner's: none).
  const store = Option.getOrUndefined(yield* Effect.serviceOption(BlockStore))
  // Writes go through the process that owns the cache index (a --loops serving loop has none: read-only).
  if (cfg.maxPutBytes > 0 && origin !== undefined && store !== undefined) {
    handler.writes = new Writes(origin, miss.versions, store, readiness, stats, cfg.maxPutBytes, yield* Effect.runtime<never>())
  }
  // AdmitCachedBlock stores into this process's own block store (a --loops serving loop has none: it refuses).
  if (store !== undefined) handler.admitter = (r, body) => admitBlock(store, r, body)
  if (limiter?.limitsUntagged === true && cfg.hitTable) yield* Effect.logInfo("hit table off: reads without a tenant are rate limited (rate_limits.default)")
  // The plane's hit table answers untagged reads without JS, so it stays off while those are rate limited.
  // It publishes from this process's store, or from a --loops serving loop's leases.
  const source = store ?? Option.getOrUndefined(yield* Effect.serviceOption(HitSourceTag))
  const table = cfg.hitTable && source !== undefined && limiter?.limitsUntagged !== true ? plane.hitTable?.() : undefined
  if (table !== undefined && source !== undefined) {
    const publisher = new HitPublisher(table, source, miss.versions, readiness)
    handler.hits = publisher
    stats.offloaded = table.counts
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        // Counts stay readable after the table is gone.
        stats.offloaded = Float64Array.from(table.counts)
        publisher.close()
      })
    )
    // Interrupted before the finalizer above closes the publisher (finalizers run in reverse).
    yield* Effect.sync(() => publisher.sweep()).pipe(Effect.repeat(Schedule.spaced(HIT_SWEEP_MS)), Effect.forkScoped)
  }
  const sizeSendBuffer = yield* sendBufferSizer(cfg.sendBuffer)
  let open = 0
  /** Starts serving one connection; its serve loop lives on the socket's events until it closes. */
  const serveSocket = (socket: net.Socket) => {
    open++
    socket.once("close", () => void open--)
    sizeSendBuffer?.(socket)
    const connection = new DataSocket.Connection(socket)
    serveConnection(connection, {
      plane,
      writer: plane.attach(connection),
      handler,
      mode,
      stats,
      readTimeoutMs: cfg.readTimeoutMs,
      maxInflight: cfg.maxInflightPerConnection,
      hits: table
    })
  }
  const direct = DataSocket.runDirectOf(sockets)
  // Over another socket server (NodeSocketServer, a serving loop's handed sockets): one fiber per
  // connection, alive until its socket closes (interrupting it destroys the socket).
  const serve = Effect.flatMap(DataSocket.Connection.current, (connection) =>
    Effect.async<void>((resume) => {
      const socket = connection.socket
      if (socket.destroyed) return resume(Effect.void)
      socket.once("close", () => resume(Effect.void))
      serveSocket(socket)
      // Interrupted (the server is stopping): the connection goes with it, whichever socket server runs it.
      return Effect.sync(() => void socket.destroy())
    })
  )
  yield* Effect.forkScoped(direct !== undefined ? direct(serveSocket) : sockets.run(() => serve))
  const address = sockets.address
  if (address._tag !== "TcpAddress") return yield* Effect.dieMessage(`the data listener must be TCP, got ${address.path}`)
  const host = net.isIPv6(address.hostname) ? `[${address.hostname}]` : address.hostname
  yield* Effect.logInfo(`worker data listener on ${host}:${address.port} (${plane.name} plane, ${mode.name} mode${cfg.dataTls ? ", TLS" : ""})`)
  return {
    host: address.hostname,
    port: address.port,
    address: `${host}:${address.port}`,
    connections: () => open
  } satisfies DataServerShape
})

export class DataServer extends Context.Tag("talon/worker/DataServer")<DataServer, DataServerShape>() {
  /** Serves over the SocketServer in context (ours, or @effect/platform-node's NodeSocketServer). */
  static readonly layerWithoutDependencies = Layer.scoped(DataServer, make)
  /** Serves over a SocketServer listening on `--data-addr`, built for the plane. */
  static readonly layer = DataServer.layerWithoutDependencies.pipe(Layer.provide(dataSocketServer))
}

/**
 * Sets each connection's SO_SNDBUF (Node has no API for it on TCP sockets: the addon's setsockopt).
 * Without the addon the setting cannot apply, and the worker says so once at start.
 */
const sendBufferSizer = (bytes: number): Effect.Effect<((socket: net.Socket) => void) | undefined> => {
  if (bytes === 0) return Effect.succeed(undefined)
  const load = loadNativeAddon()
  if (load._tag === "Unavailable") {
    return Effect.as(
      Effect.logWarning(`--send-buffer ${bytes} is ignored: setting SO_SNDBUF needs the native addon (${load.reason})`),
      undefined
    )
  }
  return Effect.succeed((socket: net.Socket) => {
    try {
      setSendBuffer(socket, bytes)
    } catch {
      // A socket already closed by its peer: nothing to size.
    }
  })
}
