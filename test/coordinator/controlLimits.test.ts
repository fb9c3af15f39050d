/**
 * The control listener's limits over a real socket: per-type caps checked at the
 * header, write backpressure for a peer that does not read, replies kept for a
 * peer that half-closes, and names that could leave their bucket refused before
 * they reach the origin.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import { BackendStore } from "../../src/backend/BackendStore.js"
import { COORDINATOR_CAPS } from "../../src/coordinator/ControlServer.js"
import { makeCoordinator } from "../../src/coordinator/Coordinator.js"
import { Backend, NodeRole } from "../../src/core/ids.js"
import {
  Flags,
  MsgType,
  decodeControl,
  encodeControlFrame,
  encodeFrame,
  encodeHeader,
  type ControlMessage,
  type Frame
} from "../../src/protocol/index.js"
import { objects } from "./fixtures/harness.js"
import { memoryBackend } from "./fixtures/memoryBackend.js"
import { RawPeer } from "./fixtures/rawPeer.js"

const controlOf = (frame: Frame): ControlMessage => {
  expect(frame.header.type).toBe(MsgType.Control)
  expect(frame.header.flags & Flags.Error).toBe(0)
  const decoded = decodeControl(frame.payload)
  if (Either.isLeft(decoded)) throw new Error(decoded.left.message)
  return decoded.right.message
}

/** A coordinator whose origin answers after `delayMs`, recording every call that reaches it. */
const slowCoordinator = <A, E>(
  delayMs: number,
  body: (port: number, calls: Array<string>, adminAddress: string) => Effect.Effect<A, E>
) => {
  const calls: Array<string> = []
  const slow = Layer.effect(
    BackendStore,
    Effect.map(BackendStore, (inner) => ({
      ...inner,
      stat: (o: Parameters<typeof inner.stat>[0]) => Effect.delay(inner.stat(o), `${delayMs} millis`),
      list: (b: string, o?: Parameters<typeof inner.list>[1]) => Effect.delay(inner.list(b, o), `${delayMs} millis`)
    }))
  ).pipe(Layer.provide(memoryBackend(objects, calls)))
  return Effect.scoped(
    Effect.gen(function* () {
      const c = yield* makeCoordinator({ listen: "127.0.0.1:0", adminListen: "127.0.0.1:0" })
      return yield* body(Number(c.controlAddress.split(":")[1]), calls, c.adminAddress)
    })
  ).pipe(Effect.provide(slow))
}

const connect = (port: number) => Effect.promise(() => RawPeer.connect(port))
const next = (peer: RawPeer, timeoutMs = 10_000) => Effect.promise(() => peer.next(timeoutMs))

