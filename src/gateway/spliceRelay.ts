/**
 * Pieces of a response relayed from a worker's socket to the HTTP client's socket by the
 * kernel (native/splice.c): the gateway writes a GetPinnedRange on a connection of its own,
 * reads the 16-byte reply header (and an error's body) itself, and hands the body to
 * `splice(2)` through the connection's pipe. The event loop never waits: a socket that
 * cannot move a byte is watched on the addon's epoll fd, and JS hears back once per piece.
 *
 * The relay's connections carry one request at a time and are never read by node (paused
 * from the start), so no body byte can land in a JS buffer ahead of the splice; a connection
 * whose reply did not end cleanly is closed, never reused.
 */
import { createRequire } from "node:module"
import * as net from "node:net"
import { fileURLToPath } from "node:url"
import { parseHostPort } from "../transport/address.js"
import type { ObjectId } from "../core/ids.js"
import {
  dataErrorCodeName,
  decodeErrorPayload,
  encodeGetPinnedRangeFrame,
  Flags,
  HEADER_LEN,
  readHeader,
  type TenantId
} from "../protocol/index.js"

/** The functions of native/splice.c (build/Release/talon_splice.node). */
interface SpliceAddon {
  readonly init: (slots: number, onEvent: (slot: number, code: number) => void) => number
  readonly pipe: (out: Int32Array) => number
  readonly relay: (slot: number, src: number, dst: number, pipeR: number, pipeW: number, pipeSize: number, length: number, head: Uint8Array | null) => number
  readonly wait: (slot: number, fd: number, events: number) => number
  readonly cancel: (slot: number) => number
  readonly recv: (fd: number, buf: Uint8Array, off: number, len: number) => number
  readonly close: (fd: number) => number
  readonly counters: () => { relays: number; splices: number; bytes: number; waits: number; wakeups: number }
}

export const defaultSpliceAddonPath = fileURLToPath(new URL("../../build/Release/talon_splice.node", import.meta.url))

const EAGAIN = 11
/** A wait's onEvent code is this bit plus the events seen (native/splice.c); 1 alone is a relay's progress note. */
const WAIT_DONE = 0x100
/** Relays and header waits in flight at once; more take the route. */
const SLOTS = 4096
/** Idle connections kept per worker. */
const IDLE_PER_WORKER = 32
/** An error reply's body is a short message; a longer one is a broken peer. */
const MAX_ERROR_BODY = 64 * 1024

/** A data connection of the relay's own: a paused socket, its fd, and the pipe its bodies cross. */
class Upstream {
  constructor(
    readonly address: string,
    readonly socket: net.Socket,
    readonly fd: number,
    readonly pipeR: number,
    readonly pipeW: number,
    readonly pipeSize: number,
    readonly reused: boolean
  ) {}
  /** Where a reply header is received. */
  readonly hdr = Buffer.alloc(HEADER_LEN)
}

/** Why a piece did not come, before any of its body moved: the route may serve it instead. */
export type PieceRefusal =
  | { readonly _tag: "Unreachable"; readonly detail: string }
  | { readonly _tag: "Rejected"; readonly code: number; readonly detail: string }

/** A piece whose reply header said "here are exactly your bytes": the body is still in the worker's socket. */
export interface ReadyPiece {
  readonly _tag: "Ready"
  readonly upstream: Upstream
}

