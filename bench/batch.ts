import { afterAll, bench } from "vitest"
import { batchedName } from "./lib/compare.js"

/*
 * Three artefacts of measuring sub-microsecond work under vitest on a shared machine:
 *
 * - Wall time is not the code's cost here: two cores are shared by several engineers'
 *   builds and tests (load average 10–15), and any sample longer than a scheduler slice
 *   absorbs other processes' run time. Samples are timed in process CPU time
 *   (`process.cpuUsage`, user + system, 1 µs resolution) instead, which equals wall time on
 *   an idle machine for this single-threaded CPU-bound code.
 * - A clock read costs ~1 µs (a getrusage syscall), so each sample runs `batch` calls, sized
 *   so that one sample takes a few hundred microseconds; the bench is named `name (×batch)`
 *   and `bench/micro.ts` divides the median by `batch` (`parseBenchName` in
 *   bench/lib/compare.ts).
 * - vitest rewrites imports into getter calls on a module object
 *   (`(0, __vite_ssr_import_1__.pageCount)(…)`), a cost native ESM does not have. Bench files
 *   bind the functions they time to local constants at module level to keep it out.
 */

/** Process CPU time in milliseconds (tinybench's unit). */
export const cpuNow = (): number => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

let sink = 0

/** Folds a result into the sink so the optimiser cannot drop the call that produced it. */
const consume = (x: unknown): void => {
  sink = (sink + (typeof x === "number" ? x : typeof x === "string" || Array.isArray(x) ? x.length : x ? 1 : 0)) | 0
}

export const benchBatched = (name: string, batch: number, fn: () => unknown): void => {
  bench(
    batchedName(name, batch),
    () => {
      for (let i = 0; i < batch; i++) consume(fn())
    },
    { now: cpuNow }
  )
}

afterAll(() => {
  // Observing the sink once makes every consumed value live.
  if (sink === 0x7fffffff) console.log("sink", sink)
})
