import * as fs from "node:fs"
import type * as net from "node:net"
import { BufferPool } from "./BufferPool.js"
import type { ConnectionWriter, DataPlaneShape, FileSegment } from "./DataPlane.js"
import { ConnectionWriteError } from "./WriteError.js"

export interface PortableOptions {
  readonly pool?: BufferPool
  /** Shown as the plane's `reason` (e.g. why native did not load). */
  readonly reason?: string
}

const readInto = (fd: number, buffer: Buffer, at: number, length: number, position: number) =>
  new Promise<number>((resolve, reject) =>
    fs.read(fd, buffer, at, length, position, (error, bytesRead) => (error ? reject(error) : resolve(bytesRead)))
  )

const failure = (detail: string, cause?: unknown) => {
  const code = (cause as NodeJS.ErrnoException | undefined)?.code
  return new ConnectionWriteError({
    plane: "portable",
    code,
    detail: cause === undefined ? detail : `${detail}: ${(cause as Error).message ?? String(cause)}`
  })
}

/**
 * Copies file bytes through pooled buffers into `socket.write`. The header is copied into the
 * front of the first buffer so a small response is one write. Writes honour backpressure (a
 * `false` from `write` waits for 'drain'), and each call waits for the previous one on the
 * connection, so responses never interleave.
 */
class PortableWriter implements ConnectionWriter {
  private tail: Promise<void> = Promise.resolve()
  private failed: ConnectionWriteError | undefined

  constructor(
    private readonly socket: net.Socket,
    private readonly pool: BufferPool
  ) {
    socket.setNoDelay(true)
    // Write errors reach the caller as rejections; without a listener they would crash the process.
    socket.on("error", () => {})
  }

  writeFrame(frame: Uint8Array): Promise<void> {
    return this.serialise(() => this.sendFrame(frame))
  }

  writeFile(header: Uint8Array, segments: ReadonlyArray<FileSegment>): Promise<void> {
    const own = Uint8Array.prototype.slice.call(header) // sent later: the caller reuses its header buffer
    return this.serialise(() => this.sendFile(own, segments))
  }

  end(): Promise<void> {
    return this.serialise(async () => {
      this.socket.end()
    })
  }

  private serialise(op: () => Promise<void>): Promise<void> {
    const run = this.tail.then(() => {
      if (this.failed !== undefined) throw this.failed
      if (this.socket.destroyed) throw this.fail(failure("the connection is closed"))
      return op()
    })
    this.tail = run.catch(() => {})
    return run
  }

  private fail(error: ConnectionWriteError): ConnectionWriteError {
    if (this.failed === undefined) this.failed = error
    this.socket.destroy()
    return this.failed
  }

  /** Resolves when libuv has handed `chunk` to the kernel; `release` runs either way. */
  private write(chunk: Uint8Array, release?: () => void): { done: Promise<void>; more: boolean } {
    let more = true
    const done = new Promise<void>((resolve, reject) => {
      more = this.socket.write(chunk, (error) => {
        release?.()
        if (error) reject(this.fail(failure("socket write failed", error)))
        else resolve()
      })
    })
    // Awaited by the caller when it matters; a failure also surfaces through drain/the next write.
    done.catch(() => {})
    return { done, more }
  }

  private drain(): Promise<void> {
    const socket = this.socket
    return new Promise<void>((resolve, reject) => {
      const onDrain = () => {
        socket.off("close", onClose)
        resolve()
      }
      const onClose = () => {
        socket.off("drain", onDrain)
        reject(this.fail(failure("the peer closed the connection mid-response")))
      }
      socket.once("drain", onDrain)
      socket.once("close", onClose)
    })
  }

  private async sendFrame(frame: Uint8Array): Promise<void> {
    const { done, more } = this.write(frame)
    if (!more) await this.drain()
    await done
  }

  private async sendFile(header: Uint8Array, segments: ReadonlyArray<FileSegment>): Promise<void> {
    const pool = this.pool
    let last: Promise<void> | undefined
    let headerPending = header.length > 0
    if (headerPending && header.length > pool.bufferSize / 2) {
      const { done, more } = this.write(header)
      last = done
      headerPending = false
      if (!more) await this.drain()
    }
    let segIndex = 0
    let segDone = 0
    const remaining = () => {
      while (segIndex < segments.length && segDone >= segments[segIndex]!.length) {
        segIndex++
        segDone = 0
      }
      return segIndex < segments.length
    }
    while (headerPending || remaining()) {
      const buffer = pool.acquire()
      let filled = 0
      if (headerPending) {
        buffer.set(header, 0)
        filled = header.length
        headerPending = false
      }
      try {
        while (filled < buffer.length && remaining()) {
          const seg = segments[segIndex]!
          const want = Math.min(buffer.length - filled, seg.length - segDone)
          const got = await readInto(seg.fd, buffer, filled, want, seg.offset + segDone)
          if (got === 0) {
            throw this.fail(
              failure(`file fd ${seg.fd} ended at ${seg.offset + segDone}, before the ${seg.length} bytes promised from ${seg.offset}`)
            )
          }
          filled += got
          segDone += got
        }
        if (this.socket.destroyed) throw this.fail(failure("the peer closed the connection mid-response"))
      } catch (error) {
        pool.release(buffer)
        throw error instanceof ConnectionWriteError ? error : this.fail(failure("reading the file failed", error))
      }
      const { done, more } = this.write(buffer.subarray(0, filled), () => pool.release(buffer))
      last = done
      if (!more) await this.drain()
    }
    if (last !== undefined) await last
  }
}

export const makePortablePlane = (options: PortableOptions = {}): DataPlaneShape => {
  const pool = options.pool ?? new BufferPool()
  return {
    name: "portable",
    reason: options.reason ?? "portable plane selected",
    attach: (connection) => new PortableWriter(connection.socket, pool)
  }
}
