/**
 * The fill's native receive (native/fill.c, build/Release/talon_fill.node): once a plain-HTTP
 * response's head is parsed and its body's length known, the body is received by a thread of
 * the addon's own straight into the fill's staging buffer (and each complete page hashed there
 * with XXH64), so the worker's JS thread neither copies nor frames those bytes.
 */
import { createRequire } from "node:module"
import type * as net from "node:net"
import { fileURLToPath } from "node:url"
import { ReceiveError } from "./receiveTypes.js"

/** A receive's end: every byte came, the origin closed first, or -errno (-ETIMEDOUT: no byte for the timeout). */
export const FILL_DONE = 0
export const FILL_EOF = 1

/** The functions of native/fill.c. */
export interface FillAddon {
  readonly receive: (
    fd: number,
    buf: Uint8Array,
    from: number,
    to: number,
    hash: boolean,
    timeoutMs: number,
    onDone: (code: number, bytes: number, sum: bigint | undefined) => void
  ) => number
  readonly shutdown: (fd: number) => number
  readonly counters: () => {
    readonly receives: number
    readonly bytes: number
    readonly hashed: number
    readonly polls: number
    readonly inFlight: number
    readonly threads: number
  }
}

export const defaultFillAddonPath = fileURLToPath(new URL("../../build/Release/talon_fill.node", import.meta.url))

let loaded: FillAddon | string | undefined

/** The addon, or why it cannot be used here (not Linux, not built): loaded once per process. */
export const fillAddon = (): FillAddon | string => {
  if (loaded !== undefined) return loaded
  if (process.platform !== "linux") return (loaded = `the native receive needs Linux (this is ${process.platform})`)
  try {
    const addon = createRequire(import.meta.url)(defaultFillAddonPath) as FillAddon
    if (typeof addon.receive !== "function") return (loaded = `${defaultFillAddonPath} is not the fill addon; rebuild it with \`npx node-gyp rebuild\``)
    return (loaded = addon)
  } catch (e) {
    return (loaded = `cannot load ${defaultFillAddonPath} (${(e as Error).message}); build it with \`npx node-gyp rebuild\``)
  }
}

/** The socket's fd when a native receive may read it (plain TCP, open), else -1. */
export const socketFd = (socket: net.Socket): number => {
  if ((socket as { encrypted?: boolean }).encrypted === true || socket.destroyed) return -1
  const fd = (socket as unknown as { _handle?: { fd?: number } | null })._handle?.fd
  return typeof fd === "number" && fd >= 0 ? fd : -1
}

/** A receive that ended early (the origin closed, or -errno), as the failure the retry policy reads (node-style codes). */
export const nativeFailure = (code: number, timeoutMs: number): ReceiveError =>
  code === FILL_EOF
    ? new ReceiveError("origin closed the connection after a short body", "ERR_STREAM_PREMATURE_CLOSE")
    : -code === 110
    ? new ReceiveError(`no bytes from the origin for ${timeoutMs} ms`, "ETIMEDOUT")
    : new ReceiveError(`origin connection failed in the body (errno ${-code})`, errnoCode(code))

const errnoCode = (code: number): string => {
  switch (-code) {
    case 104:
      return "ECONNRESET"
    case 110:
      return "ETIMEDOUT"
    case 32:
      return "EPIPE"
    case 103:
      return "ECONNABORTED"
    case 113:
      return "EHOSTUNREACH"
    case 101:
      return "ENETUNREACH"
    default:
      return "ECONNRESET"
  }
}
