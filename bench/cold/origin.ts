/** The origin stub's counters as cold-bench reads them (src/origin/stats.ts, GET /_talon/stats). */

export interface OriginCounters {
  readonly bytesServed: number
  readonly requests: { readonly get: number; readonly head: number }
  readonly inflight: { readonly get: number }
}

/**
 * A reader of the counters that waits until the origin is quiet: no GET being answered and the
 * byte count unchanged across two looks `gapMs` apart (read-ahead may start a GET just after
 * the last one ended), or until `maxMs` passed. Bytes read-ahead fetches after a run are thus
 * counted with the run that caused them, not the next one.
 */
export const originSettled =
  (read: () => Promise<OriginCounters>, gapMs = 150, maxMs = 15_000, sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))) =>
  async (): Promise<OriginCounters> => {
    let last = await read()
    for (let waited = 0; waited < maxMs; waited += gapMs) {
      await sleep(gapMs)
      const now = await read()
      if (now.inflight.get === 0 && last.inflight.get === 0 && now.bytesServed === last.bytesServed) return now
      last = now
    }
    return last
  }
