/**
 * The worker's frame-level rules, shared by the serve loop: request body caps, the header check
 * that decides whether a connection may go on, the over-cap notice, and the reply header.
 */
import {
  capFor,
  DEFAULT_CAPS,
  encodeErrorFrame,
  HEADER_LEN,
  isMsgType,
  MAGIC,
  msgTypeName,
  type MsgType,
  PROTOCOL_VERSION,
  type FrameCaps
} from "../../protocol/index.js"

/** Request bodies a worker accepts: nothing it serves needs more than 64 KiB (a Put is refused anyway). */
export const WORKER_CAPS: FrameCaps = {
  ...DEFAULT_CAPS,
  control: 64 * 1024,
  get: 64 * 1024,
  getRange: 64 * 1024,
  put: 64 * 1024,
  delete: 64 * 1024
}

export const u32be = (b: Uint8Array, o: number): number => ((b[o]! << 24) >>> 0) + ((b[o + 1]! << 16) | (b[o + 2]! << 8) | b[o + 3]!)

/** `bodyLength` of a header that is not this protocol's (bad magic or version, unknown type). */
export const NOT_A_FRAME = -1
/** `bodyLength` of a well-formed header whose body is over its type's cap. */
export const OVER_CAP = -2

/** Length of the body announced by the header at `b[p, p+16)`, or a negative code for a header that ends the connection. */
export const bodyLength = (b: Uint8Array, p: number): number => {
  if (((b[p]! << 8) | b[p + 1]!) !== MAGIC || b[p + 2] !== PROTOCOL_VERSION) return NOT_A_FRAME
  const type = b[p + 3]!
  if (!isMsgType(type)) return NOT_A_FRAME
  const length = u32be(b, p + 12)
  return length > capFor(WORKER_CAPS, type) ? OVER_CAP : length
}

/** The error frame for the OVER_CAP header at `b[p, p+16)`. */
export const overCapNotice = (b: Uint8Array, p: number): Uint8Array => {
  const type = b[p + 3]! as MsgType
  const length = u32be(b, p + 12)
  const cap = capFor(WORKER_CAPS, type)
  return encodeErrorFrame(
    type,
    u32be(b, p + 8),
    `${msgTypeName(type)} body of ${length} bytes is over the worker's cap of ${cap} bytes; closing the connection`
  )
}

/** Every success header is written here just before its writer call (writers copy what they keep). */
export const HEADER = Buffer.alloc(HEADER_LEN)
HEADER[0] = MAGIC >>> 8
HEADER[1] = MAGIC & 0xff
HEADER[2] = PROTOCOL_VERSION

export const replyHeader = (type: number, requestId: number, length: number): void => {
  const h = HEADER
  h[3] = type
  h[8] = requestId >>> 24
  h[9] = (requestId >>> 16) & 0xff
  h[10] = (requestId >>> 8) & 0xff
  h[11] = requestId & 0xff
  h[12] = length >>> 24
  h[13] = (length >>> 16) & 0xff
  h[14] = (length >>> 8) & 0xff
  h[15] = length & 0xff
}

