/**
 * Warms an object on one worker before a hit-only measurement: reads it whole in 1 MiB GetRanges
 * on one connection, so every later read of it is a hit. Fails with what the worker answered.
 */
import * as net from "node:net"
import { Effect } from "effect"
import { encodeGetRangeFrame, Flags, FrameDecoder, RESPONSE_CAPS } from "../../src/protocol/index.js"

export const warmObject = (host: string, port: number, bucket: string, objectPath: string, size: number): Effect.Effect<void, string> =>
  Effect.async<void, string>((resume) => {
    const socket = net.connect({ host, port })
    const decoder = new FrameDecoder(RESPONSE_CAPS)
    const step = 1024 * 1024
    let offset = 0
    let id = 1
    const fail = (message: string) => {
      socket.destroy()
      resume(Effect.fail(message))
    }
    const ask = () => socket.write(encodeGetRangeFrame(id++, { object: { backend: 0, bucket, objectPath }, offset, len: Math.min(step, size - offset) }))
    socket.on("connect", ask)
    socket.on("error", (e) => fail(e.message))
    socket.on("data", (chunk: Buffer) => {
      decoder.push(chunk)
      for (let f = decoder.next(); f !== undefined; f = decoder.next()) {
        if (!("header" in f)) return fail(f.message)
        if ((f.header.flags & Flags.Error) !== 0) return fail(f.payload.toString("utf8"))
        offset += f.payload.length
        if (offset >= size) {
          socket.end()
          return resume(Effect.void)
        }
        ask()
      }
    })
    return Effect.sync(() => socket.destroy())
  })
