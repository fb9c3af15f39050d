/**
 * Reusable staging buffers for fills: a unit's bytes are gathered in one buffer and written
 * with one positioned write, instead of a write per network chunk. Buffers are large (a page),
 * so they live outside V8's heap; reusing them keeps a cold read from allocating (and the GC
 * from finalising) one per page. Only `keep` idle buffers are retained, so an idle worker holds
 * at most `keep × size` bytes.
 */
export class StagePool {
  readonly #free: Array<Uint8Array> = []

  constructor(
    /** Bytes per buffer: a page, or a segment of a whole-block unit. */
    readonly size: number,
    readonly keep: number
  ) {}

  take(): Uint8Array {
    return this.#free.pop() ?? Buffer.allocUnsafeSlow(this.size)
  }

  /** Returns a buffer no write is reading any more. */
  give(buffer: Uint8Array): void {
    if (buffer.length === this.size && this.#free.length < this.keep) this.#free.push(buffer)
  }
}

/** Staging size for units of `unitSize` bytes: the whole unit up to 4 MiB, else 4 MiB segments. */
export const stageSize = (unitSize: number): number => Math.max(1, Math.min(unitSize, 4 * 1024 * 1024))
