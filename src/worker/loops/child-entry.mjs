// Entry of a serving loop forked by WorkerLoops (node:cluster). A forked
// process does not inherit a loader registered programmatically (bin/talon.mjs,
// vitest), so it registers tsx itself before importing the TypeScript loop.
import { register } from "tsx/esm/api"
register()
await import("./child.ts")
