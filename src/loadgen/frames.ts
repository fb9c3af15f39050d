/**
 * Pre-encoded request frames for the hot loop: encoded once per run by the
 * protocol codec, then only the request id (header bytes 8–11) and the offset
 * (the body's second-last u64, little-endian) are patched in place per request.
 */
import type { ObjectId } from "../core/ids.js"
import { encodeGetRangeFrame } from "../protocol/range.js"
import type { FrameTemplate } from "./threadMessages.js"

/** A GetRange frame for `object` with request id 0 and offset 0, reading `range` bytes. */
export const getRangeTemplate = (object: ObjectId, range: number): FrameTemplate => {
  const bytes = encodeGetRangeFrame(0, { object, offset: 0, len: range })
  // RangeRequest ends with `offset: u64, len: u64`.
  return { bytes: new Uint8Array(bytes), offsetPos: bytes.length - 16 }
}
