import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"
import type { PublishedObject } from "./DataPlane.js"

/** Counters of the native plane in this process (all connections), for tests and benchmarks. */
export interface NativeCounters {
  readonly sendCalls: number
  readonly sendfileCalls: number
  /** Times the socket buffer was full (EAGAIN or a short send): each one arms a writability wait. */
  readonly eagain: number
  readonly waits: number
  /** Ready fds delivered by the shared epoll fd. */
  readonly wakeups: number
  readonly bytes: number
  /** Headers pushed by hand: sent under MSG_MORE, then the file found the buffer full. */
  readonly pushes: number
  /** recv(2) calls of connections the native plane reads itself. */
  readonly recvCalls: number
  /** Connections accepted by the addon (batch accept on the listening fd), and the calls that accepted any. */
  readonly accepts: number
  readonly acceptBatches: number
  /** GetRange replies the addon's hit table sent without JS, their payload bytes, and reads it handed to JS. */
  readonly fastHits: number
  readonly fastBytes: number
  readonly handoffs: number
}

/** The functions exported by `native/sendfile.c` (build/Release/talon_sendfile.node). */
export interface NativeAddon {
  /** Bytes sent (header + file), short of hdrLen+fileLen when the socket would block; or -errno with nothing sent. */
  readonly sendHeaderFile: (
    sockFd: number,
    header: Uint8Array | null,
    hdrOff: number,
    hdrLen: number,
    fileFd: number,
    fileOff: number,
    fileLen: number
  ) => number
  /** `ready` receives (fd, events) pairs, events 1 = readable, 2 = writable, 4 = error/hang-up. */
  readonly init: (ready: Int32Array, onReady: (count: number) => void) => number
  readonly waitWritable: (fd: number) => number
  /** The fd's level-triggered registration: 1 readable, 2 writable, 3 both, 0 none. */
  readonly watch: (fd: number, interest: number) => number
  /** Bytes read, 0 at end of stream, or -errno. */
  readonly recv: (fd: number, buf: Uint8Array, off: number, len: number) => number
  /** Accepts every pending connection of a listening fd (at most out.length): the count written to out, or -errno. */
  readonly accept: (listenFd: number, out: Int32Array) => number
  readonly setSendBuffer: (fd: number, bytes: number) => number
  readonly getSendBuffer: (fd: number) => number
  readonly setNoDelay: (fd: number) => number
  readonly counters: () => NativeCounters
  readonly errnoName: (negErrno: number) => string
  // The hit table (native/hits.c): replies answered on the loop without calling into JS.
  /** Memory the tables work in: connFast[fd] = table id, handoff (Int32Array(16)), the plane's read buffer. */
  readonly hitsInit: (connFast: Uint8Array, handoff: Int32Array, readBuf: Uint8Array) => number
  /**
   * A table (one per data server); `counts` receives [replies, payload bytes] and, given bucket
   * `bounds` (seconds), [latency sum, a count per bucket, +Inf]. Its id (1..15), or -errno.
   */
  readonly hitsCreate: (counts: Float64Array, bounds?: Float64Array) => number
  readonly hitsDestroy: (table: number) => number
  /** Publishes an object (bincode ObjectId bytes) fresh for `freshMs`: its oid (> 0), or -errno. */
  readonly hitsObject: (table: number, ...object: PublishedObject) => number
  /** Publishes a resident unit of an object (the table keeps its own dup of `fd`): 0 or -errno. */
  readonly hitsUnit: (table: number, oid: number, start: number, bytes: number, fd: number, tag: number) => number
  readonly hitsDropObject: (table: number, oid: number) => number
  readonly hitsDropUnit: (table: number, oid: number, start: number) => number
  readonly hitsClear: (table: number) => number
  /** Tags of the units answered since the last sweep, into `out`: how many. */
  readonly hitsSweep: (table: number, out: Int32Array) => number
  readonly closeFd: (fd: number) => number
  // SO_REUSEPORT listeners of `--loops N` (native/listen.c).
  /** A TCP socket with SO_REUSEPORT bound to host (numeric) and port, listening when backlog > 0: its fd, or -errno. */
  readonly reusePortSocket: (host: string, port: number, backlog: number) => number
  /** The port a socket is bound to, or -errno. */
  readonly localPort: (fd: number) => number
}

export const defaultAddonPath = fileURLToPath(new URL("../../../build/Release/talon_sendfile.node", import.meta.url))

export type AddonLoad =
  | { readonly _tag: "Loaded"; readonly addon: NativeAddon; readonly path: string }
  | { readonly _tag: "Unavailable"; readonly reason: string }

const required = [
  "sendHeaderFile",
  "init",
  "waitWritable",
  "watch",
  "recv",
  "accept",
  "setSendBuffer",
  "getSendBuffer",
  "setNoDelay",
  "counters",
  "errnoName",
  "hitsInit",
  "hitsCreate",
  "hitsDestroy",
  "hitsObject",
  "hitsUnit",
  "hitsDropObject",
  "hitsDropUnit",
  "hitsClear",
  "hitsSweep",
  "closeFd",
  "reusePortSocket",
  "localPort"
]

const cache = new Map<string, AddonLoad>()

/** Loads the addon once per path; never throws: an unusable addon is a reason, not an exception. */
export const loadNativeAddon = (path: string = defaultAddonPath): AddonLoad => {
  const hit = cache.get(path)
  if (hit !== undefined) return hit
  const result = attempt(path)
  cache.set(path, result)
  return result
}

const attempt = (path: string): AddonLoad => {
  if (process.platform !== "linux") {
    return { _tag: "Unavailable", reason: `the native sendfile hook needs Linux (this is ${process.platform})` }
  }
  let addon: NativeAddon
  try {
    addon = createRequire(import.meta.url)(path) as NativeAddon
  } catch (error) {
    const message = (error as Error).message?.split("\n")[0] ?? String(error)
    return {
      _tag: "Unavailable",
      reason: `native addon failed to load from ${path} (${message}); build it with \`npm rebuild\` or \`npx node-gyp rebuild\``
    }
  }
  const missing = required.filter((name) => typeof (addon as unknown as Record<string, unknown>)[name] !== "function")
  if (missing.length > 0) {
    return { _tag: "Unavailable", reason: `native addon at ${path} is stale (missing ${missing.join(", ")}); rebuild it` }
  }
  return { _tag: "Loaded", addon, path }
}
