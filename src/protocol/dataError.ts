/**
 * Talon's typed data-plane errors. The reply is still an ERROR-flagged GetRange frame; its
 * body is `"TLE1"` followed by bincode `{ code: DataErrorCode (u32 variant), message: String }`.
 * A body without that prefix is a legacy UTF-8 message (code Unknown), so old and new peers
 * understand each other in both directions. Clients branch on the code, never on the text.
 */
import { BincodeReader, BincodeWriter } from "./bincode.js"
import { Flags, HEADER_LEN, MsgType, writeHeader } from "./frame.js"

/** Talon's `DataErrorCode`, in declaration order (the bincode variant index). */
export const DataErrorCode = {
  Unknown: 0,
  InvalidRequest: 1,
  NotFound: 2,
  CacheMiss: 3,
  Unavailable: 4,
  Timeout: 5,
  /** The object at the origin is not the version the request named. */
  VersionMismatch: 6,
  Origin: 7,
  Internal: 8,
  RateLimited: 9
} as const
export type DataErrorCode = (typeof DataErrorCode)[keyof typeof DataErrorCode]

const CODE_NAMES = ["Unknown", "InvalidRequest", "NotFound", "CacheMiss", "Unavailable", "Timeout", "VersionMismatch", "Origin", "Internal", "RateLimited"]
export const dataErrorCodeName = (c: number): string => CODE_NAMES[c] ?? `Unknown(${c})`

export interface DataPlaneError {
  readonly code: DataErrorCode
  readonly message: string
}

export const ERROR_ENVELOPE_MAGIC = Buffer.from("TLE1", "latin1")

export const encodeTypedErrorPayload = (code: DataErrorCode, message: string): Buffer => {
  const w = new BincodeWriter(ERROR_ENVELOPE_MAGIC.length + 16 + message.length * 3, ERROR_ENVELOPE_MAGIC.length)
  w.u32(code).string(message)
  const body = w.finish()
  ERROR_ENVELOPE_MAGIC.copy(body, 0)
  return body
}

/** An ERROR-flagged GetRange frame with a typed body (what Talon's worker sends for every range error). */
export const encodeTypedErrorFrame = (requestId: number, code: DataErrorCode, message: string): Buffer => {
  const body = encodeTypedErrorPayload(code, message)
  const buf = Buffer.allocUnsafe(HEADER_LEN + body.length)
  writeHeader(buf, 0, { type: MsgType.GetRange, flags: Flags.Error, requestId, length: body.length })
  body.copy(buf, HEADER_LEN)
  return buf
}

const hasMagic = (b: Uint8Array): boolean =>
  b.length >= 4 && b[0] === 0x54 && b[1] === 0x4c && b[2] === 0x45 && b[3] === 0x31

/**
 * The error an ERROR frame's body carries. Never throws: a legacy body is its text with code
 * Unknown, a malformed envelope is code Internal naming what was wrong (as Talon decodes it).
 */
export const decodeErrorPayload = (body: Uint8Array): DataPlaneError => {
  if (!hasMagic(body)) return { code: DataErrorCode.Unknown, message: Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8") }
  try {
    const r = new BincodeReader(body, 4)
    const code = r.u32()
    if (code > DataErrorCode.RateLimited) r.fail(`unknown error code ${code}`)
    const message = r.string()
    // Talon's envelope decoder accepts trailing bytes; so does this one.
    return { code: code as DataErrorCode, message }
  } catch (e) {
    const reason = typeof e === "object" && e !== null && "reason" in e ? String((e as { reason: unknown }).reason) : String(e)
    return { code: DataErrorCode.Internal, message: `malformed typed worker error: ${reason}` }
  }
}

/**
 * The retry hint of a `RateLimited` error. Talon carries it only in the message ("…; retry after
 * N ms"), so this is the one place that reads it; undefined when the message has none.
 */
export const retryAfterMs = (message: string): number | undefined => {
  const m = /retry after (\d+) ms/.exec(message)
  return m === null ? undefined : Number(m[1])
}
