/** A raw framed-protocol client for worker tests: send any bytes, read whole reply frames. */
import * as net from "node:net"
import { expect } from "vitest"
import type { ObjectId } from "../../../src/core/ids.js"
import { encodeFrame, encodeGetRangeFrame, Flags, FrameDecoder, MsgType, RESPONSE_CAPS, type Frame } from "../../../src/protocol/index.js"

export interface RawConnection {
  readonly socket: net.Socket
  send(bytes: Uint8Array): void
  /** The next reply frame; rejects if the connection closes first. */
  next(): Promise<Frame>
  /** Resolves when the server closed the connection (or it errored). */
  readonly closed: Promise<void>
  /** Frames received and not yet taken. */
  readonly backlog: () => number
  close(): void
}

export const connect = (port: number, host = "127.0.0.1"): Promise<RawConnection> =>
  new Promise((resolve, reject) => {
    const socket = net.connect({ port, host })
    const decoder = new FrameDecoder(RESPONSE_CAPS)
    const frames: Array<Frame> = []
    const waiters: Array<{ resolve: (f: Frame) => void; reject: (e: Error) => void }> = []
    let isClosed = false
    let onClosed!: () => void
    const closed = new Promise<void>((r) => (onClosed = r))
    socket.on("data", (chunk) => {
      decoder.push(chunk)
      for (;;) {
        const f = decoder.next()
        if (f === undefined) break
        if ("_tag" in f) {
          socket.destroy(new Error(`bad reply frame: ${f.message}`))
          return
        }
        const w = waiters.shift()
        if (w !== undefined) w.resolve(f)
        else frames.push(f)
      }
    })
    socket.on("error", () => {})
    socket.on("close", () => {
      isClosed = true
      for (const w of waiters.splice(0)) w.reject(new Error("connection closed before a reply"))
      onClosed()
    })
    socket.once("connect", () =>
      resolve({
        socket,
        send: (bytes) => void socket.write(bytes),
        next: () => {
          const f = frames.shift()
          if (f !== undefined) return Promise.resolve(f)
          if (isClosed) return Promise.reject(new Error("connection closed before a reply"))
          return new Promise((res, rej) => waiters.push({ resolve: res, reject: rej }))
        },
        closed,
        backlog: () => frames.length,
        close: () => socket.destroy()
      })
    )
    socket.once("error", reject)
  })

/** Resolves true when `p` settles within `ms`, false otherwise (used only to bound a wait, never to time). */
export const within = async (p: Promise<unknown>, ms: number): Promise<boolean> => {
  let timer: NodeJS.Timeout | undefined
  const t = new Promise<false>((r) => (timer = setTimeout(() => r(false), ms)))
  try {
    return await Promise.race([p.then(() => true, () => true), t])
  } finally {
    clearTimeout(timer)
  }
}

export type ReadResult = { readonly ok: true; readonly bytes: Buffer } | { readonly ok: false; readonly error: string }

/** One GetRange over a fresh connection: the payload, or why there is none (an ERROR frame, a cut reply). */
export const readRange = async (port: number, object: ObjectId, offset: number, len: number): Promise<ReadResult> => {
  let c
  try {
    c = await connect(port)
  } catch (e) {
    return { ok: false, error: `connect: ${String(e)}` }
  }
  try {
    c.send(encodeGetRangeFrame(1, { object, offset, len }))
    const f = await c.next()
    if ((f.header.flags & Flags.Error) !== 0) return { ok: false, error: Buffer.from(f.payload).toString("utf8") }
    return { ok: true, bytes: Buffer.from(f.payload) }
  } catch (e) {
    return { ok: false, error: String(e) }
  } finally {
    c.close()
  }
}

/** Reads `[offset, offset+len)` of `object` over a fresh connection and checks every byte against `bytes`, the object's. */
export const expectRange = async (port: number, object: ObjectId, bytes: Uint8Array, offset: number, len: number): Promise<void> => {
  const r = await readRange(port, object, offset, len)
  if (!r.ok) throw new Error(`GetRange [${offset}, ${offset + len}) of ${object.objectPath} failed: ${r.error}`)
  expect(Buffer.compare(r.bytes, bytes.subarray(offset, offset + len))).toBe(0)
}

/**
 * A worker's read timeout (set short by the caller) as a client sees it: a connection left idle
 * inside `partial` (the start of a frame) is dropped without a reply, one with nothing pending
 * is kept past it and still answers a Ping. Returns that quiet connection, open.
 */
export const expectReadTimeout = async (port: number, partial: Uint8Array): Promise<RawConnection> => {
  const idle = await connect(port)
  idle.send(partial)
  expect(await within(idle.closed, 10_000)).toBe(true)
  expect(idle.backlog()).toBe(0)

  const quiet = await connect(port)
  expect(await within(quiet.closed, 900)).toBe(false)
  quiet.send(encodeFrame(MsgType.Ping, 3, new Uint8Array(0)))
  expect((await quiet.next()).header.requestId).toBe(3)
  return quiet
}
