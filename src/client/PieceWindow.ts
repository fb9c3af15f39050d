/**
 * A planned read fetched ahead of its consumer: pieces are requested in order
 * while the bytes requested but not yet taken stay within `maxBytes` and the
 * requests in flight within `maxInFlight`, and handed over strictly in order.
 * The consumer taking a piece is what lets the next one be requested, so memory
 * is bounded by the window, not by the object.
 */
import type { TalonClientError } from "./errors.js"
import type { ReadRequestPiece } from "./plan.js"
import type { Payload } from "./SlabPool.js"
import type { CancelFetch } from "./WorkerPool.js"

export type PieceResult = { readonly ok: true; readonly payload: Payload } | { readonly ok: false; readonly error: TalonClientError }
export type NextPiece = PieceResult | { readonly ok: true; readonly payload: undefined }

export type FetchPiece = (piece: ReadRequestPiece, done: (r: PieceResult) => void) => CancelFetch

interface Slot {
  result: PieceResult | undefined
  cancel: CancelFetch
}

export class PieceWindow {
  private readonly slots: Array<Slot | undefined> = []
  private head = 0
  private launched = 0
  private inFlight = 0
  private windowBytes = 0
  private waiting: ((r: NextPiece) => void) | undefined
  private closed = false

  constructor(
    private readonly pieces: ReadonlyArray<ReadRequestPiece>,
    private readonly maxBytes: number,
    private readonly maxInFlight: number,
    private readonly fetch: FetchPiece
  ) {}

  /** The next piece in order (`payload: undefined` after the last); one call outstanding at a time. */
  next(k: (r: NextPiece) => void): void {
    if (this.closed || this.head >= this.pieces.length) return k({ ok: true, payload: undefined })
    this.waiting = k
    this.fill()
    this.deliver()
  }

  /** Stops every request in flight and releases pieces not taken; safe to call more than once. */
  close(): void {
    if (this.closed) return
    this.closed = true
    this.waiting = undefined
    for (let i = this.head; i < this.launched; i++) {
      const s = this.slots[i]
      if (s === undefined) continue
      s.cancel()
      if (s.result?.ok) s.result.payload.release()
      this.slots[i] = undefined
    }
  }

  private fill(): void {
    while (
      !this.closed &&
      this.launched < this.pieces.length &&
      this.inFlight < this.maxInFlight &&
      // At least one piece is always in the window, however large.
      (this.windowBytes === 0 || this.windowBytes + this.pieces[this.launched]!.length <= this.maxBytes)
    ) {
      const i = this.launched++
      const piece = this.pieces[i]!
      const slot: Slot = { result: undefined, cancel: () => {} }
      this.slots[i] = slot
      this.inFlight++
      this.windowBytes += piece.length
      let settled = false
      const cancel = this.fetch(piece, (r) => {
        settled = true
        this.inFlight--
        if (this.closed) {
          if (r.ok) r.payload.release()
          return
        }
        slot.result = r
        if (i === this.head) this.deliver()
        else this.fill()
      })
      if (!settled) slot.cancel = cancel
    }
  }

  private deliver(): void {
    const k = this.waiting
    const slot = this.slots[this.head]
    if (k === undefined || slot?.result === undefined) return
    this.waiting = undefined
    const r = slot.result
    this.slots[this.head] = undefined
    this.windowBytes -= this.pieces[this.head]!.length
    this.head++
    if (!r.ok) this.close()
    else this.fill()
    k(r)
  }
}
