/**
 * The load generator as a service: `Loadgen.layer` provides runs against any server speaking
 * Talon's GetRange (a worker, the C reference server), for the `talon loadgen` command, the
 * benchmark drivers and programs that embed a cluster. Each run spreads its connections over
 * worker threads, each thread an actor (worker.ts) driven over its port.
 */
import { availableParallelism } from "node:os"
import { Context, Effect, Layer } from "effect"
import type { ObjectId } from "../core/ids.js"
import type { HostPort } from "../transport/address.js"
import { failureOf, type LoadResult, LoadgenError, type LoadSpec, runLoad, type RunHooks } from "./run.js"
import { type ObjectStat, statObject } from "./stat.js"

export { LoadgenError, type LoadResult, type LoadSpec, type Progress, type RunHooks } from "./run.js"

/** What a run needs to be told; everything else has the `talon loadgen` defaults. */
export type LoadSpecInput = Pick<LoadSpec, "host" | "port" | "object" | "size"> & Partial<LoadSpec>

/** A whole spec from the essentials: 1 connection × depth 1, 64 KiB ranges, 10 s after 3 s of warmup. */
export const loadSpec = (input: LoadSpecInput): LoadSpec => ({
  conns: 1,
  depth: 1,
  range: 65536,
  seconds: 10,
  warmup: 3,
  threads: availableParallelism(),
  missShare: 0,
  missStride: 1024 * 1024,
  seed: 1,
  serverPids: [],
  drainTimeout: 5,
  failFast: false,
  ...input
})

export interface LoadgenShape {
  /** One run; a result with errors or no samples is still a result (see `failureOf`). */
  readonly run: (spec: LoadSpec, hooks?: RunHooks) => Effect.Effect<LoadResult, LoadgenError>
  /** One run that fails with the run's first error when it had any error or no samples. */
  readonly runChecked: (spec: LoadSpec, hooks?: RunHooks) => Effect.Effect<LoadResult, LoadgenError>
  /** One run per connection count, in order, stopping after the first failed run (which is included). */
  readonly sweep: (
    spec: LoadSpec,
    conns: ReadonlyArray<number>,
    onResult?: (r: LoadResult) => Effect.Effect<void>,
    hooks?: (conns: number) => RunHooks
  ) => Effect.Effect<ReadonlyArray<LoadResult>, LoadgenError>
  /** An object's size and version, asked of the coordinators (`host:port[,host:port…]` or one address). */
  readonly stat: (coordinator: string | HostPort, object: ObjectId) => Effect.Effect<ObjectStat, LoadgenError>
}

const make: LoadgenShape = {
  run: runLoad,
  runChecked: (spec, hooks) =>
    Effect.flatMap(runLoad(spec, hooks), (r) => {
      const failure = failureOf(r)
      return failure === undefined ? Effect.succeed(r) : Effect.fail(new LoadgenError({ message: failure }))
    }),
  sweep: (spec, conns, onResult, hooks) =>
    Effect.gen(function* () {
      const results: Array<LoadResult> = []
      for (const n of conns) {
        const r = yield* runLoad({ ...spec, conns: n }, hooks?.(n))
        results.push(r)
        if (onResult) yield* onResult(r)
        if (failureOf(r) !== undefined) break
      }
      return results
    }),
  stat: statObject
}

export class Loadgen extends Context.Tag("talon/Loadgen")<Loadgen, LoadgenShape>() {
  static readonly layer: Layer.Layer<Loadgen> = Layer.succeed(Loadgen, make)
}
