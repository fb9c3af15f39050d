/**
 * The coordinator's control listener over a real socket: every conformance
 * vector it handles, sent byte-for-byte; Register/Heartbeat built with the codec;
 * malformed input answered or dropped per connection, never crashing the server.
 */
import { epochForWire, membershipEpoch } from "../../src/coordinator/state/epoch.js"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { NodeRole, type NodeInfo } from "../../src/core/ids.js"
import { Maglev } from "../../src/placement/index.js"
import {
  Flags,
  HEADER_LEN,
  MsgType,
  decodeControl,
  encodeControlFrame,
  encodeFrame,
  encodeHeader,
  type ControlMessage,
  type Frame
} from "../../src/protocol/index.js"
import { objects, testCoordinator } from "./fixtures/harness.js"
import { RawPeer } from "./fixtures/rawPeer.js"
import { wireVector, wireVectors } from "../support/wireVectors.js"

const vectors = wireVectors.frames
const vector = wireVector
const requestIdOf = (frame: Buffer) => frame.readUInt32BE(8)

const controlOf = (frame: Frame): ControlMessage => {
  expect(frame.header.type).toBe(MsgType.Control)
  expect(frame.header.flags & Flags.Error).toBe(0)
  const decoded = decodeControl(frame.payload)
  if (Either.isLeft(decoded)) throw new Error(decoded.left.message)
  return decoded.right.message
}

const roundTrip = (peer: RawPeer, bytes: Uint8Array) =>
  Effect.promise(async () => {
    peer.send(bytes)
    return peer.next()
  })

const worker = (id: string, port: number): NodeInfo => ({ id, address: `127.0.0.1:${port}`, role: NodeRole.Worker })

const register = (peer: RawPeer, node: NodeInfo, requestId: number) =>
  Effect.map(roundTrip(peer, encodeControlFrame(requestId, { _tag: "Register", node })), (f) => {
    expect(f.header.requestId).toBe(requestId)
    return controlOf(f)
  })

