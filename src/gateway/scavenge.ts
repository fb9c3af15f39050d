/**
 * Keeps the garbage of streamed bodies bounded. Every byte the gateway relays arrives
 * in a fresh buffer (socket reads, the cluster client's reply frames); once written,
 * those buffers are garbage, but V8 frees ArrayBuffer memory only when a collection
 * finds their wrappers dead, and it starts one on its own only after ~64 MiB of such
 * memory has built up (its external-memory trigger): a busy stream would show that
 * much RSS growth for nothing. The wrappers usually outlive a scavenge (a piece waits
 * in the read-ahead window), so a young-generation GC does not free them; an
 * incremental (concurrent) major GC does. It costs real CPU on a big heap, so it runs
 * only when ArrayBuffer memory has actually piled up. Measured (1 GiB through the cache
 * route to a slow reader, `talon gateway` as a child): RSS growth ~34 MiB checking every
 * 8 MiB, ~59 MiB every 16 MiB, ~80 MiB without, at the same transfer time.
 * `gc` is exposed at run time through V8's own flag, so the gateway needs no
 * command-line switch; where that fails this is a no-op.
 */
import * as v8 from "node:v8"
import * as vm from "node:vm"

type Gc = (options?: { readonly type?: "major" | "minor"; readonly execution?: "sync" | "async" }) => void

const resolveGc = (): Gc | undefined => {
  const existing = (globalThis as { gc?: Gc }).gc
  if (typeof existing === "function") return existing
  try {
    v8.setFlagsFromString("--expose-gc")
    const fn: unknown = vm.runInNewContext("gc")
    return typeof fn === "function" ? (fn as Gc) : undefined
  } catch {
    return undefined
  }
}

let gc: Gc | undefined | null = null
let relayed = 0
/** Lowest ArrayBuffer memory seen since the last collection: roughly what is live, not garbage. */
let floor = Number.POSITIVE_INFINITY

/**
 * Counts `bytes` relayed; every `everyBytes` (0 = never) looks at the ArrayBuffer memory
 * and starts a collection only when it has grown more than `everyBytes` above its
 * recent floor, so long-lived buffers do not count and a process whose garbage V8
 * already collects pays nothing.
 */
export const noteRelayed = (bytes: number, everyBytes: number): void => {
  if (everyBytes <= 0) return
  relayed += bytes
  if (relayed < everyBytes) return
  relayed = 0
  const now = process.memoryUsage().arrayBuffers
  if (now < floor) floor = now
  if (now - floor < everyBytes) return
  if (gc === null) gc = resolveGc()
  gc?.({ type: "major", execution: "async" })
  // The collection finishes later; the next lower reading becomes the floor again.
  floor = now
}
