import * as net from "node:net"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { Backend } from "../../src/core/ids.js"
import { statObject } from "../../src/loadgen/stat.js"
import { type ControlMessage, decodeControl, encodeControlFrame, FrameDecoder } from "../../src/protocol/index.js"
import { deadAddress } from "../support/deadAddress.js"

/** A coordinator stand-in: answers StatObject through the real control codec. */
const withControlServer = <A, E>(answer: (m: ControlMessage) => ControlMessage, use: (port: number) => Effect.Effect<A, E>) =>
  Effect.acquireUseRelease(
    Effect.async<net.Server>((resume) => {
      const server = net.createServer((socket) => {
        const decoder = new FrameDecoder()
        socket.on("error", () => {})
        socket.on("data", (chunk: Buffer) => {
          decoder.push(chunk)
          for (let f = decoder.next(); f !== undefined && "header" in f; f = decoder.next()) {
            const env = decodeControl(f.payload)
            if (Either.isRight(env)) socket.write(encodeControlFrame(f.header.requestId, answer(env.right.message)))
          }
        })
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) => use((server.address() as net.AddressInfo).port),
    (server) => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
  )

const object = { backend: Backend.Azure, bucket: "bench", objectPath: "data/blob" }

/** A loopback address nothing listens on (it was free a moment ago). */
describe("statObject", () => {
  it.live("asks the coordinator for the size with StatObject", () =>
    withControlServer(
      (m) =>
        m._tag === "StatObject" && m.object.objectPath === "data/blob"
          ? { _tag: "ObjectStat", size: 123456789, version: "v1" }
          : { _tag: "Ack", ok: false, detail: "unexpected" },
      (port) =>
        Effect.gen(function* () {
          const stat = yield* statObject(`127.0.0.1:${port}`, object)
          expect(stat).toEqual({ size: 123456789, version: "v1" })
        })
    ))

  it.live("passes a refusal through verbatim", () =>
    withControlServer(
      () => ({ _tag: "Ack", ok: false, detail: "object not found: az://bench/data/blob" }),
      (port) =>
        Effect.gen(function* () {
          const e = yield* Effect.flip(statObject({ host: "127.0.0.1", port }, object))
          expect(e.message).toContain("object not found: az://bench/data/blob")
        })
    ))

  it.live("--coordinator as a list: a dead first entry is passed over for the next", () =>
    withControlServer(
      (m) => (m._tag === "StatObject" ? { _tag: "ObjectStat", size: 4242, version: "v9" } : { _tag: "Ack", ok: false, detail: "unexpected" }),
      (port) =>
        Effect.gen(function* () {
          const dead = yield* deadAddress
          expect(yield* statObject(`${dead},127.0.0.1:${port}`, object)).toEqual({ size: 4242, version: "v9" })
        })
    ))

  it.live("a --coordinator that is not a list of host:port says so", () =>
    Effect.gen(function* () {
      const e = yield* Effect.flip(statObject("nonsense", object))
      expect(e.message).toContain("comma-separated list")
    }))
})
