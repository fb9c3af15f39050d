/**
 * Which reads of an object continue a sequential run. A small bounded table of
 * cursors per object version: a read that starts near where a cursor's run ended
 * continues it, any other read starts a cursor of its own (replacing the object's
 * least recently used one). Several cursors per object let interleaved sequential
 * readers (parallel ranged GETs of one object, two loaders over one file) each be
 * recognised, while a random reader never builds a run and so never reads ahead.
 *
 * Plain synchronous code: it runs on every `read`/`readRaw`.
 */

export interface Cursor {
  /** Where the run has read up to (the largest end seen). */
  end: number
  /** Consecutive reads that continued this run (0 for the read that started it). */
  streak: number
}

export interface SequentialLimits {
  /** Objects tracked at most; the least recently read one is forgotten first. */
  readonly objects: number
  /** Cursors per object at most. */
  readonly cursorsPerObject: number
}

export const DEFAULT_SEQUENTIAL_LIMITS: SequentialLimits = { objects: 256, cursorsPerObject: 8 }

/**
 * How far from a run's end a read may start and still continue it: one read's length
 * either way, so a reader with a few requests in flight (the kernel's async reads, a
 * relay's window) delivering them slightly out of order still reads as sequential,
 * while a random read lands that close to a run's end rarely.
 */
export const slackFor = (length: number): number => length

export class SequentialTable {
  private readonly objects = new Map<string, Array<Cursor>>()

  constructor(private readonly limits: SequentialLimits = DEFAULT_SEQUENTIAL_LIMITS) {}

  /** Records a read of `[offset, offset+length)` of `key` and returns the cursor it belongs to. */
  observe(key: string, offset: number, length: number): Cursor {
    let cursors = this.objects.get(key)
    if (cursors === undefined) {
      if (this.objects.size >= this.limits.objects) {
        const oldest = this.objects.keys().next()
        if (!oldest.done) this.objects.delete(oldest.value)
      }
      cursors = []
    } else this.objects.delete(key)
    // Re-inserted: Map order is recency order.
    this.objects.set(key, cursors)

    const end = offset + length
    const slack = slackFor(length)
    for (let i = 0; i < cursors.length; i++) {
      const c = cursors[i]!
      if (offset >= c.end - slack && offset <= c.end + slack) {
        // Only a read past the run's end continues it: reading the same bytes again is not sequential.
        if (end <= c.end) return c
        c.streak++
        c.end = end
        if (i !== cursors.length - 1) {
          cursors.splice(i, 1)
          cursors.push(c)
        }
        return c
      }
    }
    const fresh: Cursor = { end, streak: 0 }
    if (cursors.length >= this.limits.cursorsPerObject) cursors.shift()
    cursors.push(fresh)
    return fresh
  }

  /** Forgets every cursor of `key` (its version is gone). */
  forget(key: string): void {
    this.objects.delete(key)
  }

  get size(): number {
    return this.objects.size
  }
}