describe("coordinator control listener", () => {
  it.live("answers Register and Heartbeat with Ack, and refuses heartbeats from unknown nodes", () =>
    testCoordinator({}, (_, port) =>
      Effect.gen(function* () {
        const peer = yield* Effect.promise(() => RawPeer.connect(port))
        expect(yield* register(peer, worker("w1", 7101), 11)).toEqual({ _tag: "Ack", ok: true, detail: null })
        const hb = controlOf(
          yield* roundTrip(peer, encodeControlFrame(12, { _tag: "Heartbeat", node: "w1", blockCount: 42 }))
        )
        expect(hb).toEqual({ _tag: "Ack", ok: true, detail: null })
        const unknown = controlOf(
          yield* roundTrip(peer, encodeControlFrame(13, { _tag: "Heartbeat", node: "ghost", blockCount: 0 }))
        )
        expect(unknown._tag).toBe("Ack")
        if (unknown._tag === "Ack") {
          expect(unknown.ok).toBe(false)
          expect(unknown.detail).toContain("ghost")
          expect(unknown.detail).toContain("register again")
        }
        peer.close()
      })
    )
  )

  it.live("control.membership_query vector → MembershipList of the registered workers, sorted by id", () =>
    testCoordinator({}, (_, port) =>
      Effect.gen(function* () {
        const peer = yield* Effect.promise(() => RawPeer.connect(port))
        yield* register(peer, worker("worker-b", 7102), 1)
        yield* register(peer, worker("worker-a", 7101), 2)
        const bytes = vector("control.membership_query")
        const reply = yield* roundTrip(peer, bytes)
        expect(reply.header.requestId).toBe(requestIdOf(bytes))
        expect(controlOf(reply)).toEqual({
          _tag: "MembershipList",
          nodes: [worker("worker-a", 7101), worker("worker-b", 7102)]
        })
        peer.close()
      })
    )
  )

  it.live("control.placement_lookup vector → owners from Maglev over healthy workers, with the epoch", () =>
    testCoordinator({}, (c, port) =>
      Effect.gen(function* () {
        const peer = yield* Effect.promise(() => RawPeer.connect(port))
        const nodes = [worker("worker-a", 7101), worker("worker-b", 7102), worker("worker-c", 7103)]
        for (const [i, n] of nodes.entries()) yield* register(peer, n, 100 + i)
        const bytes = vector("control.placement_lookup")
        const request = decodeControl(bytes.subarray(HEADER_LEN))
        if (Either.isLeft(request) || request.right.message._tag !== "PlacementLookup") throw new Error("bad vector")
        const lookup = request.right.message
        const reply = yield* roundTrip(peer, bytes)
        expect(reply.header.requestId).toBe(requestIdOf(bytes))
        const epoch = yield* c.epoch
        // The epoch is Talon's content hash of the placement set: the same three workers, the same epoch.
        expect(epoch).toBe(epochForWire(yield* membershipEpoch(nodes)))
        expect(epoch).not.toBe(0)
        const expected = Maglev.build(nodes).rank(lookup.block, lookup.k)
        expect(expected).toHaveLength(1)
        expect(controlOf(reply)).toEqual({ _tag: "PlacementResponse", owners: [...expected], epoch })

        // k larger than the fleet returns every worker once, primary first.
        const all = controlOf(
          yield* roundTrip(peer, encodeControlFrame(7, { _tag: "PlacementLookup", block: lookup.block, k: 5 }))
        )
        expect(all._tag).toBe("PlacementResponse")
        if (all._tag === "PlacementResponse") {
          expect([...all.owners].sort()).toEqual(["worker-a", "worker-b", "worker-c"])
          expect(all.owners[0]).toBe(expected[0])
        }
        peer.close()
      })
    )
  )

  it.live("PlacementLookup with no workers → empty owners", () =>
    testCoordinator({}, (_, port) =>
      Effect.gen(function* () {
        const peer = yield* Effect.promise(() => RawPeer.connect(port))
        const reply = controlOf(yield* roundTrip(peer, vector("control.placement_lookup")))
        expect(reply).toEqual({ _tag: "PlacementResponse", owners: [], epoch: 0 }) // Talon's epoch of no members
        peer.close()
      })
    )
  )

  it.live("control.stat_object vector → ObjectStat from the backend; a missing object → Ack{ok:false, not found}", () =>
    testCoordinator({}, (_, port) =>
      Effect.gen(function* () {
        const peer = yield* Effect.promise(() => RawPeer.connect(port))
        const bytes = vector("control.stat_object")
        const reply = yield* roundTrip(peer, bytes)
        expect(reply.header.requestId).toBe(requestIdOf(bytes))
        expect(controlOf(reply)).toEqual({ _tag: "ObjectStat", size: 5000, version: "0x8DABCDEF" })

        const missing = controlOf(
          yield* roundTrip(
            peer,
            encodeControlFrame(9, {
              _tag: "StatObject",
              object: { backend: 0, bucket: "bucket", objectPath: "nope" }
            })
          )
        )
        expect(missing._tag).toBe("Ack")
        if (missing._tag === "Ack") {
          expect(missing.ok).toBe(false)
          expect(missing.detail).toMatch(/^not found: .*\/s3\/bucket\/nope/)
        }
        peer.close()
      })
    )
  )

  it.live("ListObjects → every page of the backend listing, paths in namespace form (UTF-8 keys intact)", () =>
    testCoordinator({}, (_, port) =>
      Effect.gen(function* () {
        const peer = yield* Effect.promise(() => RawPeer.connect(port))
        const list = (prefix: string, id: number) =>
          Effect.map(roundTrip(peer, encodeControlFrame(id, { _tag: "ListObjects", prefix })), controlOf)
        expect(yield* list("/s3/bucket/data/", 1)).toEqual({
          _tag: "ObjectList",
          entries: [
            { path: "/s3/bucket/data/a.bin", size: 10 },
            { path: "/s3/bucket/data/b.bin", size: 20 },
            { path: "/s3/bucket/data/c.bin", size: 30 }
          ]
        })
        const everything = yield* list("/s3/bucket", 2)
        expect(everything._tag === "ObjectList" && everything.entries.map((e) => e.path)).toEqual(
          [...objects.keys()].filter((k) => k.startsWith("/s3/bucket/")).sort()
        )
        const utf8 = yield* list("/s3/bucket/数据/", 3)
        expect(utf8).toEqual({ _tag: "ObjectList", entries: [{ path: "/s3/bucket/数据/文件.parquet", size: 1024 }] })
        const bad = yield* list("/s3/bucket/../x", 4)
        expect(bad._tag === "Ack" && bad.ok).toBe(false)
        peer.close()
      })
    )
  )

  it.live("control.list_objects.empty_prefix vector → Ack{ok:false} explaining the prefix form", () =>
    testCoordinator({}, (_, port) =>
      Effect.gen(function* () {
        const peer = yield* Effect.promise(() => RawPeer.connect(port))
        const bytes = vector("control.list_objects.empty_prefix")
        const reply = yield* roundTrip(peer, bytes)
        expect(reply.header.requestId).toBe(requestIdOf(bytes))
        const msg = controlOf(reply)
        expect(msg._tag).toBe("Ack")
        if (msg._tag === "Ack") {
          expect(msg.ok).toBe(false)
          expect(msg.detail).toContain("/s3/bucket/prefix")
        }
        peer.close()
      })
    )
  )

  it.live("every other control vector (replies, v2, mapping revision) gets a reply and the connection keeps serving", () =>
    testCoordinator({}, (_, port) =>
      Effect.gen(function* () {
        const peer = yield* Effect.promise(() => RawPeer.connect(port))
        const handled = new Set([
          "control.membership_query",
          "control.placement_lookup",
          "control.stat_object",
          "control.list_objects.empty_prefix"
        ])
        const others = vectors.filter((v) => v.name.startsWith("control.") && !handled.has(v.name))
        expect(others.length).toBeGreaterThan(5)
        for (const v of others) {
          const bytes = Buffer.from(v.hex, "hex")
          const reply = yield* roundTrip(peer, bytes)
          expect(reply.header.requestId, v.name).toBe(requestIdOf(bytes))
          expect(reply.header.type, v.name).toBe(MsgType.Control)
          if ((reply.header.flags & Flags.Error) === 0) {
            const msg = controlOf(reply)
            expect(msg._tag === "Ack" || msg._tag === "MembershipListV2", v.name).toBe(true)
          } else {
            expect(reply.payload.length, v.name).toBeGreaterThan(0)
          }
        }
        const ping = yield* roundTrip(peer, encodeFrame(MsgType.Ping, 77, new Uint8Array(0)))
        expect(ping.header).toMatchObject({ type: MsgType.Ping, requestId: 77, flags: 0 })
        peer.close()
      })
    )
  )

  it.live("pipelined requests on one connection are all answered, matched by request id", () =>
    testCoordinator({}, (_, port) =>
      Effect.gen(function* () {
        const peer = yield* Effect.promise(() => RawPeer.connect(port))
        yield* register(peer, worker("w", 7101), 1)
        // More than the server's per-connection in-flight bound, sent in one write: it must pause and resume, not drop.
        const ids = Array.from({ length: 600 }, (_, i) => 1000 + i)
        peer.send(Buffer.concat(ids.map((id) => encodeControlFrame(id, { _tag: "MembershipQuery" }))))
        const seen = new Set<number>()
        for (const _ of ids) {
          const f = yield* Effect.promise(() => peer.next())
          expect(controlOf(f)._tag).toBe("MembershipList")
          seen.add(f.header.requestId)
        }
        expect([...seen].sort((a, b) => a - b)).toEqual(ids)
        peer.close()
      })
    )
  )
})

