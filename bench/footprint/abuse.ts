/**
 * Abuse of a data or control port, as plain sockets: fuzzed frames (well-formed headers over
 * random payloads, random message types and flags, garbage bytes, headers that promise more
 * than they send), a Ping flood, and a storm of connections opened and dropped. Each resolves
 * once every connection it opened is closed; what the server answers is read and dropped
 * (correctness under fuzzing is test/faults' job; here only the memory left behind counts).
 */
import * as net from "node:net"
import { encodeFrame, HEADER_LEN, MsgType } from "../../src/protocol/index.js"

/** A small deterministic PRNG (mulberry32): the same seed sends the same bytes. */
const rng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const fuzzFrame = (next: () => number, id: number): Buffer => {
  const pick = next()
  const len = Math.floor(next() * next() * 8192)
  const payload = Buffer.alloc(len)
  for (let i = 0; i + 4 <= len; i += 4) payload.writeUInt32LE((next() * 4294967296) >>> 0, i)
  if (pick < 0.6) return encodeFrame(Math.floor(next() * 10) as MsgType, id, len >= 4 ? payload : Buffer.alloc(0), Math.floor(next() * 4))
  if (pick < 0.8) {
    // A header promising up to 16 MiB, followed by a little of it: the server must not buffer for it forever.
    const f = encodeFrame(MsgType.GetRange, id, Buffer.alloc(0))
    f.writeUInt32BE(Math.floor(next() * 16 * 1024 * 1024), 12)
    return Buffer.concat([f, payload.subarray(0, Math.min(len, 512))])
  }
  if (pick < 0.9) return payload // garbage: bad magic, bad version
  const f = encodeFrame(MsgType.Ping, id, Buffer.alloc(0))
  f[3] = 10 + Math.floor(next() * 200) // an unknown message type
  return f
}

/** Runs `perConn` on `conns` connections at a time until `total` connections have run. */
const connections = (host: string, port: number, total: number, concurrent: number, perConn: (socket: net.Socket, n: number) => void): Promise<void> =>
  new Promise((resolve) => {
    let started = 0
    let done = 0
    const one = () => {
      const n = started++
      const socket = net.connect({ host, port })
      socket.on("connect", () => perConn(socket, n))
      socket.on("data", () => {})
      socket.on("error", () => {})
      socket.on("close", () => {
        done++
        if (started < total) one()
        else if (done === total) resolve()
      })
    }
    for (let i = 0; i < Math.min(concurrent, total); i++) one()
  })

/** About `frames` fuzzed frames, `framesPerConn` to a connection, 32 connections at a time; each connection then half-closes. */
export const fuzzFrames = (host: string, port: number, frames: number, seed = 1, framesPerConn = 200): Promise<void> =>
  connections(host, port, Math.ceil(frames / framesPerConn), 32, (socket, n) => {
    const next = rng(seed * 100_003 + n)
    const parts: Array<Buffer> = []
    for (let i = 0; i < framesPerConn; i++) parts.push(fuzzFrame(next, i + 1))
    socket.end(Buffer.concat(parts))
    // A server may wait for the rest of a promised payload; the connection is dropped after a while.
    socket.setTimeout(2000, () => socket.destroy())
  })

/** `pings` Pings over `conns` connections, sent as fast as the sockets take them, then half-closed. */
export const pingFlood = (host: string, port: number, pings: number, conns = 16): Promise<void> =>
  connections(host, port, conns, conns, (socket) => {
    const each = Math.ceil(pings / conns)
    const batch = Buffer.concat(Array.from({ length: 256 }, (_, i) => encodeFrame(MsgType.Ping, i + 1, Buffer.alloc(0))))
    let sent = 0
    const pump = () => {
      while (sent < each) {
        sent += 256
        if (!socket.write(batch)) return socket.once("drain", pump)
      }
      socket.end()
    }
    pump()
    socket.setTimeout(10_000, () => socket.destroy())
  })

/** `total` connections, `concurrent` at a time, each sending half a header and resetting. */
export const connectionStorm = (host: string, port: number, total: number, concurrent = 256): Promise<void> =>
  connections(host, port, total, concurrent, (socket, n) => {
    if (n % 2 === 0) socket.write(encodeFrame(MsgType.Ping, 1, Buffer.alloc(0)).subarray(0, HEADER_LEN / 2))
    socket.resetAndDestroy()
  })
