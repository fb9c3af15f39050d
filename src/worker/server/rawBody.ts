/**
 * A raw body the serve loop reads whole into memory (AdmitCachedBlock's one block): the same
 * sink a streamed Put body uses, so the loop has one way of reading bytes that are not frames.
 */
import type { BodySink } from "./Writes.js"

/** Collects exactly `length` bytes, then calls `done` with them; `done(undefined)` when the body is cut short. */
export const collectBody = (length: number, done: (body: Buffer | undefined) => void): BodySink => {
  const buf = Buffer.allocUnsafe(length)
  let have = 0
  let settled = false
  const settle = (b: Buffer | undefined) => {
    if (settled) return
    settled = true
    done(b)
  }
  const sink: BodySink = {
    get left() {
      return length - have
    },
    write: (b, start, end) => {
      const take = Math.min(end - start, length - have)
      b.copy(buf, have, start, start + take)
      have += take
      if (have === length) settle(buf)
      return true
    },
    onDrain: undefined,
    abort: () => settle(undefined)
  }
  if (length === 0) settle(buf)
  return sink
}
