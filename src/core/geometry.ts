/**
 * Block and page geometry. Offsets are JS numbers (exact up to 2^53), which
 * covers any object a backend can hold.
 */

/** Zero-based index of the block containing `offset` (0 when blockSize is 0, as in Talon). */
export const blockIndex = (offset: number, blockSize: number): number =>
  blockSize <= 0 ? 0 : Math.floor(offset / blockSize)

/** Block-aligned start of the block containing `offset`. */
export const blockStart = (offset: number, blockSize: number): number => blockIndex(offset, blockSize) * blockSize

/** Pages in a block: `ceil(blockSize / pageSize)`, 0 when pageSize is 0 (whole-block mode). */
export const pageCount = (blockSize: number, pageSize: number): number =>
  pageSize <= 0 ? 0 : Math.ceil(blockSize / pageSize)

/** Bytes actually held by the block starting at `blockOffset`: the last block of an object is short. */
export const blockLength = (blockOffset: number, blockSize: number, objectSize: number): number =>
  Math.max(0, Math.min(blockSize, objectSize - blockOffset))

/** One piece of a read that falls inside a single block. */
export interface Segment {
  /** Block start within the object (the BlockId offset). */
  readonly blockOffset: number
  readonly offsetInBlock: number
  readonly length: number
  /** Where this segment starts within the object. */
  readonly objectOffset: number
}

/**
 * Splits `[offset, offset+length)` into per-block segments, clamped at the
 * object's end. A read starting at or past the end, of zero length, or with a
 * non-positive block size plans to no segments.
 */
export const planRead = (
  offset: number,
  length: number,
  objectSize: number,
  blockSize: number
): ReadonlyArray<Segment> => {
  const end = Math.min(offset + length, objectSize)
  if (blockSize <= 0 || offset < 0 || length <= 0 || offset >= end) return []
  const segments: Array<Segment> = []
  let pos = offset
  while (pos < end) {
    const blockOffset = blockStart(pos, blockSize)
    const segEnd = Math.min(blockOffset + blockSize, end)
    segments.push({ blockOffset, offsetInBlock: pos - blockOffset, length: segEnd - pos, objectOffset: pos })
    pos = segEnd
  }
  return segments
}

/**
 * Pages `[first, end)` of a block that cover `[offsetInBlock, offsetInBlock+length)`.
 * Empty (`[x, x)`) for a zero length or a zero page size.
 */
export const pageSpan = (
  offsetInBlock: number,
  length: number,
  pageSize: number
): readonly [first: number, end: number] => {
  if (pageSize <= 0 || length <= 0) return [0, 0]
  return [Math.floor(offsetInBlock / pageSize), Math.ceil((offsetInBlock + length) / pageSize)]
}
