/**
 * The data server accepts through @effect/platform's SocketServer interface: it serves over
 * @effect/platform-node's own NodeSocketServer as well as over the worker's (which adds the
 * native plane's batch accept), on either plane, and a listen failure says which address.
 */
import * as NodeSocketServer from "@effect/platform-node/NodeSocketServer"
import { Deferred, Effect, Exit, Fiber, Layer, ManagedRuntime, Scope } from "effect"
import * as fsp from "node:fs/promises"
import * as net from "node:net"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import { encodeGetRangeFrame } from "../../src/protocol/index.js"
import { WorkerConfig } from "../../src/worker/config.js"
import { WorkerReadiness } from "../../src/worker/membership/Readiness.js"
import { WorkerMetrics } from "../../src/worker/metrics.js"
import { MissPath } from "../../src/worker/miss/MissPath.js"
import { loadNativeAddon } from "../../src/worker/plane/NativeAddon.js"
import { Sendfile } from "../../src/worker/plane/Sendfile.js"
import { ReadPath } from "../../src/worker/ReadPath.js"
import { DataServer } from "../../src/worker/server/DataServer.js"
import { ServeMode } from "../../src/worker/server/ServeMode.js"
import * as DataSocket from "../../src/worker/server/SocketServer.js"
import { BlockStore } from "../../src/worker/store/BlockStore.js"
import { makeDirBackend, pattern } from "./support/dirBackend.js"
import { makeCleanup, tempDir } from "./support/harness.js"
import { connect } from "./support/rawClient.js"
import { eventuallyAsync } from "../support/eventually.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const KiB = 1024
const obj: ObjectId = { backend: Backend.S3, bucket: "bkt", objectPath: "a" }
const native = loadNativeAddon()._tag === "Loaded"

const ReadLayers = ReadPath.layer.pipe(
  Layer.provideMerge(MissPath.layer),
  Layer.provideMerge(BlockStore.layer),
  Layer.provideMerge(Layer.mergeAll(WorkerMetrics.layer, WorkerReadiness.layer))
)

const startOver = async (
  sockets: "platform" | "worker",
  plane: "native" | "portable",
  dataAddress = "127.0.0.1:0"
) => {
  const root = await tempDir(cleanup, "talon-origin-")
  await fsp.mkdir(path.join(root, "bkt"), { recursive: true })
  const data = pattern(300 * KiB, 3)
  await fsp.writeFile(path.join(root, "bkt", "a"), data)
  const base: Layer.Layer<DataServer, unknown, Layer.Layer.Context<typeof DataServer.layer>> =
    sockets === "platform"
      ? // The stock server; a plane that reads sockets itself needs them accepted paused.
        DataServer.layerWithoutDependencies.pipe(
          Layer.provide(NodeSocketServer.layer({ host: "127.0.0.1", port: 0, pauseOnConnect: plane === "native", allowHalfOpen: true }))
        )
      : DataServer.layer
  const layer = base.pipe(
    Layer.provideMerge(ReadLayers),
    Layer.provide(Layer.mergeAll(plane === "native" ? Sendfile.Native : Sendfile.Portable, ServeMode.Pipelined, makeDirBackend(root).layer)),
    Layer.provide(
      WorkerConfig.layerSettings({
        dataAddress,
        adminAddress: "127.0.0.1:0",
        coordinator: "",
        cacheDirs: [await tempDir(cleanup, "talon-cache-")],
        blockSize: 64 * KiB,
        pageSize: 16 * KiB
      })
    )
  )
  const runtime = ManagedRuntime.make(layer)
  cleanup.add(() => runtime.dispose())
  // Standalone (no Membership): ready as soon as it listens.
  const start = async () => {
    await runtime.runPromise(Effect.flatMap(WorkerReadiness, (r) => r.update({ ready: true })))
    return runtime.runPromise(DataServer)
  }
  return { runtime, layer, start, data }
}

/** Reads the object in pipelined ranges over two connections and checks every byte. */
const readAll = async (port: number, data: Buffer) => {
  for (let c = 0; c < 2; c++) {
    const conn = await connect(port)
    try {
      const ranges = Array.from({ length: 8 }, (_, i) => ({ off: (i * 37 * KiB + c * 1111) % (250 * KiB), len: 9 * KiB + i * 777 }))
      ranges.forEach((r, i) => conn.send(encodeGetRangeFrame(i + 1, { object: obj, offset: r.off, len: r.len })))
      for (let i = 0; i < ranges.length; i++) {
        const f = await conn.next()
        expect(f.header.requestId).toBe(i + 1)
        expect(Buffer.compare(f.payload, data.subarray(ranges[i]!.off, ranges[i]!.off + ranges[i]!.len))).toBe(0)
      }
    } finally {
      conn.close()
    }
  }
}

