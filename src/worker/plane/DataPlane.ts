import { Context } from "effect"
import type { Adopt, Connection } from "../server/SocketServer.js"

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
  /**
   * A response header followed by file bytes (one or more segments, e.g. pages). The header is
   * read during the call only (the serve loop reuses one buffer for every reply header): a
   * writer that keeps it for later copies it.
   */
  readonly writeFile: (header: Uint8Array, segments: ReadonlyArray<FileSegment>) => Promise<void>
  /**
   * Half-closes the connection (FIN) once every write queued before it has been sent; rejects
   * like the write that failed. Use it instead of `socket.end()`, which would shut the socket
   * down under a native write still in progress. (Optional member, added by the plane owner.)
   */
  readonly end?: () => Promise<void>
}

/** Where a plane that reads a connection itself delivers what it read. */
export interface ReadSink {
  /**
   * Bytes read, at `buf[start, end)`. The buffer is reused by the next read: anything kept past
   * this call must be copied. An empty range only asks the loop to look at the connection again
   * (a reply it never saw, finished by the plane, is out).
   */
  readonly bytes: (buf: Buffer, start: number, end: number) => void
  /** The peer half-closed (end of stream); nothing more will be read. */
  readonly end: () => void
  /** The read failed (reset, or the connection broke); nothing more will be read. */
  readonly error: () => void
}

/** Read-side control of a connection whose reads the plane owns. */
export interface ConnectionReader {
  /** Stops asking for bytes (backpressure); data stays in the kernel. */
  readonly pause: () => void
  readonly resume: () => void
  /** Reads so far (the serve loop's read timeout looks for activity here: libuv sees none). */
  readonly reads: () => number
  /**
   * The serve loop is idle (no partial frame, no reply pending): until it next hands bytes to
   * the sink, the plane may answer this connection's reads itself from `table` (published
   * hits only; the first frame it cannot answer comes to the sink with everything after it).
   * Ignored while the writer still has bytes queued. (Optional: planes without a hit table.)
   */
  readonly offload?: (table: HitTable) => void
}

/**
 * What a hit table is told of an object it may answer for: its bincode ObjectId bytes, its
 * geometry, how long it stays fresh, and `version` (bincode String of the current version, or
 * empty), which lets the table also answer GetCachedRanges that name exactly that version.
 */
export type PublishedObject = [
  id: Uint8Array,
  size: number,
  blockSize: number,
  pageSize: number,
  freshMs: number,
  version: Uint8Array
]

/**
 * GetRange replies a plane answers without the serve loop (native/hits.c), one table per data
 * server. What is published must be exactly what the serve loop would send: the owner
 * publishes only ranges its own hit path has just served, and drops them when that stops
 * being true (eviction, a version change, the worker no longer ready).
 */
export interface HitTable {
  readonly id: number
  /** [replies, payload bytes] the table has answered so far. */
  readonly counts: Float64Array
  /** An object servable for `freshMs` more (see PublishedObject): its oid (> 0), or < 0 when the table is full. */
  readonly publishObject: (...object: PublishedObject) => number
  /** A resident unit of a published object (bytes `[start, start+bytes)` of it, in `fd`): 0, or < 0 when not published. */
  readonly publishUnit: (oid: number, start: number, bytes: number, fd: number, tag: number) => number
  readonly dropObject: (oid: number) => void
  readonly dropUnit: (oid: number, start: number) => void
  readonly clear: () => void
  /** Tags of the units answered since the last sweep, into `out`: how many. */
  readonly sweep: (out: Int32Array) => number
  readonly close: () => void
}

export interface DataPlaneShape {
  readonly name: "native" | "portable"
  /** Why this plane runs (e.g. "native addon loaded" or "native addon failed to load: ..."). */
  readonly reason: string
  /** The connection's writer; a plane that makes syscalls takes the fd from `connection.fd`. */
  readonly attach: (connection: Connection) => ConnectionWriter
  /**
   * Present when the plane reads connections itself (native: recv on the fd when the shared
   * epoll says it is readable) instead of through libuv's 'data' events. The socket must have
   * been accepted paused (`pauseOnConnect`) and must never be resumed: libuv and the plane
   * must not both read it. `writer` is what `attach` returned for the socket.
   */
  readonly read?: (connection: Connection, writer: ConnectionWriter, sink: ReadSink) => ConnectionReader
  /**
   * Present when the plane can also accept on the socket server's listening fd, all that are
   * pending at once (libuv accepts one per loop turn). `onSocket` gets paused sockets, as
   * a `pauseOnConnect` server's listener does. Returns how to stop (before the server
   * closes), or undefined when it cannot.
   */
  readonly adoptListener?: Adopt
  /** Present when the plane can answer hits itself: a new table for one data server, or undefined when none is left. */
  readonly hitTable?: () => HitTable | undefined
}

/** How response bytes reach the socket: `Sendfile.Native` or `Sendfile.Portable`. */
export class DataPlane extends Context.Tag("talon/DataPlane")<DataPlane, DataPlaneShape>() {}
