/**
 * Read buffers for data-plane sockets, recycled instead of left to the GC.
 *
 * A socket read lands in a slab (`net` `onread` with a buffer function); reply payloads
 * are views into slabs, handed to the caller without a copy. Each view holds a
 * reference on its slab, and so does the socket while it is still reading into it.
 * Once every reference is released the slab goes back to the free list and is read
 * into again. Without this, every relayed byte arrives in a fresh ArrayBuffer that V8
 * frees only after a collection finds its wrapper dead, so a busy relay either piles
 * up tens of MiB of dead buffers or pays for forced major GCs.
 *
 * Releasing too early would let new socket bytes overwrite bytes a consumer still
 * reads, so consumers release only when they are done (e.g. a socket write's callback
 * fired without error) and otherwise simply drop their views: an unreleased slab is
 * never reused, it becomes ordinary garbage.
 */

/** The data-plane read buffer size: one socket read lands in at most this much. */
export const SLAB_BYTES = 256 * 1024

export class Slab {
  /** Views handed out, plus one while a socket reads into it. */
  refs = 0
  /** Bytes of it now belong to a caller for good (`Payload.disown`): never read into again once let go. */
  disowned = false
  constructor(
    readonly pool: SlabPool,
    readonly buf: Buffer
  ) {}
}

export class SlabPool {
  private readonly free: Array<Slab> = []
  /** Slabs ever allocated (for tests and diagnostics). */
  allocated = 0
  /** Slabs with a reference outstanding: a socket reading into them or a payload not yet released (for tests and diagnostics). */
  held = 0

  constructor(
    readonly slabBytes: number,
    /** Free slabs kept for reuse; beyond this, released slabs are left to the GC. */
    readonly maxFree: number
  ) {}

  /** A slab with one reference (the caller's). */
  take(): Slab {
    const slab = this.free.pop() ?? this.fresh()
    slab.refs = 1
    this.held++
    return slab
  }

  retain(slab: Slab): void {
    slab.refs++
  }

  release(slab: Slab): void {
    if (--slab.refs !== 0) return
    this.held--
    if (!slab.disowned && this.free.length < this.maxFree) this.free.push(slab)
  }

  get freeCount(): number {
    return this.free.length
  }

  private fresh(): Slab {
    this.allocated++
    return new Slab(this, Buffer.allocUnsafeSlow(this.slabBytes))
  }
}

const EMPTY: ReadonlyArray<Uint8Array> = []

/**
 * The bytes of one reply: views into slabs, in order. `release` once they have been
 * consumed (idempotent); dropping a payload without releasing it is always safe.
 */
export class Payload {
  private slabs: Array<Slab> | undefined

  constructor(
    readonly views: ReadonlyArray<Uint8Array>,
    slabs: Array<Slab> | undefined,
    readonly length: number
  ) {
    this.slabs = slabs
  }

  static readonly empty = new Payload(EMPTY, undefined, 0)

  /** Wraps bytes the pool does not own (tests, the origin fallback). */
  static of(bytes: Uint8Array): Payload {
    return new Payload([bytes], undefined, bytes.length)
  }

  /** One payload of several, in order; the parts' buffers now belong to it. */
  static concat(parts: ReadonlyArray<Payload>): Payload {
    if (parts.length === 1) return parts[0]!
    const views: Array<Uint8Array> = []
    const slabs: Array<Slab> = []
    let length = 0
    for (const p of parts) {
      views.push(...p.views)
      if (p.slabs !== undefined) slabs.push(...p.slabs)
      p.slabs = undefined
      length += p.length
    }
    return new Payload(views, slabs, length)
  }

  /**
   * Bytes `[from, to)` as a payload of their own: views of the same buffers, each holding
   * its own reference, so it outlives this payload's release. Bytes whose buffers cannot be
   * told apart (a concat of pooled and unpooled parts) are copied instead.
   */
  slice(from: number, to: number): Payload {
    const slabs = this.slabs
    const aligned = slabs === undefined || slabs.length === this.views.length
    const views: Array<Uint8Array> = []
    const held: Array<Slab> = []
    let at = 0
    for (let i = 0; i < this.views.length && at < to; i++) {
      const v = this.views[i]!
      const a = Math.max(from, at)
      const b = Math.min(to, at + v.length)
      if (a < b) {
        views.push(v.subarray(a - at, b - at))
        if (slabs !== undefined && aligned) held.push(slabs[i]!)
      }
      at += v.length
    }
    const length = views.reduce((n, v) => n + v.length, 0)
    if (!aligned) return Payload.of(Buffer.concat(views, length))
    for (const s of held) s.pool.retain(s)
    return new Payload(views, slabs === undefined ? undefined : held, length)
  }

  release(): void {
    const slabs = this.slabs
    if (slabs === undefined) return
    this.slabs = undefined
    for (const s of slabs) s.pool.release(s)
  }

  /**
   * The views themselves, now the caller's to keep: their slabs are never recycled (the socket
   * may still fill the rest of one, never the bytes handed out) and become garbage once no view
   * is left. No copy: for a consumer that may hold the bytes indefinitely (a stream's chunks).
   */
  disown(): ReadonlyArray<Uint8Array> {
    const slabs = this.slabs
    if (slabs !== undefined) {
      this.slabs = undefined
      for (const s of slabs) {
        s.disowned = true
        s.pool.release(s)
      }
    }
    return this.views
  }

  /**
   * One contiguous copy the caller owns, and the views released. A single view is still
   * copied: its slab is about to be reused.
   */
  copyOut(): Buffer {
    const out = Buffer.allocUnsafe(this.length)
    let at = 0
    for (const v of this.views) {
      out.set(v, at)
      at += v.length
    }
    this.release()
    return out
  }
}