describe("data server over a SocketServer", () => {
  for (const sockets of ["platform", "worker"] as const) {
    for (const plane of ["portable", "native"] as const) {
      it.skipIf(plane === "native" && !native)(`${sockets} socket server, ${plane} plane: every byte of pipelined ranges`, async () => {
        const { start, data } = await startOver(sockets, plane)
        const server = await start()
        await readAll(server.port, data)
        // Connections end with their sockets: the server counts none once the clients are gone.
        await eventuallyAsync(() => expect(server.connections()).toBe(0), { what: "the server counting no connections" })
      })
    }
  }

  it("a taken port is a DataServerListenError naming the address, and open connections close with the server", async () => {
    const { runtime, start } = await startOver("worker", "portable")
    const server = await start()
    const { layer: second } = await startOver("worker", "portable", `127.0.0.1:${server.port}`)
    const failure = await Effect.runPromise(Effect.flip(Effect.scoped(Layer.build(second))))
    expect(failure).toMatchObject({ _tag: "DataServerListenError", address: `127.0.0.1:${server.port}` })
    expect(String((failure as Error).message)).toMatch(/cannot listen for data connections on 127\.0\.0\.1:\d+: .*EADDRINUSE/)

    const idle = net.connect(server.port, "127.0.0.1")
    await new Promise((r) => idle.once("connect", r))
    await eventuallyAsync(() => expect(server.connections()).toBe(1), { what: "the server counting the idle connection" })
    const closed = new Promise((r) => idle.once("close", r))
    idle.on("error", () => {})
    await runtime.dispose()
    await closed
  })
})

describe("the worker's SocketServer", () => {
  const closedBy = (socket: net.Socket) => new Promise<void>((resolve) => (socket.destroyed ? resolve() : socket.once("close", () => resolve())))

  it("hands each connection its fd; a connection accepted after run ended is destroyed when the server closes", async () => {
    await Effect.runPromise(
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const server = yield* Scope.extend(DataSocket.make({ host: "127.0.0.1", port: 0 }), scope)
        expect(server.address._tag).toBe("TcpAddress")
        const port = (server.address as { port: number }).port
        const seen = yield* Deferred.make<{ fd: number | undefined; socket: net.Socket }>()
        const running = yield* Effect.fork(
          server.run(() =>
            Effect.flatMap(DataSocket.Connection.current, (c) =>
              Effect.zipRight(Deferred.succeed(seen, { fd: c.fd, socket: c.socket }), Effect.never)
            )
          )
        )
        const first = net.connect(port, "127.0.0.1")
        first.on("error", () => {})
        const accepted = yield* Deferred.await(seen)
        expect(accepted.fd).toBeGreaterThan(2)
        // Interrupting run ends its connections...
        yield* Fiber.interrupt(running)
        yield* Effect.promise(() => closedBy(first))
        expect(new DataSocket.Connection(accepted.socket).fd).toBeUndefined()
        // ...and one that arrives afterwards is only queued: closing the server must not wait for its client.
        const late = net.connect(port, "127.0.0.1")
        late.on("error", () => {})
        yield* Effect.promise(() => new Promise((r) => late.once("connect", r)))
        yield* Scope.close(scope, Exit.void)
        yield* Effect.promise(() => closedBy(late))
        const refused = yield* Effect.promise(
          () =>
            new Promise<boolean>((resolve) => {
              const s = net.connect(port, "127.0.0.1")
              s.once("connect", () => (s.destroy(), resolve(false)))
              s.once("error", () => resolve(true))
            })
        )
        expect(refused).toBe(true)
      })
    )
  })

  it("runDirect hands sockets to a callback without a fiber each: a throw ends that connection only, interrupting run ends the rest", async () => {
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const server = yield* DataSocket.make({ host: "127.0.0.1", port: 0 })
          const runDirect = DataSocket.runDirectOf(server)
          expect(runDirect).toBeDefined()
          const port = (server.address as { port: number }).port
          const handed: Array<net.Socket> = []
          const arrived = yield* Deferred.make<void>()
          let calls = 0
          const running = yield* Effect.fork(
            runDirect!((socket) => {
              calls++
              // The second connection's handler fails: only that connection goes.
              if (calls === 2) throw new Error("handler bug")
              handed.push(socket)
              if (handed.length === 2) Deferred.unsafeDone(arrived, Exit.void)
            })
          )
          const open = (): Effect.Effect<net.Socket> =>
            Effect.promise(
              () =>
                new Promise<net.Socket>((resolve) => {
                  const s = net.connect(port, "127.0.0.1", () => resolve(s))
                  s.on("error", () => {})
                })
            )
          const first = yield* open()
          yield* Effect.promise(() => eventuallyAsync(() => expect(calls).toBe(1), { what: "the first connection handed over" }))
          const second = yield* open()
          yield* Effect.promise(() => closedBy(second))
          const third = yield* open()
          yield* Deferred.await(arrived)
          expect(first.destroyed || third.destroyed).toBe(false)
          yield* Fiber.interrupt(running)
          yield* Effect.promise(() => Promise.all([closedBy(first), closedBy(third)]))
          expect(handed.every((s) => s.destroyed)).toBe(true)
        })
      )
    )
  })
})
