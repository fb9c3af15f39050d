import { afterAll, bench } from "vitest"
import { batchedName } from "../src/bench/compare.js"

/*
 * Two artefacts of measuring sub-microsecond work under vitest, handled here:
 *
 * - vitest reads the clock around every sample and a clock read costs ~100 ns on this
 *   machine, so a single call would mostly time the clock. `benchBatched` times `batch`
 *   calls per sample and names the bench `name (×batch)`; `scripts/bench.ts` divides the
 *   median by `batch` (see `parseBenchName` in src/bench/compare.ts).
 * - vitest rewrites imports into getter calls on a module object
 *   (`(0, __vite_ssr_import_1__.pageCount)(…)`), a cost native ESM does not have. Bench files
 *   bind the functions they time to local constants at module level to keep it out.
 */

let sink = 0

/** Folds a result into the sink so the optimiser cannot drop the call that produced it. */
const consume = (x: unknown): void => {
  sink = (sink + (typeof x === "number" ? x : typeof x === "string" || Array.isArray(x) ? x.length : x ? 1 : 0)) | 0
}

export const benchBatched = (name: string, batch: number, fn: () => unknown): void => {
  bench(batchedName(name, batch), () => {
    for (let i = 0; i < batch; i++) consume(fn())
  })
}

afterAll(() => {
  // Observing the sink once makes every consumed value live.
  if (sink === 0x7fffffff) console.log("sink", sink)
})
