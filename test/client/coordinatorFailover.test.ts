/**
 * The client's coordinator setting as a list: entries asked in turn, the one that
 * answers kept, a dead or hung entry left for the next, every read's bytes checked.
 * Real coordinators (in this process) and fake workers over loopback sockets; the
 * kill -9 of a coordinator process is test/faults/coordinatorFailover.test.ts.
 */
import { randomBytes } from "node:crypto"
import * as net from "node:net"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Logger, Scope } from "effect"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import { makeCoordinator, makeCoordinatorOn } from "../../src/coordinator/Coordinator.js"
import { ClusterStateStore } from "../../src/coordinator/state/ClusterStateStore.js"
import { StoreUnavailable } from "../../src/coordinator/state/errors.js"
import { NodeRole } from "../../src/core/ids.js"
import { ControlChannel } from "../../src/transport/ControlChannel.js"
import type { MemoryObject } from "../coordinator/fixtures/memoryBackend.js"
import { memoryBackend } from "../coordinator/fixtures/memoryBackend.js"
import { FakeWorker } from "./fixtures/fakeWorker.js"
import { deadAddress } from "../support/deadAddress.js"

const BLOCK = 64 * 1024
const data = randomBytes(3 * BLOCK + 77)
const URI = "s3://bucket/failover.bin"
const storeObjects = new Map<string, MemoryObject>([["/s3/bucket/failover.bin", { bytes: data, version: "v1" }]])

/** A peer that accepts connections and reads requests but never answers (a hung coordinator). */
const hungPeer = Effect.acquireRelease(
  Effect.promise(
    () =>
      new Promise<{ server: net.Server; address: string; bytes: () => number; sockets: Set<net.Socket> }>((resolve) => {
        let bytes = 0
        const sockets = new Set<net.Socket>()
        const server = net.createServer((s) => {
          sockets.add(s)
          s.on("data", (d) => (bytes += d.length))
          s.on("close", () => sockets.delete(s))
        })
        server.listen(0, "127.0.0.1", () =>
          resolve({ server, address: `127.0.0.1:${(server.address() as net.AddressInfo).port}`, bytes: () => bytes, sockets })
        )
      })
  ),
  (p) =>
    Effect.promise(
      () =>
        new Promise<void>((r) => {
          for (const s of p.sockets) s.destroy()
          p.server.close(() => r())
        })
    )
)

/** A coordinator in its own scope (so the test can stop it) with `worker` registered. */
const coordinatorWith = (worker: FakeWorker) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const c = yield* makeCoordinator({ listen: "127.0.0.1:0", adminListen: "127.0.0.1:0", heartbeatIntervalMs: 60_000 }).pipe(
      Effect.provide(memoryBackend(storeObjects)),
      Scope.extend(scope)
    )
    yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
    const control = yield* ControlChannel.make(c.controlAddress)
    yield* control.request({ _tag: "Register", node: { id: "worker-0", address: worker.address, role: NodeRole.Worker } })
    return { address: c.controlAddress, stop: Scope.close(scope, Exit.void) }
  })

/**
 * A real coordinator whose state store never answers a read (etcd down, as a coordinator sees it):
 * it starts unready and refuses membership and placement with "coordinator not ready".
 */
const unreadyCoordinator = Effect.gen(function* () {
  const memory = Context.get(yield* Layer.build(ClusterStateStore.Memory({ requestTimeoutMs: 100 })), ClusterStateStore)
  const down = new StoreUnavailable({ backend: "memory", operation: "list", detail: "the store is down" })
  const store = { ...memory, snapshot: () => Effect.fail(down), checkReady: Effect.fail(down) }
  const c = yield* makeCoordinatorOn(store, { listen: "127.0.0.1:0", adminListen: "127.0.0.1:0", heartbeatIntervalMs: 60_000 }).pipe(
    Effect.provide(memoryBackend(storeObjects))
  )
  expect(yield* c.ready).toBe(false)
  return c.controlAddress
})

const fakeWorker = Effect.acquireRelease(
  Effect.promise(() => FakeWorker.start(storeObjects)),
  (w) => Effect.promise(() => w.stop())
)

/** Log lines the client writes through the logger the test installs. */
const captureLogs = () => {
  const lines: Array<string> = []
  const logger = Logger.make(({ logLevel, message }) => {
    lines.push(`${logLevel.label} ${Array.isArray(message) ? message.join(" ") : String(message)}`)
  })
  return { lines, layer: Logger.replace(Logger.defaultLogger, logger) }
}

/** A client whose coordinator setting lists `entries` in order. */
const clientOn = (entries: ReadonlyArray<string>, options: Parameters<typeof makeTalonClient>[0]) =>
  makeTalonClient({ coordinator: entries.join(","), blockSize: BLOCK, ...options })

/**
 * A live coordinator with a fake worker registered, then the entry `first` makes, then a client
 * whose coordinator list puts that entry before the live one.
 */
