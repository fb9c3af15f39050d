// worker_threads entry: the loadgen thread is TypeScript, and a worker does not inherit a loader
// registered programmatically (bin/talon.mjs, vitest), so from src/ it registers tsx itself
// before importing it, unless the CLI bundle is at least as new as every source file: then it
// runs the bundled thread, which starts at ~1/4 of the CPU.
import { freshBundleEntry } from "../core/freshBundle.mjs"

const bundled = freshBundleEntry("loadgen-thread")
if (bundled !== undefined) {
  await import(bundled)
} else {
  const { register } = await import("tsx/esm/api")
  register()
  await import("./worker.ts")
}
