/** One long request stream with every kind of reply a worker gives on an open connection, and a raw-bytes collector. */
import * as net from "node:net"
import { Backend, type ObjectId } from "../../../src/core/ids.js"
import {
  encodeControlFrame,
  encodeFrame,
  encodeGetRangeFrame,
  FrameDecoder,
  HEADER_LEN,
  MsgType,
  RESPONSE_CAPS
} from "../../../src/protocol/index.js"

export const KiB = 1024
export const MiB = 1024 * KiB
export const obj = (key: string): ObjectId => ({ backend: Backend.S3, bucket: "bkt", objectPath: key })
export const SIZE = 6 * MiB + 123

/** The request stream: ids 1..n, each frame's expected kind noted for the sanity checks below. */
export const requestStream = (): Array<Buffer> => {
  const frames: Array<Buffer> = []
  let id = 0
  const range = (offset: number, len: number, key = "big") => frames.push(encodeGetRangeFrame(++id, { object: obj(key), offset, len }))
  for (let i = 0; i < 14; i++) {
    // 1 MiB at an odd offset: crosses page (256 KiB) and block (1 MiB) boundaries.
    range((i * 397 * KiB + 4099) % (SIZE - MiB), MiB)
    range((i * 7919) % (SIZE - 3000), 1 + ((i * 131) % 3000))
    switch (i % 7) {
      case 0:
        range(0, 10, "missing")
        break
      case 1:
        range(SIZE - 10, 11)
        break
      case 2: {
        // Malformed: backend tag 9.
        const body = Buffer.from(encodeGetRangeFrame(0, { object: obj("big"), offset: 0, len: 1 }).subarray(HEADER_LEN))
        body.writeUInt32LE(9, 0)
        frames.push(encodeFrame(MsgType.GetRange, ++id, body))
        break
      }
      case 3:
        range(SIZE, 0)
        break
      case 4:
        // Not a Put or Delete: a serving loop refuses writes (they go through the owner process) while a single-process worker makes them.
        frames.push(encodeControlFrame(++id, { _tag: "StatObject", object: obj("big") }))
        break
      case 5:
        frames.push(encodeControlFrame(++id, { _tag: "MembershipQuery" }))
        break
      case 6:
        frames.push(encodeControlFrame(++id, { _tag: "StatObject", object: obj("missing") }))
        frames.push(encodeFrame(MsgType.Ping, ++id, new Uint8Array(0)))
        break
    }
  }
  return frames
}

/** Sends every frame at once, reads nothing until `stallMs` passed, then collects exactly `count` replies raw. */
export const exchange = (port: number, frames: ReadonlyArray<Buffer>, stallMs: number) =>
  new Promise<{ raw: Buffer; byId: Map<number, Buffer> }>((resolve, reject) => {
    const socket = net.connect({ port, host: "127.0.0.1" })
    const chunks: Array<Buffer> = []
    const decoder = new FrameDecoder(RESPONSE_CAPS)
    const spans = new Map<number, readonly [number, number]>()
    let at = 0
    let total = 0
    socket.on("error", reject)
    socket.on("close", () => reject(new Error(`connection closed after ${spans.size} of ${frames.length} replies`)))
    socket.once("connect", () => {
      socket.pause()
      socket.write(Buffer.concat(frames))
      setTimeout(() => socket.resume(), stallMs)
    })
    socket.on("data", (chunk: Buffer) => {
      chunks.push(chunk)
      total += chunk.length
      decoder.push(chunk)
      for (;;) {
        const f = decoder.next()
        if (f === undefined) break
        if ("_tag" in f) return reject(new Error(`bad reply frame: ${f.message}`))
        const len = HEADER_LEN + f.payload.length
        spans.set(f.header.requestId, [at, at + len])
        at += len
      }
      if (spans.size === frames.length) {
        socket.removeAllListeners("close")
        socket.destroy()
        const raw = Buffer.concat(chunks, total)
        const byId = new Map<number, Buffer>()
        for (const [id, [s, e]] of spans) byId.set(id, raw.subarray(s, e))
        resolve({ raw, byId })
      }
    })
  })

