/**
 * Gives back the V8 heap a burst left behind, once the process has gone quiet.
 *
 * A worker or coordinator grows its heap during start-up, under many connections or a flood of
 * bad frames, and V8 keeps those pages: a full GC frees the objects but leaves the pages they
 * were scattered over committed, and the memory reducer did not fire in these processes (their
 * timers keep a trickle of allocation going). Measured on an idle worker: 24 MiB of heap for
 * 17 MiB live; a compacting full GC gives back ~6 MiB of RSS, a plain one nothing.
 *
 * So every few seconds the process looks at its own CPU time and heap; when it used almost no
 * CPU over the last period and the heap has grown by more than `slack` since the last trim, it
 * runs one compacting full GC. A busy process is never stopped for it, and a quiet one pays one
 * GC per burst, not one per period.
 */
import { Duration, Effect, Layer } from "effect"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"
import * as v8 from "node:v8"
import * as vm from "node:vm"

export interface TrimPolicy {
  /** How often the process looks. */
  readonly every: Duration.Duration
  /** Heap growth (bytes of committed heap) since the last trim that is worth a GC. */
  readonly slack: number
  /** At most this share of one core used over the last period counts as quiet. */
  readonly quietShare: number
}

export const defaultTrimPolicy: TrimPolicy = { every: Duration.seconds(4), slack: 4 * 1024 * 1024, quietShare: 0.05 }

export interface TrimState {
  /** Committed heap right after the last trim (or the lowest seen since). */
  readonly floor: number
}

/** One look: whether to trim now, given the CPU microseconds used and the committed heap. */
export const decide = (
  policy: TrimPolicy,
  state: TrimState,
  sample: { readonly cpuMicros: number; readonly heapBytes: number }
): { readonly trim: boolean; readonly state: TrimState } => {
  const quiet = sample.cpuMicros <= Duration.toMillis(policy.every) * 1000 * policy.quietShare
  if (quiet && sample.heapBytes > state.floor + policy.slack) return { trim: true, state }
  // The heap shrank by itself (V8 released pages): measure growth from there.
  return { trim: false, state: sample.heapBytes < state.floor ? { floor: sample.heapBytes } : state }
}

let gcFunction: (() => void) | undefined

/**
 * A compacting full GC, now. `--expose-gc` on the command line would put `gc` on every global;
 * asking V8 for it here gives it to this module only. Compaction is on for this one GC: the
 * process's own full GCs under load keep V8's heuristics.
 */
export const compactHeap = (): number => {
  if (gcFunction === undefined) {
    v8.setFlagsFromString("--expose-gc")
    gcFunction = vm.runInNewContext("gc") as () => void
  }
  v8.setFlagsFromString("--compact-on-every-full-gc")
  try {
    gcFunction()
  } finally {
    v8.setFlagsFromString("--no-compact-on-every-full-gc")
  }
  return v8.getHeapStatistics().total_heap_size
}

let mallocTrimFunction: (() => number) | undefined | null

/**
 * glibc's malloc_trim(0) through the native addon (native/memory.c): gives back the free pages
 * of malloc's heaps that glibc keeps after start-up (its trim threshold grows with every large
 * free, so the main heap's free top stays resident). True when memory was returned; false when it
 * was not, or without the addon or glibc. The addon is loaded on the first call only.
 */
export const mallocTrim = (): boolean => {
  if (mallocTrimFunction === undefined) {
    try {
      const path = fileURLToPath(new URL("../../build/Release/talon_sendfile.node", import.meta.url))
      const addon = createRequire(import.meta.url)(path) as { readonly mallocTrim?: () => number }
      mallocTrimFunction = typeof addon.mallocTrim === "function" ? addon.mallocTrim : null
    } catch {
      // No addon in this build (not Linux, or not compiled): nothing to trim with.
      mallocTrimFunction = null
    }
  }
  return mallocTrimFunction !== null && mallocTrimFunction() === 1
}

/** What the loop reads and does: the process's own CPU time and heap, and the GC (replaced in tests). */
export interface TrimProbe {
  /** CPU microseconds (user + system) used since the previous call, and the committed heap now. */
  readonly sample: () => { readonly cpuMicros: number; readonly heapBytes: number }
  /** Trims; returns the committed heap after. */
  readonly trim: () => number
}

/** The running process. `release`: each trim also gives malloc's free pages back (mallocTrim). */
export const processProbe = (release = false): TrimProbe => {
  let last = process.cpuUsage()
  return {
    sample: () => {
      const used = process.cpuUsage(last)
      last = process.cpuUsage()
      return { cpuMicros: used.user + used.system, heapBytes: v8.getHeapStatistics().total_heap_size }
    },
    trim: () => {
      const after = compactHeap()
      if (release) mallocTrim()
      // The GC's own CPU must not count against the next period.
      last = process.cpuUsage()
      return after
    }
  }
}

/** Runs forever: look every `policy.every`, trim when quiet and grown. */
export const trimWhenQuiet = (policy: TrimPolicy = defaultTrimPolicy, probe: () => TrimProbe = processProbe): Effect.Effect<never> =>
  Effect.suspend(() => {
    const p = probe()
    let state: TrimState = { floor: 0 }
    const look = Effect.sync(() => {
      const next = decide(policy, state, p.sample())
      state = next.trim ? { floor: p.trim() } : next.state
    })
    return Effect.forever(Effect.zipRight(Effect.sleep(policy.every), look))
  })

/**
 * Trims once, when start-up is over, then stops. For a process whose heap must not shrink
 * between bursts of load (the gateway: V8 re-growing its young generation after each quiet gap
 * cost it 2-4x the p99 on its proxy bench, bin/talon.mjs): the start-up burst left ~6 MiB of
 * committed heap (a 4 MiB young generation, scattered old pages) that load never needed back.
 *
 * It waits for two quiet periods in a row: V8 shrinks the young generation in a GC only once its
 * measured allocation rate (over the last ~5 s) is low, so a GC in the first quiet period after
 * start-up left an idle gateway's 4 MiB of semi-spaces committed; one period later, the same GC
 * took them to 1 MiB (-2.7 MiB of RSS).
 */
export const trimOnceWhenQuiet = (policy: TrimPolicy = defaultTrimPolicy, probe: () => TrimProbe = processProbe): Effect.Effect<void> =>
  Effect.suspend(() => {
    const p = probe()
    let quietBefore = false
    const look = Effect.sync(() => {
      const quiet = decide(policy, { floor: 0 }, p.sample()).trim
      if (quiet && quietBefore) return (p.trim(), true)
      quietBefore = quiet
      return false
    })
    return Effect.repeat(Effect.zipRight(Effect.sleep(policy.every), look), { until: (trimmed) => trimmed })
  })

/**
 * For a `talon gateway` process: one trim after start-up (trimOnceWhenQuiet) that also gives
 * malloc's free pages back (processProbe's `release`).
 */
export const startupLayer = (policy: TrimPolicy = defaultTrimPolicy): Layer.Layer<never> =>
  Layer.scopedDiscard(Effect.forkScoped(trimOnceWhenQuiet(policy, () => processProbe(true))))

/** For a `talon worker` or `talon coordinator` process (not in-process clusters: a test runner's heap is not theirs to trim). */
export const layer = (policy: TrimPolicy = defaultTrimPolicy): Layer.Layer<never> =>
  Layer.scopedDiscard(Effect.forkScoped(trimWhenQuiet(policy)))
