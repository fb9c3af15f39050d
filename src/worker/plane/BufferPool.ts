/**
 * Fixed-size buffers reused across responses on the portable plane. A buffer goes back to
 * the pool only after libuv reports its write done, so the pool never hands out memory the
 * kernel has not taken yet. When every pooled buffer is in flight a fresh one is allocated
 * (never a wait: a stalled connection must not starve the others); at most `keep` return.
 */
export class BufferPool {
  private readonly free: Array<Buffer> = []

  constructor(
    readonly bufferSize: number = 256 * 1024,
    readonly keep: number = 16
  ) {}

  acquire(): Buffer {
    return this.free.pop() ?? Buffer.allocUnsafeSlow(this.bufferSize)
  }

  release(buffer: Buffer): void {
    if (buffer.length === this.bufferSize && this.free.length < this.keep) this.free.push(buffer)
  }

  get pooled(): number {
    return this.free.length
  }
}
