/**
 * What one process's RSS is made of: /proc/PID/smaps_rollup splits it into file-backed pages
 * (node's code and shared libraries) and anonymous memory; the process's own
 * `process.memoryUsage()` (probe.mjs, on SIGUSR2) splits the anonymous part into V8's heap and
 * the memory V8 does not manage (Buffers, ArrayBuffers). What remains is native: V8's code
 * space and compiler zones, libuv, addons, malloc's free lists.
 */
import { existsSync, readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"

export interface Memory {
  readonly rss_mib: number
  readonly file_mib: number
  readonly anon_mib: number
  readonly heap_total_mib: number
  readonly heap_used_mib: number
  /** Heap in use right after a full GC (the probe's, when the process runs with --expose-gc): live objects, not garbage. */
  readonly heap_live_mib: number | null
  /** ArrayBuffers and Buffers (memoryUsage().arrayBuffers; `external` minus them is V8-tracked native memory). */
  readonly buffers_mib: number
  /** Anonymous memory that is neither V8's heap nor buffers. */
  readonly native_mib: number
}

const mib = (kib: number) => Math.round((kib / 1024) * 10) / 10

const rollup = (pid: number): Record<string, number> => {
  const out: Record<string, number> = {}
  for (const line of readFileSync(`/proc/${pid}/smaps_rollup`, "utf8").split("\n")) {
    const m = /^(\w+):\s+(\d+) kB/.exec(line)
    if (m !== null) out[m[1]!] = Number(m[2])
  }
  return out
}

/** The memory of `pid`, which must have been started with probe.mjs preloaded and TALON_FOOTPRINT_DIR=dir. */
export const memoryOf = (pid: number, dir: string): Effect.Effect<Memory, string> =>
  Effect.gen(function* () {
    const file = join(dir, `${pid}.json`)
    rmSync(file, { force: true })
    process.kill(pid, "SIGUSR2")
    for (let i = 0; i < 100 && !existsSync(file); i++) yield* Effect.sleep("20 millis")
    if (!existsSync(file)) return yield* Effect.fail(`process ${pid} did not answer SIGUSR2 (was bench/footprint/probe.mjs preloaded?)`)
    // The probe writes the file in one call; a partial read is retried once.
    const usage = yield* Effect.try(() => JSON.parse(readFileSync(file, "utf8")) as NodeJS.MemoryUsage & { liveHeap: number | null }).pipe(
      Effect.orElse(() => Effect.sleep("50 millis").pipe(Effect.map(() => JSON.parse(readFileSync(file, "utf8")) as NodeJS.MemoryUsage & { liveHeap: number | null })))
    )
    const r = rollup(pid)
    const rss = r["Rss"] ?? 0
    const anon = r["Anonymous"] ?? 0
    const heapKib = usage.heapTotal / 1024
    const buffersKib = usage.arrayBuffers / 1024
    return {
      rss_mib: mib(rss),
      file_mib: mib(rss - anon),
      anon_mib: mib(anon),
      heap_total_mib: mib(heapKib),
      heap_used_mib: mib(usage.heapUsed / 1024),
      heap_live_mib: usage.liveHeap === null ? null : mib(usage.liveHeap / 1024),
      buffers_mib: mib(buffersKib),
      native_mib: mib(Math.max(0, anon - heapKib - buffersKib))
    }
  })
