// worker_threads entry: the loadgen thread is TypeScript, and a worker does not
// inherit a loader registered programmatically (bin/talon.mjs, vitest), so it
// registers tsx itself before importing it.
import { register } from "tsx/esm/api"
register()
await import("./worker.ts")