const liveListedSecond = <A extends string | { readonly address: string }, E>(
  first: Effect.Effect<A, E, Scope.Scope>,
  options: Parameters<typeof makeTalonClient>[0]
) =>
  Effect.gen(function* () {
    const live = yield* coordinatorWith(yield* fakeWorker)
    const entry = yield* first
    const client = yield* clientOn([typeof entry === "string" ? entry : entry.address, live.address], options)
    return { live, entry, client }
  })

const readAll = (client: Effect.Effect.Success<ReturnType<typeof makeTalonClient>>) =>
  Effect.map(client.read(URI, 0, data.length), (got) => expect(Buffer.from(got).equals(data)).toBe(true))

describe("TalonClient coordinator failover", () => {
  it.live("a dead first entry: the next one answers and is kept; the move is counted and logged", () => {
    const logs = captureLogs()
    return Effect.scoped(
      Effect.gen(function* () {
        const { live, entry: dead, client } = yield* liveListedSecond(deadAddress, { connectTimeoutMs: 1000 })
        yield* readAll(client)
        const cp = client.controlPlane()
        expect(cp.coordinator).toBe(live.address)
        expect(cp.coordinatorFailovers).toBe(1)
        expect(cp.coordinatorReachable).toBe(true)
        expect(cp.coordinatorFailures).toBe(0)
        expect(logs.lines.some((l) => l.startsWith("WARN") && l.includes(`coordinator ${dead} does not answer`) && l.includes(`moved to coordinator ${live.address}`))).toBe(true)
        // Kept: later requests go straight to it, no further moves.
        expect((yield* client.members(true)).map((n) => n.id)).toEqual(["worker-0"])
        yield* readAll(client)
        expect(client.controlPlane().coordinatorFailovers).toBe(1)
      })
    ).pipe(Effect.provide(logs.layer))
  })

  it.live("a first entry that refuses as not ready (store down) is left for the next; every read succeeds", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { live, client } = yield* liveListedSecond(unreadyCoordinator, { membershipTtlMs: 100, statTtlMs: 50 })
        let reads = 0
        for (let i = 0; i < 5; i++) {
          yield* readAll(client)
          reads++
          yield* Effect.sleep("60 millis")
        }
        expect(reads).toBe(5)
        expect(client.controlPlane()).toMatchObject({
          coordinator: live.address,
          coordinatorFailovers: 1,
          coordinatorFailures: 0,
          coordinatorReachable: true
        })
        expect((yield* client.members(true)).map((n) => n.id)).toEqual(["worker-0"])
      })
    )
  )

  it.live("a hung entry costs one control timeout, then the client stays on the one that answers", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { live, entry: hung, client } = yield* liveListedSecond(hungPeer, { controlTimeoutMs: 300, membershipTtlMs: 100, statTtlMs: 50 })
        yield* readAll(client)
        expect(client.controlPlane()).toMatchObject({ coordinator: live.address, coordinatorFailovers: 1, coordinatorReachable: true })
        const heard = hung.bytes()
        expect(heard).toBeGreaterThan(0)
        // Many stats and membership refreshes later (both TTLs are short), the hung peer has heard nothing more.
        for (let i = 0; i < 10; i++) {
          yield* Effect.sleep("60 millis")
          yield* readAll(client)
        }
        expect(hung.bytes()).toBe(heard)
        expect(client.controlPlane().coordinatorFailovers).toBe(1)
      })
    )
  )

  it.live("the entry in use stops: the client moves on; with none left it says so and reads go on", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const worker = yield* fakeWorker
        const first = yield* coordinatorWith(worker)
        const second = yield* coordinatorWith(worker)
        const client = yield* clientOn([first.address, second.address], { connectTimeoutMs: 1000, membershipTtlMs: 200, statTtlMs: 100 })
        yield* readAll(client)
        expect(client.controlPlane()).toMatchObject({ coordinator: first.address, coordinatorFailovers: 0 })
        yield* first.stop
        expect((yield* client.members(true)).map((n) => n.id)).toEqual(["worker-0"])
        expect(client.controlPlane()).toMatchObject({ coordinator: second.address, coordinatorFailovers: 1, coordinatorFailures: 0 })
        yield* readAll(client)
        // With none answering an explicit refresh names every entry, and reads go on from the last membership.
        yield* second.stop
        const err = yield* Effect.flip(client.members(true))
        expect(err._tag).toBe("CoordinatorUnavailable")
        expect(err.message).toContain(first.address)
        expect(err.message).toContain(second.address)
        expect(client.controlPlane().coordinatorReachable).toBe(false)
        yield* readAll(client)
      })
    )
  )

  it.live("a coordinator setting that is not a list of host:port is refused naming the setting", () =>
    Effect.scoped(
      Effect.gen(function* () {
        for (const bad of ["", "127.0.0.1:7000,nonsense", "127.0.0.1:0", " , "]) {
          const err = yield* Effect.flip(makeTalonClient({ coordinator: bad }))
          expect(String(err)).toContain("TALON_CLIENT_COORDINATOR")
          expect(String(err)).toContain("comma-separated list")
        }
      })
    )
  )
})
