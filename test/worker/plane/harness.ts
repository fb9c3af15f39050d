import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import type { ConnectionWriter, DataPlaneShape, FileSegment } from "../../../src/worker/plane/DataPlane.js"
import { Connection } from "../../../src/worker/server/SocketServer.js"
import { listenLoopback } from "../../support/loopbackServer.js"

export interface TestFile {
  readonly path: string
  readonly fd: number
  readonly bytes: Buffer
}

export interface Fixture {
  readonly dir: string
  readonly files: ReadonlyArray<TestFile>
  readonly close: () => void
}

/** Files of random bytes (so a misplaced byte cannot match by accident). */
export const makeFixture = (sizes: ReadonlyArray<number>): Fixture => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "talon-plane-"))
  const files = sizes.map((size, i) => {
    const bytes = crypto.randomBytes(size)
    const p = path.join(dir, `f${i}`)
    fs.writeFileSync(p, bytes)
    return { path: p, fd: fs.openSync(p, "r"), bytes }
  })
  return {
    dir,
    files,
    close: () => {
      for (const f of files) fs.closeSync(f.fd)
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

export interface Piece {
  readonly file: TestFile
  readonly offset: number
  readonly length: number
}

/** One response: a 16-byte header naming it, then file pieces (or, for a frame, a short body). */
export interface Response {
  readonly kind: "file" | "frame"
  readonly header: Uint8Array
  readonly pieces: ReadonlyArray<Piece>
  readonly body?: Uint8Array
}

const headerFor = (id: number, length: number): Uint8Array => {
  const h = Buffer.alloc(16)
  h.write("TL", 0, "latin1")
  h.writeUInt8(1, 2)
  h.writeUInt8(2, 3)
  h.writeUInt32BE(id, 8)
  h.writeUInt32BE(length, 12)
  return h
}

export const fileResponse = (id: number, pieces: ReadonlyArray<Piece>): Response => ({
  kind: "file",
  header: headerFor(
    id,
    pieces.reduce((n, p) => n + p.length, 0)
  ),
  pieces
})

export const frameResponse = (id: number, text: string): Response => {
  const body = Buffer.from(text)
  return { kind: "frame", header: Buffer.concat([headerFor(id, body.length), body]), pieces: [] }
}

export const expectedBytes = (responses: ReadonlyArray<Response>): Buffer =>
  Buffer.concat(
    responses.flatMap((r) => [
      Buffer.from(r.header),
      ...r.pieces.map((p) => p.file.bytes.subarray(p.offset, p.offset + p.length))
    ])
  )

export const send = (writer: ConnectionWriter, r: Response): Promise<void> =>
  r.kind === "frame"
    ? writer.writeFrame(r.header)
    : writer.writeFile(
        r.header,
        r.pieces.map((p): FileSegment => ({ fd: p.file.fd, offset: p.offset, length: p.length }))
      )

export interface Served {
  readonly port: number
  readonly results: Array<Promise<unknown>>
  readonly close: () => Promise<void>
}

/** A TCP server on 127.0.0.1:0 whose connections are handed to `onConnection` with a writer from `plane`. */
export const serve = (
  plane: DataPlaneShape,
  onConnection: (socket: net.Socket, writer: ConnectionWriter, index: number) => Promise<unknown>
): Promise<Served> => {
  const results: Array<Promise<unknown>> = []
  let index = 0
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    const writer = plane.attach(new Connection(socket))
    const result = onConnection(socket, writer, index++)
    result.catch(() => {})
    results.push(result)
  })
  return listenLoopback(server).then(({ port, close }) => ({ port, results, close }))
}

export interface ReadOptions {
  /** Wait this long before reading anything (lets the server's socket buffer fill). */
  readonly initialPauseMs?: number
  /** After each chunk, pause the socket for this long (a slow reader; 0 = one loop turn). */
  readonly pauseEachMs?: number
  /** Stop (and reset the connection) after this many bytes. */
  readonly resetAfter?: number
}

/** Connects and reads until `expected.length` bytes (or the server closes); returns what arrived. */
export const readAll = (port: number, expectedLength: number, options: ReadOptions = {}): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    let got = 0
    const socket = net.connect({ port, host: "127.0.0.1" })
    const finish = () => resolve(Buffer.concat(chunks))
    socket.on("error", reject)
    socket.on("end", finish)
    if (options.initialPauseMs !== undefined) {
      socket.pause()
      setTimeout(() => socket.resume(), options.initialPauseMs)
    }
    socket.on("data", (chunk: Buffer) => {
      chunks.push(chunk)
      got += chunk.length
      if (options.resetAfter !== undefined && got >= options.resetAfter) {
        socket.removeAllListeners("end")
        socket.resetAndDestroy()
        finish()
        return
      }
      if (got >= expectedLength) {
        socket.end()
        finish()
        return
      }
      if (options.pauseEachMs !== undefined) {
        socket.pause()
        if (options.pauseEachMs === 0) setImmediate(() => socket.resume())
        else setTimeout(() => socket.resume(), options.pauseEachMs)
      }
    })
  })

/** Index of the first differing byte, or -1 (a readable failure instead of a 6 MiB diff). */
export const firstMismatch = (a: Buffer, b: Buffer): number => {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i
  return a.length === b.length ? -1 : n
}
