/**
 * Worker membership over real sockets: against a scripted coordinator (to
 * force refusals and a restart that forgets the worker) and against the real
 * Coordinator layer.
 */
import * as net from "node:net"
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Coordinator } from "../../src/coordinator/Coordinator.js"
import { Backend, NodeRole, type NodeInfo } from "../../src/core/ids.js"
import { decodeControl, encodeControlFrame, encodeGetRangeFrame, FrameDecoder, MsgType, type ControlMessage } from "../../src/protocol/index.js"
import { makeDirBackend, pattern } from "./support/dirBackend.js"
import { makeCleanup, startWorker, tempDir } from "./support/harness.js"
import { connect } from "./support/rawClient.js"
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import { eventuallyAsync } from "../support/eventually.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

/** A coordinator whose answers the test scripts; records what it was sent. */
const fakeCoordinator = async (port = 0) => {
  const seen: Array<ControlMessage> = []
  const known = new Set<string>()
  let acceptRegistrations = true
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
    socket.on("error", () => {})
    const decoder = new FrameDecoder()
    socket.on("data", (chunk) => {
      decoder.push(chunk)
      for (;;) {
        const f = decoder.next()
        if (f === undefined || "_tag" in f) return
        if (f.header.type !== MsgType.Control) continue
        const decoded = decodeControl(f.payload)
        if (decoded._tag === "Left") continue
        const m = decoded.right.message
        seen.push(m)
        let reply: ControlMessage = { _tag: "Ack", ok: false, detail: `unexpected ${m._tag}` }
        if (m._tag === "Register") {
          if (acceptRegistrations) known.add(m.node.id)
          reply = acceptRegistrations
            ? { _tag: "Ack", ok: true, detail: null }
            : { _tag: "Ack", ok: false, detail: "registrations are closed" }
        } else if (m._tag === "Heartbeat") {
          reply = known.has(m.node)
            ? { _tag: "Ack", ok: true, detail: null }
            : { _tag: "Ack", ok: false, detail: `unknown node ${m.node}` }
        } else if (m._tag === "NodeStatusHeartbeat") {
          reply = acceptRegistrations
            ? { _tag: "Ack", ok: true, detail: null }
            : { _tag: "Ack", ok: false, detail: "registrations are closed" }
        }
        socket.write(encodeControlFrame(f.header.requestId, reply))
      }
    })
  })
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", () => r()))
  const bound = (server.address() as net.AddressInfo).port
  const stop = () =>
    new Promise<void>((r) => {
      for (const s of sockets) s.destroy()
      server.close(() => r())
    })
  cleanup.add(stop)
  return {
    port: bound,
    seen,
    stop,
    setAccept: (v: boolean) => void (acceptRegistrations = v)
  }
}

const until = (what: string, cond: () => boolean | Promise<boolean>, ms = 10_000) =>
  eventuallyAsync(
    async () => {
      if (!(await cond())) throw new Error("not yet")
    },
    { what, within: ms, every: "25 millis" }
  )

const setupOrigin = async () => {
  const root = await tempDir(cleanup, "talon-origin-")
  await fsp.mkdir(path.join(root, "bkt"), { recursive: true })
  await fsp.writeFile(path.join(root, "bkt", "obj"), pattern(100 * 1024, 3))
  return makeDirBackend(root)
}

