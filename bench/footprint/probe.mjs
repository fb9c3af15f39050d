// Preloaded (`node --import`) into every process bench/footprint.ts starts: on SIGUSR2 it writes
// the process's own view of its memory (V8 heap, external and ArrayBuffer memory; with
// --expose-gc also the heap live after a full GC) to
// $TALON_FOOTPRINT_DIR/<pid>.json, which /proc cannot tell apart from the rest of RSS.
import { writeFileSync } from "node:fs"
import { join } from "node:path"

const dir = process.env.TALON_FOOTPRINT_DIR
if (dir !== undefined) {
  process.on("SIGUSR2", () => {
    const usage = process.memoryUsage()
    // With --expose-gc: how much of the heap is live (a full GC now), apart from garbage not yet collected.
    let liveHeap = null
    if (typeof globalThis.gc === "function") {
      globalThis.gc()
      liveHeap = process.memoryUsage().heapUsed
    }
    writeFileSync(join(dir, `${process.pid}.json`), JSON.stringify({ ...usage, liveHeap }))
  })
}
