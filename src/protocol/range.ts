/** The data-plane `RangeRequest` body of a GetRange frame (bincode, no envelope). */
import type { Either } from "effect"
import type { ObjectId } from "../core/ids.js"
import { BincodeWriter, decodeWith } from "./bincode.js"
import { readObjectId, writeObjectId } from "./codecs.js"
import type { DecodeError } from "./errors.js"
import { HEADER_LEN, MsgType, writeHeader } from "./frame.js"

export interface RangeRequest {
  readonly object: ObjectId
  /** Absolute offset within the object. */
  readonly offset: number
  readonly len: number
}

const write = (w: BincodeWriter, r: RangeRequest): void => {
  writeObjectId(w, r.object)
  w.u64(r.offset).u64(r.len)
}

export const encodeRangeRequest = (r: RangeRequest): Uint8Array => {
  const w = new BincodeWriter(64 + r.object.bucket.length + r.object.objectPath.length * 3)
  write(w, r)
  return w.finish()
}

export const decodeRangeRequest = (bytes: Uint8Array): Either.Either<RangeRequest, DecodeError> =>
  decodeWith(bytes, "range request", (rd) => {
    const object = readObjectId(rd)
    const offset = rd.u64()
    const len = rd.u64()
    return { object, offset, len }
  })

/** A complete GetRange request frame in one buffer. */
export const encodeGetRangeFrame = (requestId: number, r: RangeRequest): Buffer => {
  const w = new BincodeWriter(HEADER_LEN + 64 + r.object.bucket.length + r.object.objectPath.length * 3, HEADER_LEN)
  write(w, r)
  const buf = w.finish()
  writeHeader(buf, 0, { type: MsgType.GetRange, flags: 0, requestId, length: buf.length - HEADER_LEN })
  return buf
}