export interface SpliceRelayShape {
  /** The socket's fd when the relay can write to it (plain TCP, open), else -1 (TLS, closed). */
  readonly fdOf: (socket: net.Socket) => number
  /** Asks `address` for exactly `length` bytes of `version` at `offset` and waits for the reply header. */
  readonly request: (
    address: string,
    object: ObjectId,
    version: string,
    offset: number,
    length: number
  ) => Promise<ReadyPiece | PieceRefusal>
  /**
   * Moves the ready piece's `length` body bytes to `socket` (after `head`, when given): true once
   * all went, false when either side failed (the piece's connection is then closed).
   */
  readonly relay: (piece: ReadyPiece, socket: net.Socket, fd: number, length: number, head: Uint8Array | undefined) => Promise<boolean>
  /** Drops a ready piece whose body will not be relayed (its connection is closed). */
  readonly discard: (piece: ReadyPiece) => void
  /** The addon's counters, and the slots (header waits and relays) in use in this process now. */
  readonly counters: () => ReturnType<SpliceAddon["counters"]> & { readonly slotsInUse: number }
  /** Closes the idle connections. */
  readonly close: () => void
}

interface Handle {
  readonly fd?: number
}

const socketFd = (socket: net.Socket): number => {
  if ((socket as { encrypted?: boolean }).encrypted === true || socket.destroyed) return -1
  const fd = (socket as unknown as { _handle?: Handle | null })._handle?.fd
  return typeof fd === "number" && fd >= 0 ? fd : -1
}

let loaded: { readonly path: string; readonly addon: SpliceAddon } | string | undefined

const loadAddon = (path: string): SpliceAddon | string => {
  if (loaded !== undefined) return typeof loaded === "string" ? loaded : loaded.path === path ? loaded.addon : `the splice addon is already loaded from ${loaded.path}`
  if (process.platform !== "linux") return (loaded = `the splice relay needs Linux (this is ${process.platform})`)
  try {
    const addon = createRequire(import.meta.url)(path) as SpliceAddon
    if (typeof addon.relay !== "function") return (loaded = `${path} is not the splice addon (no relay export); rebuild with node-gyp`)
    loaded = { path, addon }
    return addon
  } catch (e) {
    return (loaded = `cannot load ${path} (${(e as Error).message}); build it with \`npx node-gyp rebuild\``)
  }
}

/** The process-wide half: the addon, its slot table, and who waits on each slot. */
interface Runtime {
  readonly addon: SpliceAddon
  readonly waiters: Array<((code: number) => void) | undefined>
  readonly free: Array<number>
}

let runtime: Runtime | string | undefined

const runtimeFor = (path: string): Runtime | string => {
  if (runtime !== undefined) return runtime
  const addon = loadAddon(path)
  if (typeof addon === "string") return addon
  const waiters: Array<((code: number) => void) | undefined> = new Array(SLOTS)
  const free: Array<number> = []
  for (let i = SLOTS - 1; i >= 0; i--) free.push(i)
  const rc = addon.init(SLOTS, (slot, code) => {
    const w = waiters[slot]
    if (w === undefined) return
    // A progress note (1) keeps the slot; anything else ends it.
    if (code !== 1) {
      waiters[slot] = undefined
      free.push(slot)
    }
    w(code)
  })
  return (runtime = rc < 0 ? `the splice addon's epoll set-up failed (errno ${-rc})` : { addon, waiters, free })
}

/**
 * A relay over this process's addon (one epoll fd and slot table per process; connections and
 * tenant per caller), or why there is none (not Linux, the addon not built).
 */
