import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { blockIndex, blockLength, blockStart, pageCount, pageSpan, planRead } from "../../src/core/index.js"

const MiB = 1024 * 1024

describe("block geometry", () => {
  it("computes index, start and page count like Talon", () => {
    const bs = 256 * MiB
    expect(blockIndex(bs * 3, bs)).toBe(3)
    expect(blockIndex(bs * 3 - 1, bs)).toBe(2)
    expect(blockStart(bs * 3 + 5, bs)).toBe(bs * 3)
    expect(blockIndex(10, 0)).toBe(0)
    expect(pageCount(bs, 256 * 1024)).toBe(1024)
    expect(pageCount(bs, 4 * MiB)).toBe(64)
    expect(pageCount(bs, 0)).toBe(0)
    expect(pageCount(10, 3)).toBe(4)
  })

  it("last block is short", () => {
    expect(blockLength(0, 100, 250)).toBe(100)
    expect(blockLength(200, 100, 250)).toBe(50)
    expect(blockLength(300, 100, 250)).toBe(0)
  })

  it("pageSpan covers the byte range", () => {
    expect(pageSpan(0, 1, MiB)).toEqual([0, 1])
    expect(pageSpan(MiB - 1, 2, MiB)).toEqual([0, 2])
    expect(pageSpan(MiB, MiB, MiB)).toEqual([1, 2])
    expect(pageSpan(5, 0, MiB)).toEqual([0, 0])
  })
})

describe("planRead", () => {
  it("splits across blocks and clamps at the object end", () => {
    expect(planRead(90, 30, 250, 100)).toEqual([
      { blockOffset: 0, offsetInBlock: 90, length: 10, objectOffset: 90 },
      { blockOffset: 100, offsetInBlock: 0, length: 20, objectOffset: 100 }
    ])
    expect(planRead(240, 1000, 250, 100)).toEqual([{ blockOffset: 200, offsetInBlock: 40, length: 10, objectOffset: 240 }])
    expect(planRead(250, 10, 250, 100)).toEqual([])
    expect(planRead(0, 0, 250, 100)).toEqual([])
  })

  it("segments are contiguous, each within one block, and sum to the clamped length (property)", () => {
    fc.assert(
      fc.property(
        // length is bounded to a few blocks so a block size of 1 does not plan millions of segments
        fc.integer({ min: 1, max: 1 << 20 }),
        fc.integer({ min: 0, max: 1 << 24 }),
        fc.integer({ min: 0, max: 1 << 24 }),
        fc.integer({ min: 0, max: 8 << 20 }),
        (blockSize, objectSize, offset, lengthSeed) => {
          const length = lengthSeed % (blockSize * 6 + 1)
          const segs = planRead(offset, length, objectSize, blockSize)
          const expected = Math.max(0, Math.min(offset + length, objectSize) - offset)
          expect(segs.reduce((n, s) => n + s.length, 0)).toBe(expected)
          let pos = offset
          for (const s of segs) {
            expect(s.objectOffset).toBe(pos)
            expect(s.length).toBeGreaterThan(0)
            expect(s.blockOffset % blockSize).toBe(0)
            expect(s.blockOffset + s.offsetInBlock).toBe(s.objectOffset)
            expect(s.offsetInBlock + s.length).toBeLessThanOrEqual(blockSize)
            expect(s.offsetInBlock + s.length).toBeLessThanOrEqual(blockLength(s.blockOffset, blockSize, objectSize))
            pos += s.length
          }
        }
      ),
      { numRuns: 500 }
    )
  })

  it("handles offsets beyond 2^32", () => {
    const bs = 256 * MiB
    const segs = planRead(5_000_000_000, bs, 6_000_000_000, bs)
    expect(segs.length).toBe(2)
    expect(segs[0]!.blockOffset).toBe(Math.floor(5_000_000_000 / bs) * bs)
    expect(segs[0]!.length + segs[1]!.length).toBe(bs)
  })
})
