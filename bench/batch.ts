import { bench } from "vitest"
import { batchedName } from "../src/bench/compare.js"

/**
 * Registers `name` timing `batch` calls per sample. vitest reads the clock around every
 * sample and a clock read costs ~100 ns here, so a single sub-microsecond call would mostly
 * time the clock; `scripts/bench.ts` divides the median by `batch` (see `parseBenchName`).
 */
export const benchBatched = (name: string, batch: number, fn: () => void): void => {
  bench(batchedName(name, batch), () => {
    for (let i = 0; i < batch; i++) fn()
  })
}

/**
 * Results flow here so the optimiser cannot drop the measured call; read once at the end so
 * the value is observable.
 */
export const sink = { value: 0 }
export const consume = (x: unknown): void => {
  sink.value = (sink.value + (typeof x === "string" ? x.length : Array.isArray(x) ? x.length : x ? 1 : 0)) | 0
}
