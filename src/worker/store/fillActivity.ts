/**
 * How many origin fills are streaming into the store right now. Background work that reads
 * the disk (the scrub) waits for a quiet moment instead of taking the core and the disk from
 * a cold read: a fill is the one thing in a worker that runs at the speed of a single JS thread.
 */
export class FillActivity {
  #active = 0
  #waiters: Array<() => void> = []

  begin(): void {
    this.#active++
  }

  end(): void {
    if (this.#active === 0) return
    this.#active--
    if (this.#active > 0 || this.#waiters.length === 0) return
    const waiters = this.#waiters
    this.#waiters = []
    for (const wake of waiters) wake()
  }

  get busy(): boolean {
    return this.#active > 0
  }

  /** Resolves once no fill is in flight (at once when none is). */
  idle(): Promise<void> {
    if (this.#active === 0) return Promise.resolve()
    return new Promise((resolve) => this.#waiters.push(resolve))
  }
}
