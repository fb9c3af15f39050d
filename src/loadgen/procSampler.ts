/**
 * Server CPU and memory over the measured window, read from /proc like pound
 * does: utime/stime (fields 14 and 15 of /proc/PID/stat, already summed over
 * all the process's threads) at both ends of the window, and the peak VmRSS
 * sampled every 100 ms. Several pids (a `--loops N` server) are summed.
 */
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { Data, Effect } from "effect"

export class ProcReadError extends Data.TaggedError("ProcReadError")<{ readonly pid: number; readonly reason: string }> {
  override get message(): string {
    return `cannot read /proc/${this.pid}: ${this.reason} (is --server-pid ${this.pid} a running process on this machine?)`
  }
}

export interface CpuTicks {
  readonly utime: number
  readonly stime: number
}

export interface ServerStats {
  /** Cores busy × 100 over the window. */
  readonly cpu_percent: number
  /** stime / (utime + stime); null when no CPU was used. */
  readonly kernel_share: number | null
  /** Peak summed VmRSS over the window, KiB. */
  readonly rss_kb: number
  /** CPU seconds consumed, for per-request cost. */
  readonly cpu_seconds: number
}

/** Parses utime and stime out of a /proc/PID/stat line (comm may contain spaces and parentheses). */
export const parseStat = (line: string): CpuTicks | undefined => {
  const close = line.lastIndexOf(")")
  if (close < 0) return undefined
  const fields = line.slice(close + 2).trim().split(/\s+/)
  // fields[0] is field 3 (state); utime is field 14, stime field 15.
  const utime = Number(fields[11])
  const stime = Number(fields[12])
  return Number.isFinite(utime) && Number.isFinite(stime) ? { utime, stime } : undefined
}

/** VmRSS in KiB from /proc/PID/status text. */
export const parseRssKb = (status: string): number | undefined => {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)
  return m ? Number(m[1]) : undefined
}

let ticksPerSecond: number | undefined
/** USER_HZ; 100 on every mainstream Linux, asked of getconf once in case it is not. */
export const clockTicks = (): number => {
  if (ticksPerSecond === undefined) {
    try {
      const v = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim())
      ticksPerSecond = Number.isFinite(v) && v > 0 ? v : 100
    } catch {
      ticksPerSecond = 100
    }
  }
  return ticksPerSecond
}

// Synchronous on purpose: /proc reads never block, and the async form would wake a
// libuv pool thread on the generator's own core ten times a second.
const readText = (pid: number, file: string) =>
  Effect.try({
    try: () => readFileSync(`/proc/${pid}/${file}`, "utf8"),
    catch: (e) => new ProcReadError({ pid, reason: e instanceof Error ? e.message : String(e) })
  })

export const readCpu = (pids: ReadonlyArray<number>): Effect.Effect<CpuTicks, ProcReadError> =>
  Effect.forEach(pids, (pid) =>
    readText(pid, "stat").pipe(
      Effect.flatMap((text) => {
        const t = parseStat(text)
        return t ? Effect.succeed(t) : Effect.fail(new ProcReadError({ pid, reason: "unparseable stat line" }))
      })
    )
  ).pipe(
    Effect.map((ts) => ts.reduce((a, t) => ({ utime: a.utime + t.utime, stime: a.stime + t.stime }), { utime: 0, stime: 0 }))
  )

export const readRss = (pids: ReadonlyArray<number>): Effect.Effect<number, ProcReadError> =>
  Effect.forEach(pids, (pid) =>
    readText(pid, "status").pipe(
      Effect.flatMap((text) => {
        const kb = parseRssKb(text)
        return kb === undefined ? Effect.fail(new ProcReadError({ pid, reason: "no VmRSS line" })) : Effect.succeed(kb)
      })
    )
  ).pipe(Effect.map((kbs) => kbs.reduce((a, b) => a + b, 0)))

/**
 * Starts a window now: returns an effect that ends it and yields the stats.
 * `windowSeconds` is the nominal window (the caller sleeps it), so CPU% uses the
 * same denominator as rps.
 */
export const startWindow = (
  pids: ReadonlyArray<number>
): Effect.Effect<(windowSeconds: number) => Effect.Effect<ServerStats, ProcReadError>, ProcReadError> =>
  Effect.gen(function* () {
    const t0 = yield* readCpu(pids)
    let peak = yield* readRss(pids)
    // A bare timer, not a repeated Effect: it shares the generator's core, where fiber runs
    // cost more per request than this sample is worth (docs/decisions/measured-in-code.md).
    const paths = pids.map((pid) => `/proc/${pid}/status`)
    const timer = setInterval(() => {
      let kb = 0
      for (const path of paths) {
        try {
          kb += parseRssKb(readFileSync(path, "latin1")) ?? 0
        } catch {
          return
        }
      }
      if (kb > peak) peak = kb
    }, 100)
    timer.unref()
    return (windowSeconds: number) =>
      Effect.gen(function* () {
        clearInterval(timer)
        const t1 = yield* readCpu(pids)
        const last = yield* readRss(pids)
        const rss = Math.max(last, peak)
        const hz = clockTicks()
        const du = (t1.utime - t0.utime) / hz
        const ds = (t1.stime - t0.stime) / hz
        const cpu = du + ds
        return {
          cpu_percent: windowSeconds > 0 ? (cpu / windowSeconds) * 100 : 0,
          kernel_share: cpu > 0 ? ds / cpu : null,
          rss_kb: rss,
          cpu_seconds: cpu
        }
      })
  })
