/**
 * The splice relay against a scripted worker on a real socket: the body goes to the client
 * socket byte for byte; a worker that closes mid-body fails the relay (the caller closes the
 * client); an error reply and a reply of the wrong length are refused before a byte moves;
 * a kept connection the worker closed while idle is dialled again.
 */
import { describe, expect, it } from "@effect/vitest"
import { createHash, randomBytes } from "node:crypto"
import * as net from "node:net"
import { Effect } from "effect"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import { DataErrorCode, encodeTypedErrorFrame, HEADER_LEN, MsgType, writeHeader } from "../../src/protocol/index.js"
import { makeSpliceRelay, type SpliceRelayShape } from "../../src/gateway/spliceRelay.js"

const object: ObjectId = { backend: Backend.S3, bucket: "bucket", objectPath: "a.bin" }
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex")

type Script = (socket: net.Socket, requestId: number, length: number) => void

/** A worker that answers each request frame by `script` (request id and asked length from the frame). */
const scriptedWorker = async (script: Script) => {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
    socket.on("error", () => undefined)
    let buf = Buffer.alloc(0)
    socket.on("data", (c: Buffer) => {
      buf = Buffer.concat([buf, c])
      while (buf.length >= HEADER_LEN) {
        const len = buf.readUInt32BE(12)
        if (buf.length < HEADER_LEN + len) return
        const requestId = buf.readUInt32BE(8)
        // The body ends with the range's u64 offset and u64 length (bincode, little-endian).
        const asked = Number(buf.readBigUInt64LE(HEADER_LEN + len - 8))
        buf = buf.subarray(HEADER_LEN + len)
        script(socket, requestId, asked)
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as net.AddressInfo).port
  return {
    address: `127.0.0.1:${port}`,
    connections: () => sockets.size,
    dropAll: () => {
      for (const s of sockets) s.destroy()
    },
    close: () => {
      for (const s of sockets) s.destroy()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}

/** A connected pair: `server` is the socket the relay writes to, `client` reads it. */
const socketPair = async () => {
  const listener = net.createServer()
  await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve))
  const accepted = new Promise<net.Socket>((resolve) => listener.once("connection", resolve))
  const client = net.connect((listener.address() as net.AddressInfo).port, "127.0.0.1")
  const server = await accepted
  listener.close()
  const chunks: Array<Buffer> = []
  const ended = new Promise<Buffer>((resolve) => {
    client.on("data", (c: Buffer) => chunks.push(c))
    client.on("error", () => undefined)
    client.on("close", () => resolve(Buffer.concat(chunks)))
  })
  server.on("error", () => undefined)
  return { server, client, received: ended }
}

const replyHeader = (requestId: number, length: number, flags = 0) => {
  const h = Buffer.alloc(HEADER_LEN)
  writeHeader(h, 0, { type: MsgType.GetRange, flags, requestId, length })
  return h
}

const relayOrSkip = (): SpliceRelayShape => {
  const relay = makeSpliceRelay({ connectTimeoutMs: 5000 })
  if (typeof relay === "string") throw new Error(`the splice addon is not usable here: ${relay}`)
  return relay
}

describe("splice relay", () => {
  it.live("relays the body byte for byte after the head, then keeps the connection for the next piece", () =>
    Effect.promise(async () => {
      const body = randomBytes(3 * 1024 * 1024 + 17)
      const worker = await scriptedWorker((s, id, len) => {
        s.write(replyHeader(id, len))
        s.write(body.subarray(0, len))
      })
      const relay = relayOrSkip()
      const pair = await socketPair()
      const head = Buffer.from("HEAD\r\n")
      for (const [n, withHead] of [
        [body.length, true],
        [65536, false]
      ] as const) {
        const piece = await relay.request(worker.address, object, "v1", 0, n)
        expect(piece._tag).toBe("Ready")
        if (piece._tag !== "Ready") return
        const fd = relay.fdOf(pair.server)
        expect(fd).toBeGreaterThanOrEqual(0)
        expect(await relay.relay(piece, pair.server, fd, n, withHead ? head : undefined)).toBe(true)
      }
      expect(worker.connections()).toBe(1)
      // Every header wait and relay gave its slot back.
      expect(relay.counters().slotsInUse).toBe(0)
      pair.server.end()
      const got = await pair.received
      expect(sha(got)).toBe(sha(Buffer.concat([head, body, body.subarray(0, 65536)])))
      relay.close()
      await worker.close()
    })
  )

  it.live("a worker that closes mid-body fails the relay; the client has fewer bytes than asked", () =>
    Effect.promise(async () => {
      const worker = await scriptedWorker((s, id, len) => {
        s.write(replyHeader(id, len))
        s.end(randomBytes(len >> 1))
      })
      const relay = relayOrSkip()
      const pair = await socketPair()
      const piece = await relay.request(worker.address, object, "v1", 0, 1024 * 1024)
      expect(piece._tag).toBe("Ready")
      if (piece._tag !== "Ready") return
      expect(await relay.relay(piece, pair.server, relay.fdOf(pair.server), 1024 * 1024, undefined)).toBe(false)
      pair.server.destroy()
      expect((await pair.received).length).toBeLessThan(1024 * 1024)
      relay.close()
      await worker.close()
    })
  )

  it.live("an error reply and a reply of another length are refused before a byte moves", () =>
    Effect.promise(async () => {
      let mode: "error" | "short" = "error"
      const worker = await scriptedWorker((s, id, len) => {
        if (mode === "error") s.write(encodeTypedErrorFrame(id, DataErrorCode.VersionMismatch, "the origin has another version"))
        else s.write(Buffer.concat([replyHeader(id, len - 1), randomBytes(len - 1)]))
      })
      const relay = relayOrSkip()
      const refused = await relay.request(worker.address, object, "v1", 0, 4096)
      expect(refused).toMatchObject({ _tag: "Rejected", code: DataErrorCode.VersionMismatch })
      mode = "short"
      const short = await relay.request(worker.address, object, "v1", 0, 4096)
      expect(short._tag).toBe("Unreachable")
      relay.close()
      await worker.close()
    })
  )

  it.live("a kept connection the worker closed while idle is dialled again; a dead address is unreachable", () =>
    Effect.promise(async () => {
      const worker = await scriptedWorker((s, id, len) => {
        s.write(replyHeader(id, len))
        s.write(Buffer.alloc(len, 7))
      })
      const relay = relayOrSkip()
      const pair = await socketPair()
      for (let i = 0; i < 2; i++) {
        const piece = await relay.request(worker.address, object, "v1", 0, 1000)
        expect(piece._tag).toBe("Ready")
        if (piece._tag !== "Ready") return
        expect(await relay.relay(piece, pair.server, relay.fdOf(pair.server), 1000, undefined)).toBe(true)
        // The worker drops its idle connections (a restart, an idle timeout).
        worker.dropAll()
        await new Promise((r) => setTimeout(r, 20))
      }
      pair.server.end()
      expect((await pair.received).equals(Buffer.alloc(2000, 7))).toBe(true)
      expect(relay.counters().slotsInUse).toBe(0)
      await worker.close()
      const dead = await relay.request(worker.address, object, "v1", 0, 1000)
      expect(dead._tag).toBe("Unreachable")
      relay.close()
    })
  )
})
