import type * as net from "node:net"
import { Context } from "effect"

/**
 * The promise a writer returns when the bytes were fully handed to the kernel before the call
 * returned (the native plane's common case). Callers may compare against it and finish the
 * response synchronously instead of paying a `.then` (a promise, two closures, a microtask)
 * per request.
 */
export const WRITTEN: Promise<void> = Promise.resolve()

/** A byte range of an open file, handed to the kernel (native) or read through a pooled buffer (portable). */
export interface FileSegment {
  readonly fd: number
  readonly offset: number
  readonly length: number
}

/**
 * Every write on one connection goes through its writer, so response bytes can never
 * interleave (with each other, or with libuv's own write queue on the native plane).
 * Calls are serialised in call order: a second call starts after the first has fully sent.
 * A rejection means the connection is unusable and has been destroyed.
 */
export interface ConnectionWriter {
  /** A small frame (header plus short body: Ping reply, error frame). */
  readonly writeFrame: (frame: Uint8Array) => Promise<void>
  /** A response header followed by file bytes (one or more segments, e.g. pages). */
  readonly writeFile: (header: Uint8Array, segments: ReadonlyArray<FileSegment>) => Promise<void>
  /**
   * Half-closes the connection (FIN) once every write queued before it has been sent; rejects
   * like the write that failed. Use it instead of `socket.end()`, which would shut the socket
   * down under a native write still in progress. (Optional member, added by the plane owner.)
   */
  readonly end?: () => Promise<void>
}

export interface DataPlaneShape {
  readonly name: "native" | "portable"
  /** Why this plane runs (e.g. "native addon loaded" or "native addon failed to load: ..."). */
  readonly reason: string
  readonly attach: (socket: net.Socket) => ConnectionWriter
}

/** How response bytes reach the socket: `Sendfile.Native` or `Sendfile.Portable`. */
export class DataPlane extends Context.Tag("talon/DataPlane")<DataPlane, DataPlaneShape>() {}
