/**
 * A read planned into requests: one per block segment, split further so that no
 * request asks for more than `maxRequestBytes` (the reply cap), each knowing where
 * its bytes land in the caller's result.
 */
import type { BlockId } from "../core/ids.js"
import { planRead } from "../core/geometry.js"
import type { ObjectInfo } from "./StatCache.js"

export interface ReadRequestPiece {
  readonly block: BlockId
  /** Absolute offset within the object. */
  readonly offset: number
  readonly length: number
  /** Where these bytes land in the caller's result. */
  readonly resultOffset: number
}

export const planPieces = (
  info: ObjectInfo,
  offset: number,
  length: number,
  blockSize: number,
  maxRequestBytes: number
): Array<ReadRequestPiece> => {
  const pieces: Array<ReadRequestPiece> = []
  for (const segment of planRead(offset, length, info.size, blockSize)) {
    const block: BlockId = { object: info.object, offset: segment.blockOffset, blockSize, version: info.version }
    for (let done = 0; done < segment.length; done += maxRequestBytes) {
      pieces.push({
        block,
        offset: segment.objectOffset + done,
        length: Math.min(maxRequestBytes, segment.length - done),
        resultOffset: segment.objectOffset + done - offset
      })
    }
  }
  return pieces
}
