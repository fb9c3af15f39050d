/**
 * Reusable staging buffers for fills: a unit's bytes are gathered in one buffer and written
 * with one positioned write, instead of a write per network chunk. Buffers are large (a page),
 * so they live outside V8's heap; reusing them keeps a cold read from allocating (and the GC
 * from finalising) one per page.
 *
 * While fills stream, every buffer given back is kept, up to `busyKeep`: a cold read holds one
 * buffer per fetch receiving plus the pages being written, and a pool smaller than that peak
 * frees and allocates again all the time (fresh memory the kernel must fault in and zero, and
 * off-heap churn that makes V8 collect). Once no fill is in flight, `trim` lets all but `keep`
 * go, so an idle worker holds at most `keep × size` bytes.
 */
export class StagePool {
  readonly #free: Array<Uint8Array> = []

  constructor(
    /** Bytes per buffer: a page, or a segment of a whole-block unit. */
    readonly size: number,
    /** Idle buffers kept once fills are done. */
    readonly keep: number,
    /** Buffers kept while fills stream. */
    readonly busyKeep: number = keep
  ) {}

  take(): Uint8Array {
    return this.#free.pop() ?? Buffer.allocUnsafeSlow(this.size)
  }

  /** Returns a buffer no write is reading any more. */
  give(buffer: Uint8Array): void {
    if (buffer.length === this.size && this.#free.length < this.busyKeep) this.#free.push(buffer)
  }

  /** No fill is in flight: keeps `keep` idle buffers and lets the rest go. */
  trim(): void {
    if (this.#free.length > this.keep) this.#free.length = this.keep
  }

  /** Idle buffers held. */
  get idle(): number {
    return this.#free.length
  }
}

/** Staging size for units of `unitSize` bytes: the whole unit up to 4 MiB, else 4 MiB segments. */
export const stageSize = (unitSize: number): number => Math.max(1, Math.min(unitSize, 4 * 1024 * 1024))