describe("coordinator control listener: malformed input", () => {
  const healthy = (port: number) =>
    Effect.promise(async () => {
      const other = await RawPeer.connect(port)
      other.send(encodeFrame(MsgType.Ping, 5, new Uint8Array(0)))
      const f = await other.next()
      other.close()
      return f.header.type === MsgType.Ping && f.header.requestId === 5
    })

  it.live("bad magic: that connection gets an error frame saying so and is closed; others keep working", () =>
    testCoordinator({}, (_, port) =>
      Effect.gen(function* () {
        const peer = yield* Effect.promise(() => RawPeer.connect(port))
        const frame = Buffer.from(encodeControlFrame(1, { _tag: "MembershipQuery" }))
        frame.writeUInt16BE(0x4242, 0)
        peer.send(frame)
        const reply = yield* Effect.promise(() => peer.next())
        expect(reply.header.flags & Flags.Error).toBe(Flags.Error)
        expect(reply.payload.toString("utf8")).toContain("bad frame magic 0x4242")
        expect(yield* Effect.promise(() => peer.closesWithin(5000))).toBe(true)
        expect(yield* healthy(port)).toBe(true)
      })
    )
  )

  it.live("over-cap control length: error frame naming the cap, closed before the body is sent", () =>
    testCoordinator({}, (_, port) =>
      Effect.gen(function* () {
        const peer = yield* Effect.promise(() => RawPeer.connect(port))
        peer.send(encodeHeader({ type: MsgType.Control, flags: 0, requestId: 9, length: 0x7fffffff }))
        const reply = yield* Effect.promise(() => peer.next())
        expect(reply.header).toMatchObject({ type: MsgType.Control, requestId: 9, flags: Flags.Error })
        expect(reply.payload.toString("utf8")).toContain(`${0x7fffffff} payload bytes, over the coordinator's 1048576-byte cap`)
        expect(yield* Effect.promise(() => peer.closesWithin(5000))).toBe(true)
        expect(yield* healthy(port)).toBe(true)
      })
    )
  )

  it.live("truncated body: the partial frame times out and only that connection closes", () =>
    testCoordinator({ readTimeoutMs: 300 }, (_, port) =>
      Effect.gen(function* () {
        const idle = yield* Effect.promise(() => RawPeer.connect(port))
        const peer = yield* Effect.promise(() => RawPeer.connect(port))
        const frame = encodeControlFrame(1, { _tag: "MembershipQuery" })
        peer.send(frame.subarray(0, frame.length - 2))
        expect(yield* Effect.promise(() => peer.closesWithin(5000))).toBe(true)
        // An idle connection with nothing half-sent is not a truncation and stays open.
        expect(idle.isClosed).toBe(false)
        idle.send(encodeFrame(MsgType.Ping, 3, new Uint8Array(0)))
        expect((yield* Effect.promise(() => idle.next())).header.requestId).toBe(3)
        idle.close()
      })
    )
  )

  it.live("garbage control payload and unknown control tag → error frame; the connection keeps serving", () =>
    testCoordinator({}, (_, port) =>
      Effect.gen(function* () {
        const peer = yield* Effect.promise(() => RawPeer.connect(port))
        const garbage = yield* roundTrip(peer, encodeFrame(MsgType.Control, 21, Buffer.from("not bincode at all")))
        expect(garbage.header).toMatchObject({ requestId: 21, type: MsgType.Control })
        expect(garbage.header.flags & Flags.Error).toBe(Flags.Error)
        expect(garbage.payload.toString("utf8")).toContain("malformed control message")

        const unknownTag = Buffer.from([1, 0, 99, 0, 0, 0]) // schema 1, tag 99
        const tagged = yield* roundTrip(peer, encodeFrame(MsgType.Control, 22, unknownTag))
        expect(tagged.header.flags & Flags.Error).toBe(Flags.Error)
        expect(tagged.header.requestId).toBe(22)

        const empty = yield* roundTrip(peer, encodeFrame(MsgType.Control, 23, new Uint8Array(0)))
        expect(empty.header.flags & Flags.Error).toBe(Flags.Error)

        const ok = yield* roundTrip(peer, encodeControlFrame(24, { _tag: "MembershipQuery" }))
        expect(controlOf(ok)).toEqual({ _tag: "MembershipList", nodes: [] })
        peer.close()
      })
    )
  )

  it.live("data-plane frames sent to the coordinator → error frame naming the mistake", () =>
    testCoordinator({}, (_, port) =>
      Effect.gen(function* () {
        const peer = yield* Effect.promise(() => RawPeer.connect(port))
        const range = vector("data.range_request")
        const reply = yield* roundTrip(peer, range)
        expect(reply.header).toMatchObject({ type: MsgType.GetRange, requestId: requestIdOf(range) })
        expect(reply.header.flags & Flags.Error).toBe(Flags.Error)
        expect(reply.payload.toString("utf8")).toContain("worker")
        const ok = yield* roundTrip(peer, encodeControlFrame(2, { _tag: "MembershipQuery" }))
        expect(controlOf(ok)._tag).toBe("MembershipList")
        peer.close()
      })
    )
  )

  it.live("random bytes on many connections never take the listener down", () =>
    testCoordinator({ readTimeoutMs: 200 }, (_, port) =>
      Effect.gen(function* () {
        let seed = 12345
        const rand = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) & 0xff
        for (let i = 0; i < 20; i++) {
          const peer = yield* Effect.promise(() => RawPeer.connect(port))
          const bytes = Buffer.from(Array.from({ length: 16 + (i * 37) % 200 }, rand))
          // Half the cases keep a valid magic+version so the decoder gets past the first check.
          if (i % 2 === 0) bytes.set([0x54, 0x4c, 1, i % 6], 0)
          peer.send(bytes)
          yield* Effect.promise(() => peer.closesWithin(50))
          peer.close()
        }
        expect(yield* healthy(port)).toBe(true)
      })
    )
  )
})