export const makeSpliceRelay = (options: { readonly tenant?: string | undefined; readonly connectTimeoutMs: number; readonly addonPath?: string }): SpliceRelayShape | string => {
  const rt = runtimeFor(options.addonPath ?? defaultSpliceAddonPath)
  if (typeof rt === "string") return rt
  const { addon, waiters, free } = rt
  const tenant: TenantId | undefined = options.tenant === undefined || options.tenant === "" ? undefined : { _tag: "Named", name: options.tenant }
  const idle = new Map<string, Array<Upstream>>()
  const pipeOut = new Int32Array(2)
  let requestIds = 0

  const destroy = (up: Upstream) => {
    up.socket.destroy()
    addon.close(up.pipeR)
    addon.close(up.pipeW)
  }

  const park = (up: Upstream) => {
    let list = idle.get(up.address)
    if (list === undefined) idle.set(up.address, (list = []))
    if (list.length >= IDLE_PER_WORKER || up.socket.destroyed) return destroy(up)
    up.socket.unref()
    list.push(up.reused ? up : new Upstream(up.address, up.socket, up.fd, up.pipeR, up.pipeW, up.pipeSize, true))
  }

  const dial = (address: string): Promise<Upstream | string> =>
    new Promise((resolve) => {
      let settled = false
      const target = parseHostPort(address)
      if (target === undefined) return resolve(`${address} is not host:port`)
      const socket = net.connect({ host: target.host, port: target.port })
      // Never read by node: every byte of a reply is the relay's (recv for the header, splice for the body).
      socket.pause()
      socket.setNoDelay(true)
      const timer = setTimeout(() => done(`no connection within ${options.connectTimeoutMs} ms`), options.connectTimeoutMs)
      const done = (failure?: string) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        socket.off("connect", onConnect)
        if (failure !== undefined) {
          socket.destroy()
          return resolve(`${address}: ${failure}`)
        }
        const fd = socketFd(socket)
        const size = fd < 0 ? -1 : addon.pipe(pipeOut)
        if (size < 0) {
          socket.destroy()
          return resolve(`${address}: ${fd < 0 ? "the connection has no fd" : `no pipe (errno ${-size})`}`)
        }
        resolve(new Upstream(address, socket, fd, pipeOut[0]!, pipeOut[1]!, size, false))
      }
      const onConnect = () => done()
      socket.once("connect", onConnect)
      // Errors after the connect surface as failed recv/splice calls; this keeps them from being unhandled.
      socket.on("error", (e) => done(e.message))
    })

  const take = (address: string): Upstream | Promise<Upstream | string> => {
    const list = idle.get(address)
    for (let up = list?.pop(); up !== undefined; up = list!.pop()) {
      if (up.socket.destroyed || socketFd(up.socket) !== up.fd) {
        destroy(up)
        continue
      }
      up.socket.ref()
      return up
    }
    return dial(address)
  }

  /** One wait on the addon's epoll: resolves with the events seen, or -1 when no slot is free. */
  const waitFor = (fd: number, events: number, timeoutMs: number): Promise<number> =>
    new Promise((resolve) => {
      const slot = free.pop()
      if (slot === undefined) return resolve(-1)
      const timer = setTimeout(() => {
        if (waiters[slot] !== onEvent) return
        addon.cancel(slot)
        waiters[slot] = undefined
        free.push(slot)
        resolve(0)
      }, timeoutMs)
      const onEvent = (code: number) => {
        clearTimeout(timer)
        resolve(code & (WAIT_DONE - 1))
      }
      waiters[slot] = onEvent
      const r = addon.wait(slot, fd, events)
      if (r < 0) {
        clearTimeout(timer)
        waiters[slot] = undefined
        free.push(slot)
        resolve(-1)
      }
    })

  /** Exactly `buf.length` bytes from the connection, waiting for them; a short count when it closed or stalled. */
  const recvExactly = async (up: Upstream, buf: Buffer, deadline: number): Promise<number> => {
    let got = 0
    while (got < buf.length) {
      const n = addon.recv(up.fd, buf, got, buf.length - got)
      if (n > 0) {
        got += n
        continue
      }
      if (n !== -EAGAIN) return got
      const left = deadline - performance.now()
      if (left <= 0 || (await waitFor(up.fd, 1, left)) <= 0) return got
    }
    return got
  }

  const attempt = async (up: Upstream, object: ObjectId, version: string, offset: number, length: number): Promise<ReadyPiece | PieceRefusal | "stale"> => {
    const requestId = (requestIds = (requestIds + 1) >>> 0)
    up.socket.write(encodeGetPinnedRangeFrame(requestId, { object, version, offset, len: length }, tenant))
    const deadline = performance.now() + options.connectTimeoutMs
    const hdr = up.hdr
    const got = await recvExactly(up, hdr, deadline)
    if (got < HEADER_LEN) {
      destroy(up)
      // A kept connection the worker closed while it sat idle: nothing was answered, dial again.
      if (got === 0 && up.reused) return "stale"
      return { _tag: "Unreachable", detail: `${up.address}: ${got} of ${HEADER_LEN} reply header bytes, then the connection closed or stalled` }
    }
    const h = readHeader(hdr, 0)
    if ("_tag" in h) {
      destroy(up)
      return { _tag: "Unreachable", detail: `${up.address}: undecodable reply header (${h.message})` }
    }
    if (h.requestId !== requestId) {
      destroy(up)
      return { _tag: "Unreachable", detail: `${up.address}: reply to request ${h.requestId}, expected ${requestId}` }
    }
    if ((h.flags & Flags.Error) !== 0) {
      if (h.length > MAX_ERROR_BODY) {
        destroy(up)
        return { _tag: "Unreachable", detail: `${up.address}: a ${h.length}-byte error reply` }
      }
      const body = Buffer.alloc(h.length)
      const n = await recvExactly(up, body, deadline)
      if (n < h.length) {
        destroy(up)
        return { _tag: "Unreachable", detail: `${up.address}: error reply cut short` }
      }
      park(up)
      const e = decodeErrorPayload(body)
      return { _tag: "Rejected", code: e.code, detail: `${up.address}: ${dataErrorCodeName(e.code)}: ${e.message}` }
    }
    if (h.length !== length) {
      // Never relayed: a body of another length is not the range the head promises.
      destroy(up)
      return { _tag: "Unreachable", detail: `${up.address}: a ${h.length}-byte reply to a ${length}-byte request` }
    }
    return { _tag: "Ready", upstream: up }
  }

  const request = async (address: string, object: ObjectId, version: string, offset: number, length: number): Promise<ReadyPiece | PieceRefusal> => {
    for (let tries = 0; ; tries++) {
      const taken = take(address)
      const up = taken instanceof Upstream ? taken : await taken
      if (typeof up === "string") return { _tag: "Unreachable", detail: up }
      const r = await attempt(up, object, version, offset, length)
      if (r !== "stale") return r
      if (tries > 0) return { _tag: "Unreachable", detail: `${address}: the connection closed before a reply` }
    }
  }

  const relay = (piece: ReadyPiece, socket: net.Socket, fd: number, length: number, head: Uint8Array | undefined): Promise<boolean> => {
    const up = piece.upstream
    const slot = free.pop()
    if (slot === undefined) {
      destroy(up)
      return Promise.resolve(false)
    }
    return new Promise((resolve) => {
      const finish = (ok: boolean) => {
        socket.off("close", onClose)
        if (ok) park(up)
        else destroy(up)
        resolve(ok)
      }
      const onClose = () => {
        if (waiters[slot] !== onEvent) return
        addon.cancel(slot)
        waiters[slot] = undefined
        free.push(slot)
        finish(false)
      }
      const onEvent = (code: number) => {
        if (code === 1) {
          // Bytes moved to a slow reader: the connection is not idle.
          const t = socket.timeout
          if (t !== undefined && t > 0) socket.setTimeout(t)
          return
        }
        finish(code === 0)
      }
      waiters[slot] = onEvent
      const r = addon.relay(slot, up.fd, fd, up.pipeR, up.pipeW, up.pipeSize, length, head ?? null)
      if (r === 1) {
        socket.once("close", onClose)
        return
      }
      waiters[slot] = undefined
      free.push(slot)
      finish(r === 0)
    })
  }

  return {
    fdOf: socketFd,
    request,
    relay,
    discard: (piece) => destroy(piece.upstream),
    counters: () => ({ ...addon.counters(), slotsInUse: SLOTS - free.length }),
    close: () => {
      for (const list of idle.values()) for (const up of list) destroy(up)
      idle.clear()
    }
  }
}