describe("worker membership", () => {
  const statuses = (seen: ReadonlyArray<ControlMessage>) =>
    seen.flatMap((m) => (m._tag === "NodeStatusHeartbeat" ? [m.status] : []))

  it("not ready (503, 'worker is not ready') until a status is accepted; statuses carry Talon's fields; survive a coordinator restart", async () => {
    const coord = await fakeCoordinator()
    coord.setAccept(false)
    const origin = await setupOrigin()
    const w = await startWorker(cleanup, origin.layer, {
      id: "w-test",
      coordinator: `127.0.0.1:${coord.port}`,
      clusterId: "c-test",
      zone: "z1",
      heartbeatIntervalMs: 50,
      cacheDirs: [await tempDir(cleanup, "talon-cache-")],
      blockSize: 64 * 1024,
      pageSize: 16 * 1024
    })
    const admin = `http://127.0.0.1:${w.worker.adminPort}`
    await until("a refused status", () => statuses(coord.seen).length > 0)
    const notReady = await fetch(`${admin}/readyz`)
    expect(notReady.status).toBe(503)
    expect(await notReady.text()).toContain("registrations are closed")
    const c = await connect(w.worker.dataPort)
    c.send(encodeGetRangeFrame(1, { object: { backend: Backend.S3, bucket: "bkt", objectPath: "obj" }, offset: 0, len: 10 }))
    const refused = await c.next()
    expect(refused.payload.toString()).toBe("worker is not ready")

    coord.setAccept(true)
    await until("ready", async () => (await fetch(`${admin}/readyz`)).status === 200)
    const first = statuses(coord.seen)[0]!
    expect(first.node).toEqual({ id: "w-test", address: w.worker.dataAddress, role: NodeRole.Worker } satisfies NodeInfo)
    // Statuses report the worker's real readiness: not ready until one is accepted, ready right after.
    expect(first).toMatchObject({ clusterId: "c-test", health: "healthy", ready: false, labels: [["zone", "z1"]] })
    expect(first.adminAddress).toBe(w.worker.adminAddress)
    await until("a status reporting ready", () => statuses(coord.seen).some((s) => s.ready))
    const firstReady = statuses(coord.seen).findIndex((s) => s.ready)
    expect(statuses(coord.seen).slice(firstReady).every((s) => s.ready && s.adminAddress === w.worker.adminAddress)).toBe(true)
    expect(first.incarnationId).toMatch(/^[0-9a-f-]{36}$/)
    expect(first.metrics.capacityBytes).toBeGreaterThan(0)
    // Legacy messages are not sent: membership comes from the status.
    expect(coord.seen.every((m) => m._tag === "NodeStatusHeartbeat")).toBe(true)

    c.send(encodeGetRangeFrame(2, { object: { backend: Backend.S3, bucket: "bkt", objectPath: "obj" }, offset: 0, len: 70 * 1024 }))
    expect((await c.next()).header.length).toBe(70 * 1024)
    await until("a status with blockCount 2", () => statuses(coord.seen).some((s) => s.metrics.blockCount === 2))
    const seqs = statuses(coord.seen).map((s) => s.heartbeatSeq)
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b))
    expect(new Set(seqs).size).toBe(seqs.length)

    // The coordinator restarts on the same port: the same incarnation keeps reporting, sequence still rising.
    await coord.stop()
    const again = await fakeCoordinator(coord.port)
    await until("statuses resume", () => statuses(again.seen).length > 0)
    const resumed = statuses(again.seen)[0]!
    expect(resumed.incarnationId).toBe(first.incarnationId)
    expect(resumed.heartbeatSeq).toBeGreaterThan(Math.max(...seqs))
    // It stayed ready throughout: the data plane does not depend on the coordinator.
    expect((await fetch(`${admin}/readyz`)).status).toBe(200)
    c.close()
  })

  it("with a coordinator list, heartbeats go to the first and fail over to the next when it dies", async () => {
    const a = await fakeCoordinator()
    const b = await fakeCoordinator()
    const origin = await setupOrigin()
    const w = await startWorker(cleanup, origin.layer, {
      id: "w-list",
      coordinator: `127.0.0.1:${a.port}, 127.0.0.1:${b.port}`,
      heartbeatIntervalMs: 50,
      cacheDirs: [await tempDir(cleanup, "talon-cache-")]
    })
    await until("ready via the first", () => w.worker.readiness.ready && statuses(a.seen).length >= 3)
    expect(statuses(b.seen)).toHaveLength(0)
    await a.stop()
    await until("statuses on the second", () => statuses(b.seen).length >= 3)
    expect(w.worker.readiness.current.coordinator).toBe(`127.0.0.1:${b.port}`)
    expect(w.worker.readiness.ready).toBe(true)
    const admin = await fetch(`http://127.0.0.1:${w.worker.adminPort}/readyz`)
    expect(await admin.text()).toContain(`via 127.0.0.1:${b.port}`)
  })

  it("registers with the real coordinator and comes back after the coordinator restarts", async () => {
    const origin = await setupOrigin()
    const startCoordinator = async (listen: string) => {
      const rt = ManagedRuntime.make(
        Coordinator.layer({ listen, adminListen: "127.0.0.1:0", heartbeatIntervalMs: 50, missedHeartbeats: 3 }).pipe(
          Layer.provide(origin.layer)
        )
      )
      let stopped = false
      const stop = async () => {
        if (!stopped) await rt.dispose()
        stopped = true
      }
      cleanup.add(stop)
      return { coordinator: await rt.runPromise(Coordinator), stop }
    }
    const first = await startCoordinator("127.0.0.1:0")
    const address = first.coordinator.controlAddress
    const w = await startWorker(cleanup, origin.layer, {
      id: "w-real",
      coordinator: address,
      heartbeatIntervalMs: 50,
      cacheDirs: [await tempDir(cleanup, "talon-cache-")]
    })
    const members = (c: typeof first.coordinator) => Effect.runPromise(c.members)
    await until("member of the first coordinator", async () =>
      (await members(first.coordinator)).some((n) => n.id === "w-real" && n.address === w.worker.dataAddress)
    )
    await until("ready", () => w.worker.readiness.ready)
    await first.stop()
    const second = await startCoordinator(address)
    await until("member of the restarted coordinator", async () =>
      (await members(second.coordinator)).some((n) => n.id === "w-real")
    )
  })
})
