/**
 * Background integrity checks of the store, off the hit path (which stays a Map lookup and
 * a pin: hashing a page per hit would cost more than serving it, see BENCHMARKS.md):
 *
 * - every `sizeCheckMs`, a stat of each open unit's file: a truncated file is dropped
 *   within that interval, instead of failing every read past the cut (sendfile comes up
 *   short and the connection must close) until a restart;
 * - units found on disk at start-up are hashed first, as fast as the disk allows (a read
 *   hashes them on demand before that: DiskStore.ensureOpen);
 * - then, at `bytesPerSecond`, every resident unit is hashed again in turn, so a byte
 *   flipped on disk is dropped within one pass (resident bytes / rate, at least
 *   `minPassMs`) and never served after that.
 */
import type { DiskStore } from "./DiskStore.js"
import type { Unit } from "./entry.js"

export interface ScrubOptions {
  /** Bytes hashed per second by the periodic re-verify; 0 = only start-up verify and size checks. */
  readonly bytesPerSecond: number
  readonly sizeCheckMs?: number
  /** A pass over every resident unit takes at least this long (a small cache is not re-read in a tight loop). */
  readonly minPassMs?: number
}

const SCRATCH = 256 * 1024

export class Scrubber {
  readonly #store: DiskStore
  readonly #rate: number
  readonly #sizeCheckMs: number
  readonly #minPassMs: number
  readonly #scratch = new Uint8Array(SCRATCH)
  #stopped = false
  #timers = new Set<ReturnType<typeof setTimeout>>()
  #wake: (() => void) | undefined
  /** Settles when the verify loop has exited (after stop). */
  readonly done: Promise<void>
  /** Settles once every unit found on disk at start-up has been hashed (or stop was called). */
  readonly startup: Promise<void>
  #startupDone!: () => void

  constructor(store: DiskStore, options: ScrubOptions) {
    this.#store = store
    this.#rate = options.bytesPerSecond
    this.#sizeCheckMs = options.sizeCheckMs ?? 1000
    this.#minPassMs = options.minPassMs ?? 10_000
    this.startup = new Promise<void>((resolve) => (this.#startupDone = resolve))
    this.#scheduleSizeCheck()
    this.done = this.#run()
      .catch(() => {})
      .finally(() => this.#startupDone())
  }

  stop(): Promise<void> {
    this.#stopped = true
    for (const t of this.#timers) clearTimeout(t)
    this.#timers.clear()
    this.#wake?.()
    return this.done
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.#timers.delete(t)
        this.#wake = undefined
        resolve()
      }, ms)
      t.unref()
      this.#timers.add(t)
      this.#wake = () => {
        clearTimeout(t)
        this.#timers.delete(t)
        this.#wake = undefined
        resolve()
      }
    })
  }

  #scheduleSizeCheck(): void {
    if (this.#stopped) return
    const t = setTimeout(() => {
      this.#timers.delete(t)
      void this.#store
        .checkSizes()
        .catch(() => 0)
        .then(() => this.#scheduleSizeCheck())
    }, this.#sizeCheckMs)
    t.unref()
    this.#timers.add(t)
  }

  async #run(): Promise<void> {
    // Start-up: what was found on disk, before anything else.
    for (const u of this.#snapshot()) {
      if (this.#stopped) return
      if (!u.verified && !u.gone) await this.#store.verify(u, this.#scratch)
    }
    this.#startupDone()
    if (this.#rate <= 0) return
    while (!this.#stopped) {
      const passStart = performance.now()
      const units = this.#snapshot()
      for (const u of units) {
        if (this.#stopped) return
        if (u.gone) continue
        const started = performance.now()
        if (await this.#store.verify(u, this.#scratch)) this.#store.health.scrubbedBytes += u.bytes
        // Paced to the rate: this unit's share of a second, less the time hashing it took.
        const wait = (u.bytes / this.#rate) * 1000 - (performance.now() - started)
        if (wait > 0) await this.#sleep(wait)
      }
      const rest = this.#minPassMs - (performance.now() - passStart)
      if (rest > 0 && !this.#stopped) await this.#sleep(rest)
    }
  }

  #snapshot(): Array<Unit> {
    return [...this.#store.units()]
  }
}
