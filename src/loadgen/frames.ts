/**
 * Pre-encoded request frames for the hot loop: encoded once per run, then only
 * the request id (header bytes 8–11) and the offset (the body's second-last
 * u64, little-endian) are patched in place per request.
 */
import type { ObjectId } from "../core/ids.js"
import type { FrameTemplate } from "./engine.js"

const HEADER_LEN = 16
const GET_RANGE = 2

// TEMPORARY until src/protocol lands: RangeRequest bincode, see DESIGN.md "Wire protocol v1".
const encodeGetRange = (object: ObjectId, range: number): Buffer => {
  const bucket = Buffer.from(object.bucket, "utf8")
  const path = Buffer.from(object.objectPath, "utf8")
  const body = 4 + 8 + bucket.length + 8 + path.length + 8 + 8
  const b = Buffer.alloc(HEADER_LEN + body)
  b.writeUInt16BE(0x544c, 0)
  b[2] = 1
  b[3] = GET_RANGE
  b.writeUInt32BE(body, 12)
  let p = HEADER_LEN
  b.writeUInt32LE(object.backend, p)
  p += 4
  b.writeBigUInt64LE(BigInt(bucket.length), p)
  p += 8
  bucket.copy(b, p)
  p += bucket.length
  b.writeBigUInt64LE(BigInt(path.length), p)
  p += 8
  path.copy(b, p)
  p += path.length
  b.writeBigUInt64LE(0n, p)
  b.writeBigUInt64LE(BigInt(range), p + 8)
  return b
}

/** A GetRange frame for `object` with request id 0 and offset 0, reading `range` bytes. */
export const getRangeTemplate = (object: ObjectId, range: number): FrameTemplate => {
  const bytes = encodeGetRange(object, range)
  return { bytes: new Uint8Array(bytes), offsetPos: bytes.length - 16 }
}