describe("coordinator control listener: limits", () => {
  it.live("a 320 MiB Put header (and a Put one byte over its cap) is refused at the header: error frame, then closed", () =>
    slowCoordinator(0, (port) =>
      Effect.gen(function* () {
        for (const length of [320 * 1024 * 1024, COORDINATOR_CAPS.put + 1]) {
          const peer = yield* connect(port)
          peer.send(encodeHeader({ type: MsgType.Put, flags: 0, requestId: 77, length }))
          const reply = yield* next(peer)
          expect(reply.header).toMatchObject({ type: MsgType.Put, requestId: 77, flags: Flags.Error })
          const text = reply.payload.toString("utf8")
          expect(text).toContain(`Put frame advertises ${length} payload bytes`)
          expect(text).toContain("serves only Control and Ping")
          expect(yield* Effect.promise(() => peer.closesWithin(5000))).toBe(true)
        }
        // At the cap exactly, the frame is read and answered like any frame the coordinator does not serve.
        const peer = yield* connect(port)
        peer.send(encodeFrame(MsgType.Put, 78, new Uint8Array(COORDINATOR_CAPS.put)))
        const atCap = yield* next(peer)
        expect(atCap.header).toMatchObject({ type: MsgType.Put, requestId: 78, flags: Flags.Error })
        peer.send(encodeControlFrame(79, { _tag: "MembershipQuery" }))
        expect(controlOf(yield* next(peer))._tag).toBe("MembershipList")
        peer.close()
      })
    )
  )

  it.live("StatObject and ListObjects replies still arrive when the client half-closes right after asking", () =>
    slowCoordinator(150, (port) =>
      Effect.gen(function* () {
        const peer = yield* connect(port)
        peer.send(encodeControlFrame(1, { _tag: "StatObject", object: { backend: Backend.S3, bucket: "bucket", objectPath: "data/a.bin" } }))
        peer.send(encodeControlFrame(2, { _tag: "ListObjects", prefix: "/s3/bucket/data/" }))
        peer.send(encodeFrame(MsgType.Ping, 3, new Uint8Array(0)))
        peer.end()
        const replies = [yield* next(peer), yield* next(peer), yield* next(peer)]
        const byId = new Map(replies.map((f) => [f.header.requestId, f]))
        expect(byId.get(3)!.header.type).toBe(MsgType.Ping)
        expect(controlOf(byId.get(1)!)).toEqual({ _tag: "ObjectStat", size: 10, version: "e1" })
        const list = controlOf(byId.get(2)!)
        expect(list._tag === "ObjectList" && list.entries.map((e) => e.path)).toEqual([
          "/s3/bucket/data/a.bin",
          "/s3/bucket/data/b.bin",
          "/s3/bucket/data/c.bin"
        ])
        // With every reply written, the coordinator closes its side too.
        expect(yield* Effect.promise(() => peer.closesWithin(5000))).toBe(true)
      })
    )
  )

  it.live("a half frame then half-close gets an error frame naming the truncation", () =>
    slowCoordinator(0, (port) =>
      Effect.gen(function* () {
        const peer = yield* connect(port)
        const frame = encodeControlFrame(5, { _tag: "MembershipQuery" })
        peer.send(frame.subarray(0, frame.length - 3))
        peer.end()
        const reply = yield* next(peer)
        expect(reply.header.flags & Flags.Error).toBe(Flags.Error)
        expect(reply.payload.toString("utf8")).toContain("truncated frame")
        expect(yield* Effect.promise(() => peer.closesWithin(5000))).toBe(true)
      })
    )
  )

  it.live("`..`, `.` and empty components in a StatObject are refused with a reason and never reach the origin", () =>
    slowCoordinator(0, (port, calls) =>
      Effect.gen(function* () {
        const peer = yield* connect(port)
        const bad = [
          { backend: Backend.S3, bucket: "bucket", objectPath: "../other-bucket/secret" },
          { backend: Backend.S3, bucket: "..", objectPath: "x" },
          { backend: Backend.Azure, bucket: "container", objectPath: "a/./b" },
          { backend: Backend.S3, bucket: "bucket", objectPath: "a//b" },
          { backend: Backend.S3, bucket: "bucket", objectPath: "" }
        ] as const
        let id = 10
        for (const object of bad) {
          peer.send(encodeControlFrame(++id, { _tag: "StatObject", object }))
          const reply = controlOf(yield* next(peer))
          expect(reply._tag).toBe("Ack")
          if (reply._tag === "Ack") {
            expect(reply.ok).toBe(false)
            expect(reply.detail).toContain("invalid object")
          }
        }
        expect(calls).toEqual([])
        peer.send(encodeControlFrame(99, { _tag: "StatObject", object: { backend: Backend.S3, bucket: "bucket", objectPath: "data/a.bin" } }))
        expect(controlOf(yield* next(peer))).toEqual({ _tag: "ObjectStat", size: 10, version: "e1" })
        expect(calls).toEqual(["stat /s3/bucket/data/a.bin"])
        peer.close()
      })
    )
  )

  it.live("Register with an empty id or an address nobody can dial is refused; the membership stays clean", () =>
    slowCoordinator(0, (port) =>
      Effect.gen(function* () {
        const peer = yield* connect(port)
        const bad = [
          { id: "", address: "127.0.0.1:7001" },
          { id: "w", address: "no-port" },
          { id: "w", address: "127.0.0.1:0" },
          { id: "w", address: "127.0.0.1:99999" },
          { id: "x".repeat(513), address: "127.0.0.1:7001" }
        ]
        let id = 0
        for (const node of bad) {
          peer.send(encodeControlFrame(++id, { _tag: "Register", node: { ...node, role: NodeRole.Worker } }))
          const reply = controlOf(yield* next(peer))
          expect(reply).toMatchObject({ _tag: "Ack", ok: false })
          if (reply._tag === "Ack") expect(reply.detail).toContain("Register refused")
        }
        peer.send(encodeControlFrame(50, { _tag: "MembershipQuery" }))
        expect(controlOf(yield* next(peer))).toEqual({ _tag: "MembershipList", nodes: [] })
        peer.close()
      })
    )
  )

  it.live("a peer that pipelines pings without reading is paused, not buffered; once it reads, every reply arrives", () =>
    slowCoordinator(0, (port, _, admin) =>
      Effect.gen(function* () {
        const peer = yield* connect(port)
        peer.pause()
        const count = 1_000_000
        const batch = Buffer.alloc(16 * 1000)
        for (let i = 0; i < count; i += 1000) {
          for (let j = 0; j < 1000; j++) batch.set(encodeFrame(MsgType.Ping, i + j + 1, new Uint8Array(0)), j * 16)
          peer.send(Buffer.from(batch))
        }
        const pauses = () =>
          Effect.promise(async () => {
            const text = await (await fetch(`http://${admin}/metrics`)).text()
            return Number(/talon_coordinator_control_backpressure_pauses_total (\d+)/.exec(text)?.[1] ?? "0")
          })
        // 16 MB of replies cannot all sit in socket buffers: the coordinator must stop reading.
        yield* pauses().pipe(Effect.delay("50 millis"), Effect.repeat({ until: (n) => n > 0 }), Effect.timeout("30 seconds"))
        peer.resume()
        for (let i = 1; i <= count; i++) {
          const f = yield* next(peer, 30_000)
          if (f.header.requestId !== i || f.header.type !== MsgType.Ping) {
            throw new Error(`reply ${i}: got type ${f.header.type} id ${f.header.requestId}`)
          }
        }
        peer.close()
      })
    ), 120_000
  )
})
