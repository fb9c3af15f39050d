/**
 * The 16-byte big-endian frame header shared by the control and data planes
 * (Talon's wire protocol v1), plus per-type payload caps.
 */
import { BadMagic, BadVersion, Truncated, UnknownType, type FrameError } from "./errors.js"

export const MAGIC = 0x544c
export const PROTOCOL_VERSION = 1
export const HEADER_LEN = 16
/** Talon's transport-wide maximum payload (a 256 MiB block plus slack). */
export const MAX_PAYLOAD_LEN = 320 * 1024 * 1024

/**
 * Talon's message types (0–9) and this project's extensions (10–11). 6–11 carry a versioned or
 * tenant-scoped range request whose reply is an ordinary GetRange frame; a distinct type (rather
 * than a longer GetRange body or a flag) makes an older peer reject the request instead of
 * misreading it. Talon's decoder refuses any type above 9, so a Talon worker can never take a
 * pinned read (10, 11) for a cache-only probe (6, 9) or for a read of whatever version it holds.
 */
export const MsgType = {
  Control: 0,
  Get: 1,
  GetRange: 2,
  Put: 3,
  Ping: 4,
  Delete: 5,
  /**
   * Resident bytes of the exact version named (bincode CachedRangeRequest), else a typed
   * CacheMiss: never an origin request (Talon's cache-only probe).
   */
  GetCachedRange: 6,
  /** One whole versioned block admitted into a worker's cache without the origin (bincode CachedBlockPutRequest, raw block after the frame). */
  AdmitCachedBlock: 7,
  /** A GetRange attributed to a tenant (bincode TenantScopedRange). */
  GetRangeTenant: 8,
  /** A GetCachedRange attributed to a tenant (bincode TenantScopedCachedRange). */
  GetCachedRangeTenant: 9,
  /**
   * Not Talon's: exactly `len` bytes of the version named (bincode CachedRangeRequest), from
   * resident blocks or filled from the origin under If-Match, else a typed VersionMismatch. The
   * one-version read of TalonClient, the gateway and the mount.
   */
  GetPinnedRange: 10,
  /** Not Talon's: a GetPinnedRange attributed to a tenant (bincode TenantScopedCachedRange). */
  GetPinnedRangeTenant: 11
} as const
export type MsgType = (typeof MsgType)[keyof typeof MsgType]

export const Flags = { EndOfStream: 1, Error: 2 } as const

export interface FrameHeader {
  readonly type: MsgType
  readonly flags: number
  readonly requestId: number
  /** Payload bytes following the header; zero is legal and is not end-of-stream. */
  readonly length: number
}

export const isMsgType = (n: number): n is MsgType => n >= 0 && n <= 11 && (n | 0) === n
export const msgTypeName = (t: number): string =>
  ["Control", "Get", "GetRange", "Put", "Ping", "Delete", "GetCachedRange", "AdmitCachedBlock", "GetRangeTenant", "GetCachedRangeTenant", "GetPinnedRange", "GetPinnedRangeTenant"][
    t
  ] ?? `Unknown(${t})`
export const hasFlag = (h: FrameHeader, flag: number): boolean => (h.flags & flag) === flag

/** Writes a header at `offset`; no allocation. Reserved bytes are zeroed. */
export const writeHeader = (buf: Uint8Array, offset: number, h: FrameHeader): void => {
  buf[offset] = 0x54
  buf[offset + 1] = 0x4c
  buf[offset + 2] = PROTOCOL_VERSION
  buf[offset + 3] = h.type
  buf[offset + 4] = (h.flags >>> 8) & 0xff
  buf[offset + 5] = h.flags & 0xff
  buf[offset + 6] = 0
  buf[offset + 7] = 0
  const r = h.requestId >>> 0
  buf[offset + 8] = r >>> 24
  buf[offset + 9] = (r >>> 16) & 0xff
  buf[offset + 10] = (r >>> 8) & 0xff
  buf[offset + 11] = r & 0xff
  const l = h.length >>> 0
  buf[offset + 12] = l >>> 24
  buf[offset + 13] = (l >>> 16) & 0xff
  buf[offset + 14] = (l >>> 8) & 0xff
  buf[offset + 15] = l & 0xff
}

