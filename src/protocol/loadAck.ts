/**
 * The detail of a worker's `Ack{ok:true}` to a `Load`. Talon's Ack carries only a free-form
 * string, so the counts travel as `fetched=<bytes> resident=<bytes>`: bytes the worker had to
 * fill from the origin for the range, and bytes it already held. A reader that does not know
 * the format still sees a readable sentence-like string.
 */

export interface LoadCounts {
  /** Bytes of the range that were not resident when the Load arrived (filled from the origin). */
  readonly fetched: number
  /** Bytes of the range already resident. */
  readonly resident: number
}

export const formatLoadAck = (counts: LoadCounts): string => `fetched=${counts.fetched} resident=${counts.resident}`

const PATTERN = /^fetched=(\d{1,16}) resident=(\d{1,16})$/

/** The counts in an Ack detail, or undefined when the detail is absent or not in this format (never throws). */
export const parseLoadAck = (detail: string | null | undefined): LoadCounts | undefined => {
  if (typeof detail !== "string") return undefined
  const m = PATTERN.exec(detail)
  if (m === null) return undefined
  const fetched = Number(m[1])
  const resident = Number(m[2])
  return Number.isSafeInteger(fetched) && Number.isSafeInteger(resident) ? { fetched, resident } : undefined
}
