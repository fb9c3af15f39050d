/**
 * Talon's control `Load {object, offset, len}` on the data port: make a range of an object
 * resident at its current version, the way a read would fill it (the read path's geometry,
 * the miss path's single-flight fills and origin bound), without sending the bytes back.
 *
 * What is resident is skipped, so a repeated Load costs no origin bytes; the reply counts
 * what was fetched and what was already there (loadAck.ts). Loads beyond `limit` at once wait
 * their turn: a prewarm of a whole dataset may send many, and each holds fill work and disk.
 */
import { blockLength, pageSpan, planRead, type Segment } from "../../core/geometry.js"
import type { BlockId, ObjectId } from "../../core/ids.js"
import type { LoadCounts } from "../../protocol/loadAck.js"
import { ReadFailed } from "../errors.js"
import type { MissPathShape } from "../miss/MissPath.js"
import { objectKey } from "../miss/VersionCache.js"
import { blockKey } from "../store/layout.js"

/** What a Load needs of the read path: its geometry and what is resident. */
export interface LoadGeometry {
  readonly geometry: { readonly blockSize: number; readonly pageSize: number }
  readonly missingRuns: (key: string, first: number, end: number) => Array<[number, number]>
}

/** Loads one worker runs at once by default; later ones queue (each is bounded by the client's piece size). */
export const DEFAULT_LOAD_LIMIT = 8

export class Loads {
  #active = 0
  readonly #waiting: Array<() => void> = []

  constructor(
    private readonly reads: LoadGeometry,
    private readonly miss: MissPathShape,
    readonly limit: number = DEFAULT_LOAD_LIMIT
  ) {}

  /** Loads running now and waiting for a turn. */
  get pending(): number {
    return this.#active + this.#waiting.length
  }

  /** Fills `[offset, offset+len)` (clamped at the object's end). Rejects with ReadFailed. */
  async load(object: ObjectId, offset: number, len: number): Promise<LoadCounts> {
    await this.#turn()
    try {
      return await this.#load(object, objectKey(object), offset, len, true)
    } finally {
      this.#release()
    }
  }

  #turn(): Promise<void> {
    if (this.#active < this.limit) {
      this.#active++
      return Promise.resolve()
    }
    return new Promise((resolve) => this.#waiting.push(resolve))
  }

  #release(): void {
    const next = this.#waiting.shift()
    // The slot passes straight to the next Load, so #active stays as it is.
    if (next !== undefined) next()
    else this.#active--
  }

  async #load(object: ObjectId, okey: string, offset: number, len: number, retry: boolean): Promise<LoadCounts> {
    const st = await this.miss.stat(object, okey)
    if (offset > st.size) {
      throw new ReadFailed({ reason: `Load offset ${offset} is past the end of the object (${st.size} bytes); stat it again and load a range inside it` })
    }
    const { blockSize, pageSize } = this.reads.geometry
    const segs = planRead(offset, Math.min(len, st.size - offset), st.size, blockSize)
    let fetched = 0
    let resident = 0
    const fills: Array<Promise<void>> = []
    for (const seg of segs) {
      const id: BlockId = { object, offset: seg.blockOffset, blockSize, version: st.version }
      const [first, end] = pageSize > 0 ? pageSpan(seg.offsetInBlock, seg.length, pageSize) : [0, 1]
      const missing = missingBytes(this.reads.missingRuns(blockKey(id), first, end), seg, pageSize)
      fetched += missing
      resident += seg.length - missing
      if (missing > 0) fills.push(this.miss.fill(id, blockLength(seg.blockOffset, blockSize, st.size), st.size, first, end))
    }
    try {
      await Promise.all(fills)
    } catch (e) {
      // The version the stat named may be what went stale (the miss path dropped it): once more at the origin's.
      if (retry && e instanceof ReadFailed && e.staleVersion === true) return this.#load(object, okey, offset, len, false)
      throw e
    }
    return { fetched, resident }
  }
}

/** Bytes of the segment inside the missing units (every byte of it when a whole block is missing). */
const missingBytes = (runs: ReadonlyArray<readonly [number, number]>, seg: Segment, pageSize: number): number => {
  if (runs.length === 0) return 0
  if (pageSize <= 0) return seg.length
  const from = seg.offsetInBlock
  const to = from + seg.length
  let bytes = 0
  for (const [a, b] of runs) {
    const lo = Math.max(from, a * pageSize)
    const hi = Math.min(to, b * pageSize)
    if (hi > lo) bytes += hi - lo
  }
  return bytes
}
