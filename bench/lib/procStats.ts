/**
 * CPU and RSS of server processes from /proc, sampled by a driver over a client's measured
 * window, summed over all of an arm's processes (a worker with loops is several).
 */
import { readFileSync } from "node:fs"
import { performance } from "node:perf_hooks"
import { Duration, Effect } from "effect"

/** USER_HZ: /proc/<pid>/stat counts CPU time in these ticks. */
const CLK_TCK = 100

const cpuTicks = (pid: number): { user: number; sys: number } => {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8")
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ")
    return { user: Number(f[11]), sys: Number(f[12]) }
  } catch {
    return { user: 0, sys: 0 }
  }
}

/** Resident memory of `pid` in KiB; 0 when it is gone. */
export const rssKb = (pid: number): number => {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return m === null ? 0 : Number(m[1])
  } catch {
    return 0
  }
}

const sumTicks = (pids: ReadonlyArray<number>) =>
  pids.reduce(
    (a, p) => {
      const t = cpuTicks(p)
      return { user: a.user + t.user, sys: a.sys + t.sys }
    },
    { user: 0, sys: 0 }
  )

export interface WindowSample {
  /** CPU seconds (user, system) over the window. */
  readonly user: number
  readonly sys: number
  /** The window's wall time, seconds. */
  readonly wall: number
  /** Peak summed RSS, KiB. */
  readonly rssKb: number
}

/** CPU and peak summed RSS of `pids` over [now + startMs, now + startMs + lenMs]. */
export const sampleWindow = (pids: () => ReadonlyArray<number>, startMs: number, lenMs: number): Effect.Effect<WindowSample> =>
  Effect.gen(function* () {
    yield* Effect.sleep(Duration.millis(startMs))
    const t0 = sumTicks(pids())
    const w0 = performance.now()
    let peak = 0
    const end = w0 + lenMs
    while (performance.now() < end) {
      peak = Math.max(peak, pids().reduce((a, p) => a + rssKb(p), 0))
      yield* Effect.sleep(Duration.millis(Math.min(100, Math.max(1, end - performance.now()))))
    }
    const t1 = sumTicks(pids())
    const wall = (performance.now() - w0) / 1000
    return { user: (t1.user - t0.user) / CLK_TCK, sys: (t1.sys - t0.sys) / CLK_TCK, wall, rssKb: peak }
  })
