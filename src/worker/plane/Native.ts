/**
 * The native data plane: the addon's send + sendfile on each connection's fd, reads with recv on
 * the shared epoll fd, batch accept, and the hit table (native/hits.c) that answers published hits
 * without JS. The runtime (NativeRuntime.ts) is process-wide; connections are NativeConnection.ts.
 */
import { LATENCY_BUCKETS } from "../../core/exposition.js"
import * as net from "node:net"
import { Connection } from "../server/SocketServer.js"
import type { DataPlaneShape, HitTable } from "./DataPlane.js"
import { loadNativeAddon, type NativeAddon, type NativeCounters } from "./NativeAddon.js"
import { NativeReader, NativeWriter } from "./NativeConnection.js"
import { IN, NativeAcceptor, NativeRuntime } from "./NativeRuntime.js"
import { makePortablePlane } from "./Portable.js"

export interface NativeOptions {
  /** Where to load the addon from (default: build/Release/talon_sendfile.node of this checkout). */
  readonly addonPath?: string
}

let runtime: { readonly addon: NativeAddon; readonly rt: NativeRuntime } | undefined

const runtimeFor = (addon: NativeAddon): NativeRuntime => {
  if (runtime === undefined || runtime.addon !== addon) runtime = { addon, rt: new NativeRuntime(addon) }
  return runtime.rt
}

/** This process's native runtime (shared epoll fd), or why it cannot be set up. */
export const nativeRuntime = (addon: NativeAddon): NativeRuntime | string => {
  try {
    return runtimeFor(addon)
  } catch (error) {
    return `native addon loaded but ${(error as Error).message}`
  }
}

/** The connection's fd, or why the native plane cannot use it. */
const fdOf = (connection: Connection): number => {
  const fd = connection.fd
  if (fd === undefined) throw new Error("native data plane: the socket has no fd (not a connected TCP socket, or already closed)")
  return fd
}

/**
 * The native plane when the addon loads (and epoll can be set up), else the portable plane
 * with a `reason` that says why native is not running.
 */
export const makeNativePlane = (options: NativeOptions = {}): DataPlaneShape => {
  const load = loadNativeAddon(options.addonPath)
  if (load._tag === "Unavailable") return makePortablePlane({ reason: `fell back to portable: ${load.reason}` })
  let rt: NativeRuntime
  try {
    rt = runtimeFor(load.addon)
  } catch (error) {
    return makePortablePlane({ reason: `fell back to portable: native addon loaded but ${(error as Error).message}` })
  }
  return {
    name: "native",
    reason: `native sendfile addon loaded from ${load.path}`,
    attach: (connection) => new NativeWriter(rt, connection.socket, fdOf(connection)),
    read: (_connection, writer, sink) => {
      if (!(writer instanceof NativeWriter)) throw new Error("native data plane: read() needs the writer attach() returned")
      const reader = new NativeReader(rt, writer, sink)
      writer.reader = reader
      writer.setInterest(writer.interest | IN)
      return reader
    },
    hitTable: () => makeHitTable(rt),
    adoptListener: (fd, onSocket, onFailed) => {
      const acceptor = new NativeAcceptor(rt, fd, onSocket, onFailed)
      return acceptor.start() ? () => acceptor.stop() : undefined
    }
  }
}

const makeHitTable = (rt: NativeRuntime): HitTable | undefined => {
  const addon = rt.addon
  // [replies, bytes, latency sum, one count per bucket and +Inf]: the table times its own replies.
  const counts = new Float64Array(3 + LATENCY_BUCKETS.length + 1)
  const id = addon.hitsCreate(counts, Float64Array.from(LATENCY_BUCKETS))
  if (id < 0) return undefined
  let open = true
  return {
    id,
    counts,
    publishObject: (bytes, size, blockSize, pageSize, freshMs, version) =>
      open ? addon.hitsObject(id, bytes, size, blockSize, pageSize, freshMs, version) : -1,
    publishUnit: (oid, start, bytes, fd, tag) => (open ? addon.hitsUnit(id, oid, start, bytes, fd, tag) : -1),
    dropObject: (oid) => void (open && addon.hitsDropObject(id, oid)),
    dropUnit: (oid, start) => void (open && addon.hitsDropUnit(id, oid, start)),
    clear: () => void (open && addon.hitsClear(id)),
    sweep: (out) => (open ? addon.hitsSweep(id, out) : 0),
    close: () => {
      if (!open) return
      open = false
      // Connections still marked for this table are no longer served by it (the addon ignores a freed id).
      addon.hitsDestroy(id)
    }
  }
}

/** This process's native-plane counters, or undefined when the addon does not load. */
export const nativeCounters = (options: NativeOptions = {}): NativeCounters | undefined => {
  const load = loadNativeAddon(options.addonPath)
  return load._tag === "Loaded" ? load.addon.counters() : undefined
}

/** Sets SO_SNDBUF on a socket through the addon (tests use a small one to force EAGAIN). */
export const setSendBuffer = (socket: net.Socket, bytes: number, options: NativeOptions = {}): number => {
  const load = loadNativeAddon(options.addonPath)
  if (load._tag === "Unavailable") throw new Error(load.reason)
  const r = load.addon.setSendBuffer(fdOf(new Connection(socket)), bytes)
  if (r < 0) throw new Error(`setsockopt(SO_SNDBUF) failed: ${load.addon.errnoName(r)}`)
  return load.addon.getSendBuffer(fdOf(new Connection(socket)))
}
