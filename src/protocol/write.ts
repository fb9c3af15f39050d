/**
 * Talon's write-through bodies (`PutRequest`, `DeleteRequest` in talon-transport), bincode:
 *
 *   PutRequest    = ObjectId, body_len: u64
 *   DeleteRequest = ObjectId
 *
 * A Put frame's length covers only this small header: exactly `body_len` raw object bytes
 * follow the frame on the stream, outside any frame, so a worker can pass them on without
 * framing them. Both are answered with a GetRange frame: a Put's body is the committed version
 * (the origin's ETag, UTF-8), a Delete's is empty; an ERROR-flagged frame carries the error.
 */
import type { Either } from "effect"
import type { ObjectId } from "../core/ids.js"
import { BincodeWriter, decodeWith } from "./bincode.js"
import { readObjectId, writeObjectId } from "./codecs.js"
import type { DecodeError } from "./errors.js"
import { HEADER_LEN, MsgType, writeHeader } from "./frame.js"

export interface PutRequest {
  readonly object: ObjectId
  /** Raw object bytes that follow the frame. */
  readonly bodyLen: number
}

export interface DeleteRequest {
  readonly object: ObjectId
}

const hint = (o: ObjectId): number => HEADER_LEN + 48 + (o.bucket.length + o.objectPath.length) * 3

export const encodePutRequest = (r: PutRequest): Uint8Array => {
  const w = new BincodeWriter(hint(r.object))
  writeObjectId(w, r.object)
  w.u64(r.bodyLen)
  return w.finish()
}

export const decodePutRequest = (bytes: Uint8Array): Either.Either<PutRequest, DecodeError> =>
  decodeWith(bytes, "put request", (rd) => {
    const object = readObjectId(rd)
    const bodyLen = rd.u64()
    return { object, bodyLen }
  })

export const encodeDeleteRequest = (r: DeleteRequest): Uint8Array => {
  const w = new BincodeWriter(hint(r.object))
  writeObjectId(w, r.object)
  return w.finish()
}

export const decodeDeleteRequest = (bytes: Uint8Array): Either.Either<DeleteRequest, DecodeError> =>
  decodeWith(bytes, "delete request", (rd) => ({ object: readObjectId(rd) }))

/** The Put frame (header and PutRequest); the caller writes the `bodyLen` raw bytes after it. */
export const encodePutFrame = (requestId: number, r: PutRequest): Buffer => {
  const w = new BincodeWriter(hint(r.object), HEADER_LEN)
  writeObjectId(w, r.object)
  w.u64(r.bodyLen)
  const buf = w.finish()
  writeHeader(buf, 0, { type: MsgType.Put, flags: 0, requestId, length: buf.length - HEADER_LEN })
  return buf
}

export const encodeDeleteFrame = (requestId: number, r: DeleteRequest): Buffer => {
  const w = new BincodeWriter(hint(r.object), HEADER_LEN)
  writeObjectId(w, r.object)
  const buf = w.finish()
  writeHeader(buf, 0, { type: MsgType.Delete, flags: 0, requestId, length: buf.length - HEADER_LEN })
  return buf
}