export const encodeHeader = (h: FrameHeader): Buffer => {
  const buf = Buffer.allocUnsafe(HEADER_LEN)
  writeHeader(buf, 0, h)
  return buf
}

const u32be = (b: Uint8Array, o: number): number =>
  ((b[o]! << 24) >>> 0) + ((b[o + 1]! << 16) | (b[o + 2]! << 8) | b[o + 3]!)

/**
 * Reads and validates the header at `offset` (magic, version, type). The
 * reserved field is ignored, as the spec requires of receivers.
 */
export const readHeader = (buf: Uint8Array, offset = 0): FrameHeader | FrameError => {
  const have = buf.length - offset
  if (have < HEADER_LEN) return new Truncated({ needed: HEADER_LEN, have: Math.max(0, have) })
  const magic = (buf[offset]! << 8) | buf[offset + 1]!
  if (magic !== MAGIC) return new BadMagic({ got: magic })
  const version = buf[offset + 2]!
  if (version !== PROTOCOL_VERSION) return new BadVersion({ got: version })
  const type = buf[offset + 3]!
  if (!isMsgType(type)) return new UnknownType({ type })
  return {
    type,
    flags: (buf[offset + 4]! << 8) | buf[offset + 5]!,
    requestId: u32be(buf, offset + 8),
    length: u32be(buf, offset + 12)
  }
}

/** Header followed by `payload`, in one buffer. */
export const encodeFrame = (type: MsgType, requestId: number, payload: Uint8Array, flags = 0): Buffer => {
  const buf = Buffer.allocUnsafe(HEADER_LEN + payload.length)
  writeHeader(buf, 0, { type, flags, requestId, length: payload.length })
  buf.set(payload, HEADER_LEN)
  return buf
}

/** A reply with the ERROR flag set whose body is a UTF-8 message. */
export const encodeErrorFrame = (type: MsgType, requestId: number, message: string): Buffer => {
  const len = Buffer.byteLength(message, "utf8")
  const buf = Buffer.allocUnsafe(HEADER_LEN + len)
  writeHeader(buf, 0, { type, flags: Flags.Error, requestId, length: len })
  buf.write(message, HEADER_LEN, len, "utf8")
  return buf
}

/** Largest payload accepted per message type, checked from the header before any body is buffered. */
export interface FrameCaps {
  readonly control: number
  readonly get: number
  readonly getRange: number
  readonly put: number
  readonly ping: number
  readonly delete: number
}

/**
 * Caps for a server reading requests: control, request bodies and pings are
 * small; a Put carries object bytes. Control follows Talon's 1 MiB so large
 * `ObjectList`/`MembershipList` replies from a Talon coordinator still fit.
 */
export const DEFAULT_CAPS: FrameCaps = {
  control: 1024 * 1024,
  get: 64 * 1024,
  getRange: 64 * 1024,
  put: MAX_PAYLOAD_LEN,
  ping: 4 * 1024,
  delete: 64 * 1024
}

/** Caps for a client reading replies: Get/GetRange responses carry block data. */
export const RESPONSE_CAPS: FrameCaps = {
  ...DEFAULT_CAPS,
  get: MAX_PAYLOAD_LEN,
  getRange: MAX_PAYLOAD_LEN
}

export const capFor = (caps: FrameCaps, type: MsgType): number => {
  switch (type) {
    case MsgType.Control:
      return caps.control
    case MsgType.Get:
      return caps.get
    case MsgType.GetRange:
    case MsgType.GetCachedRange:
    case MsgType.GetRangeTenant:
    case MsgType.GetCachedRangeTenant:
    case MsgType.GetPinnedRange:
    case MsgType.GetPinnedRangeTenant:
      // Range requests of every kind: small bodies; their replies are GetRange frames.
      return caps.getRange
    case MsgType.Put:
    case MsgType.AdmitCachedBlock:
      return caps.put
    case MsgType.Ping:
      return caps.ping
    case MsgType.Delete:
      return caps.delete
    default:
      return 0
  }
}
