// Entry of a serving loop forked by WorkerLoops (node:cluster). A forked process does not
// inherit a loader registered programmatically (bin/talon.mjs, vitest), so from src/ it
// registers tsx itself before importing the TypeScript loop, unless the CLI bundle is at least
// as new as every source file: then it runs the bundled loop, which starts at ~1/4 of the CPU.
import { freshBundleEntry } from "../../core/freshBundle.mjs"

const bundled = freshBundleEntry("loop-child")
if (bundled !== undefined) {
  await import(bundled)
} else {
  const { register } = await import("tsx/esm/api")
  register()
  await import("./child.ts")
}
