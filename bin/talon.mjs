#!/bin/sh
":" //; case "$1" in --config) R=$3;; --config=*) R=$2;; *) R=$1;; esac; case "$R" in worker|coordinator) F="--max-semi-space-size=1 --memory-reducer --v8-pool-size=1";export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}";export MALLOC_TRIM_THRESHOLD_="${MALLOC_TRIM_THRESHOLD_:-131072}";; gateway) F="--max-semi-space-size=2 --max-old-space-size=1024";export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}";; *) F=;; esac; UV_THREADPOOL_SIZE="${UV_THREADPOOL_SIZE:-32}" exec node --no-memory-reducer $F "$0" "$@"
// Line 2 is for sh (POSIX sh everywhere, BusyBox's included, where `env -S` does not exist):
// it re-runs this file under node with the flags below; to JavaScript it is a string and a comment.
// --no-memory-reducer: V8 otherwise shrinks a busy process's heap (young generation included)
// with extra full GCs once it goes quiet, and the next burst runs on the shrunken heap. Measured
// on the gateway proxy bench (cache runs after ~8 s gaps): 9 of 30 runs fast without the flag,
// 41 of 46 with it; a slow run costs the gateway ~0.9-1.5 ms of CPU per 1 MiB request instead of
// 0.55-0.8, at 2-4x the p99 (BENCHMARKS.md). Command line only: v8.setFlagsFromString is too late.
// Per role (the subcommand, after an optional --config FILE): a worker and a coordinator run with
// a 1 MiB semi-space. V8 otherwise grows the young generation to 8-16 MiB during start-up and keeps
// it, ~12 MiB of an idle process's RSS; neither allocates much in JS once started (the worker's hit
// path is native), and a cold 256 MiB fill through one worker took no more CPU with it
// (BENCHMARKS.md, "Footprint"). A --loops worker's serving loops inherit the flags.
// They also get the memory reducer back (their hit path is native, so the gateway's reason for
// turning it off does not apply: it gives back the heap a load or abuse burst grew), one V8
// platform thread instead of one per core, and MALLOC_ARENA_MAX=2: libuv's 32 threads otherwise
// each grow a malloc arena. Measured together: native RSS 2-5 MiB less idle and ~10 MiB less under
// load; hit-path CPU per request unchanged within noise (dataplane bench, paired arms).
// MALLOC_TRIM_THRESHOLD_=128 KiB: glibc otherwise raises its trim threshold (up to 64 MiB) each
// time a large block is freed, and then keeps the top of its heap: the memory V8's compiler and
// start-up freed stayed resident. Fixed at 128 KiB, an idle coordinator's malloc heap went from
// 5.1 to 3.9 MiB (1.3 MiB of RSS). Not for the gateway: it mallocs per request, and a low
// threshold would trim and regrow under load.
// A gateway runs with a 2 MiB semi-space: it allocates per request, and under load V8 grew its young
// generation to the 16 MiB default semi-spaces, most of the 65-77 MiB its RSS grew by at 64 KiB and
// 1 MiB GETs; with 2 MiB it starts ~11 MiB smaller and peaks ~20 MiB lower (BENCHMARKS.md, "the
// gateway against nginx"). `talon up` (one process for every role) keeps V8's default.
// And with --max-old-space-size=1024: V8 lets the old generation fill to its live size times a
// factor it picks from its marking speed against the rate garbage is promoted, capped by the heap
// limit: 4 at a limit of 2 GiB or more (its default on any box with 8 GiB+), 1.6 at 1 GiB. Under
// thousands of GETs/s it reaches the cap: ~17 MiB live after a full GC, so up to ~70 MiB of old
// space before the next, enough to account for the 52-62 MiB the co-located gateway's RSS grew by
// at 64 KiB and 1 MiB on an idle box (not re-measured there). With 1 GiB the next full GC comes at ~1.6x live (+8 MiB at least): peaks
// 3.6-5.5 MiB lower on a loaded box, CPU per request within noise (docs/decisions/
// gateway-body-path.md, "Gateway memory under load"). A gateway's live heap is tens of MiB; the
// cap is 40x that.
// The gateway also runs with MALLOC_ARENA_MAX=2 (its JS, where it mallocs per request, runs on the
// main thread's arena either way): idle 71.5-71.8 -> 68.6-69.7 MiB, the libuv threads' arenas.
// Measured for the gateway and left (BENCHMARKS.md, "the gateway against nginx"): a 1 MiB
// semi-space (its requests' objects go to the old generation: 63 MiB growth at 64 KiB GETs) and
// --v8-pool-size=1 or MALLOC_ARENA_MAX=1 (7.6-8.1 MiB smaller idle co-located, but V8's threads
// then malloc in the main heap and RSS climbed 92 -> 110 MiB over a bench run, against flat at 2).
// UV_THREADPOOL_SIZE (unless set): a cold fill runs many page writes, fdatasyncs and renames at
// once on libuv's pool, whose default 4 threads queue them; a cold 256 MiB read through one worker
// went from 98-108 to 132-151 MB/s with 32 threads (bench/miss-path.ts, paired rounds).
// Runs the build in dist/ (made by `npm install`) when it is at least as new as every source
// file; otherwise runs src/ through tsx's loader, so an edited checkout never runs stale code.
// From the build it prefers the bundle (dist/bundle/cli, scripts/bundle.mjs): a subcommand loads
// its own chunks only, in a fraction of the time and memory of dist/'s module tree.
import * as fs from "node:fs"

const root = new URL("../", import.meta.url)

// `talon --version` needs no module at all: scripts ask it in loops.
const args = process.argv.slice(2)
if (args.length === 1 && args[0] === "--version") {
  process.stdout.write(`${JSON.parse(fs.readFileSync(new URL("package.json", root), "utf8")).version}\n`)
  process.exit(0)
}
/** The subcommand's script bundle (with a way to run it), when the build has one for it. */
async function scriptFor(argv) {
  let i = 0
  while (i < argv.length && argv[i].startsWith("-")) i += argv[i] === "--config" ? 2 : 1
  // No subcommand: `talon`, `talon --help` (every subcommand's help) unless other options ask for more.
  const name = i < argv.length ? argv[i] : argv.every((a) => a === "--help" || a === "-h") ? "help" : undefined
  if (name === undefined) return undefined
  const bundles = await import("../dist/core/scriptBundle.mjs")
  const file = bundles.scriptBundleIn(root, name)
  return file === undefined ? undefined : { run: () => bundles.runScriptBundle(file) }
}
// An installed package ships dist/ without src/: nothing to compare against, run the build.
const hasSource = fs.existsSync(new URL("src/", root))

if (!hasSource || (await import("../src/core/freshBundle.mjs")).buildIsFresh()) {
  // A one-shot command (`talon read`, …, `talon --help`) runs from its script bundle, compiled
  // from V8's code cache (dist/core/scriptBundle.mjs); servers from the ESM chunks.
  const script = process.env.TALON_NO_BUNDLE === undefined ? await scriptFor(args) : undefined
  if (script !== undefined) {
    script.run()
  } else if (process.env.TALON_NO_BUNDLE === undefined && fs.existsSync(new URL("dist/bundle/cli/main.js", root))) {
    await import("../dist/bundle/cli/main.js")
  } else {
    await import("../dist/cli/main.js")
  }
} else {
  const { register } = await import("tsx/esm/api")
  register()
  await import("../src/cli/main.ts")
}
