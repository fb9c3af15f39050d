/**
 * A large object that costs almost nothing to write: a sparse file whose only written bytes
 * are a few regions of `sampleBytes` (the holes read as zeros). The bounded-memory tests
 * stream it whole and check every region a chunk overlaps.
 */
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { sampleBytes } from "../../src/origin/seed.js"

export const sparseObject = (size: number, regions: ReadonlyArray<number>, regionLen: number) => ({
  size,
  /** Writes the object at `file`, creating its directory. */
  write: async (file: string): Promise<void> => {
    await fs.mkdir(path.dirname(file), { recursive: true })
    const h = await fs.open(file, "w")
    try {
      await h.truncate(size)
      for (const off of regions) await h.write(sampleBytes(off, regionLen), 0, regionLen, off)
    } finally {
      await h.close()
    }
  },
  /** Whether `chunk`, the object's bytes from offset `at`, agrees with every region it overlaps. */
  matches: (chunk: Buffer, at: number): boolean => {
    for (const off of regions) {
      const from = Math.max(off, at)
      const to = Math.min(off + regionLen, at + chunk.length)
      if (from < to && !chunk.subarray(from - at, to - at).equals(sampleBytes(from, to - from))) return false
    }
    return true
  }
})
