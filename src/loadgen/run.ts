/**
 * One load run: spreads the connections over worker threads, starts them on a
 * shared clock, samples the server over the measured window, and merges the
 * threads' counts and histograms into one result.
 */
import { Worker } from "node:worker_threads"
import { performance } from "node:perf_hooks"
import { Data, Duration, Effect, Fiber, Schedule, type Scope } from "effect"
import { type ActorError, type ActorRef, Channel, Remote } from "../actor/index.js"
import type { ObjectId } from "../core/ids.js"
import { getRangeTemplate } from "./frames.js"
import { latencySummary, mergeEncoded } from "./histogram.js"
import { readCpu, type ServerStats, startWindow } from "./procSampler.js"
import { Connect, Run, type StartSignal, THREAD_ACTOR, type ThreadFailed, type ThreadMessage, ThreadProtocol, type ThreadResult, type ThreadSpec } from "./threadMessages.js"
import type { WorkerInput } from "./worker.js"

export class LoadgenError extends Data.TaggedError("LoadgenError")<{ readonly message: string }> {}

export interface LoadSpec {
  readonly host: string
  readonly port: number
  readonly conns: number
  readonly depth: number
  readonly range: number
  readonly seconds: number
  readonly warmup: number
  /**
   * Seconds at the start of the warmup over which requests in flight per connection
   * grow from 1 to `depth`. Default: half the warmup, at most 1 s. See `rampMs`.
   */
  readonly ramp?: number
  readonly threads: number
  readonly object: ObjectId
  /** Object size in bytes; offsets are random multiples of `range` below it. */
  readonly size: number
  /**
   * Bytes at the start of `object` that hit traffic reads. Default: the whole
   * object, or its first half when misses are drawn from the same object.
   */
  readonly hotBytes?: number
  /** Share of requests aimed at not-yet-read offsets (0 ≤ share < 1). */
  readonly missShare: number
  /** Cold requests go here (from offset 0) instead of past `hotBytes` of `object`. */
  readonly missObject?: ObjectId
  readonly missSize?: number
  /** Distance between cold offsets: at least the worker's fill unit (page), so no two misses share one. */
  readonly missStride: number
  readonly seed: number
  readonly verify?: string
  readonly serverPids: ReadonlyArray<number>
  readonly drainTimeout: number
  readonly failFast: boolean
}

/** One JSON line of `talon loadgen --json`. Latencies are in µs, null when there were no samples. */
export interface LoadResult {
  readonly addr: string
  readonly conns: number
  readonly depth: number
  readonly range: number
  readonly threads: number
  readonly seconds: number
  readonly rps: number
  readonly mib_s: number
  readonly p50_us: number | null
  readonly p90_us: number | null
  readonly p99_us: number | null
  readonly p999_us: number | null
  readonly max_us: number | null
  readonly samples: number
  readonly errors: number
  readonly error_frames: number
  readonly first_error: string | null
  /** Payload bytes received inside the window; checked to equal samples × range. */
  readonly bytes: number
  readonly cpu_percent: number | null
  readonly kernel_share: number | null
  readonly rss_kb: number | null
  readonly cpu_us_per_req: number | null
  /** The generator's own CPU (all threads) over the window, in cores. */
  readonly client_cores: number
  /** The generator's CPU per request (µs): what sets rps once its core is the limit. */
  readonly client_us_per_req: number | null
  /** Socket reads and writes per request inside the window (Node pays per call, not per byte). */
  readonly client_reads_per_req: number | null
  readonly client_writes_per_req: number | null
  readonly miss_share: number
  readonly hit_samples: number
  readonly miss_samples: number
  readonly hit_p50_us: number | null
  readonly hit_p99_us: number | null
  readonly miss_p50_us: number | null
  readonly miss_p99_us: number | null
}

export interface Progress {
  readonly phase: "warmup" | "measuring" | "draining"
  readonly elapsed: number
  readonly replies: number
  /** Replies per second since the previous report. */
  readonly rps: number
}

export interface RunHooks {
  readonly onProgress?: (p: Progress) => Effect.Effect<void>
  readonly progressEvery?: Duration.DurationInput
}

const READ_BUFFER_BYTES = 256 * 1024

/**
 * Why a ramp: Linux grows a socket's receive buffer from what the reader drains per
 * round trip. When every connection's `depth` replies land at once on a client that
 * is already the bottleneck, some runs keep their windows small for good, and the
 * server turns window-bound and costs the client CPU (docs/decisions/loadgen-speed.md,
 * "TCP receive windows"). Growing the depth over part of the warmup lets the windows
 * open. Never into the window.
 */
const rampMs = (spec: LoadSpec): number =>
  Math.round(1000 * Math.max(0, Math.min(spec.ramp ?? Math.min(1, spec.warmup / 2), spec.warmup)))

/** Checks the spec and derives the per-thread plan (hot blocks, cold region). */
export const planThreads = (spec: LoadSpec): Effect.Effect<ReadonlyArray<ThreadSpec>, LoadgenError> =>
  Effect.gen(function* () {
    const bad = (message: string) => Effect.fail(new LoadgenError({ message }))
    const posInt = (n: number) => Number.isSafeInteger(n) && n > 0
    if (!posInt(spec.conns)) return yield* bad(`--conns wants positive integers, got ${spec.conns}`)
    if (!posInt(spec.depth)) return yield* bad(`--depth wants a positive integer, got ${spec.depth}`)
    if (!posInt(spec.range) || spec.range > 0xffffffff) return yield* bad(`--range wants 1 to 4294967295 bytes, got ${spec.range}`)
    if (!(spec.seconds > 0)) return yield* bad(`--seconds must be > 0, got ${spec.seconds}`)
    if (!(spec.warmup >= 0)) return yield* bad(`--warmup must be ≥ 0, got ${spec.warmup}`)
    if (spec.ramp !== undefined && !(spec.ramp >= 0 && spec.ramp <= spec.warmup)) {
      return yield* bad(`--ramp must be between 0 and --warmup (${spec.warmup} s), got ${spec.ramp}`)
    }
    if (!(spec.missShare >= 0 && spec.missShare < 1)) return yield* bad(`--miss-share must be in [0, 1), got ${spec.missShare}`)
    if (!posInt(spec.size) || spec.size < spec.range) {
      return yield* bad(`object size ${spec.size} is smaller than --range ${spec.range} (give --size, or --coordinator to ask)`)
    }
    const sameObject = spec.missShare > 0 && spec.missObject === undefined
    const stride = Math.max(spec.missStride, spec.range)
    const hotBytes = spec.hotBytes ?? (sameObject ? Math.floor(spec.size / 2 / stride) * stride : spec.size)
    const hotBlocks = Math.floor(Math.min(hotBytes, spec.size) / spec.range)
    if (hotBlocks < 1) return yield* bad(`the hot region (${hotBytes} bytes) holds no whole --range of ${spec.range} bytes`)
    const missStart = sameObject ? Math.ceil(hotBytes / stride) * stride : 0
    const missEnd = sameObject ? spec.size : (spec.missSize ?? 0)
    if (spec.missShare > 0 && missStart + spec.range > missEnd) {
      return yield* bad(
        spec.missObject === undefined
          ? `no cold region: the hot region ends at ${missStart} of ${spec.size} bytes; lower --hot-bytes`
          : `the miss object needs a size of at least --range (give --miss-size, or --coordinator to ask)`
      )
    }
    const hot = getRangeTemplate(spec.object, spec.range)
    const miss = spec.missShare > 0 ? getRangeTemplate(spec.missObject ?? spec.object, spec.range) : null
    const threads = Math.max(1, Math.min(spec.threads, spec.conns))
    return Array.from({ length: threads }, (_, t): ThreadSpec => ({
      host: spec.host,
      port: spec.port,
      conns: Array.from({ length: spec.conns }, (_, i) => i).filter((i) => i % threads === t),
      totalConns: spec.conns,
      depth: spec.depth,
      range: spec.range,
      hot,
      hotBlocks,
      missShare: spec.missShare,
      miss,
      missStart,
      missStride: stride,
      missEnd,
      missSameObject: sameObject,
      seed: spec.seed,
      verify: spec.verify ?? null,
      failFast: spec.failFast,
      readBufferBytes: READ_BUFFER_BYTES,
      rampMs: rampMs(spec)
    }))
  })

interface ThreadHandle {
  readonly slot: number
  readonly ref: ActorRef<ThreadMessage, ActorError>
  /** Why the thread died, when it threw outside the actor (the channel only says it exited). */
  readonly crash: () => string | undefined
}

/** Starts a thread serving the loadgen thread actor; terminated when the scope closes. */
const spawn = (input: WorkerInput): Effect.Effect<ThreadHandle, never, Scope.Scope> =>
  Effect.gen(function* () {
    let crash: string | undefined
    const worker = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const w = new Worker(new URL("./worker-entry.mjs", import.meta.url), { workerData: input })
        w.on("error", (e) => (crash ??= e.message))
        return w
      }),
      (w) => Effect.promise(() => w.terminate())
    )
    const ref = yield* Remote.ref(Channel.fromPort(worker), { name: THREAD_ACTOR, protocol: ThreadProtocol })
    return { slot: input.slot, ref, crash: () => crash }
  })

/** One thread's answer, or a LoadgenError naming the thread and what went wrong. */
const ask = <A>(h: ThreadHandle, what: string, effect: Effect.Effect<A, ThreadFailed | ActorError>) =>
  Effect.mapError(effect, (e) => {
    // The thread's own failure already names the connection and the cause.
    if (e._tag === "ThreadFailed") return new LoadgenError({ message: e.message })
    const crash = h.crash()
    const why = e._tag === "RemoteUnavailable" && crash !== undefined ? `crashed: ${crash}` : e.message
    return new LoadgenError({ message: `loadgen thread ${h.slot} (${what}): ${why}` })
  })

const nowMs = () => performance.timeOrigin + performance.now()

/** Runs one load; a result with errors or no samples is still a result (see `failureOf`). */
export const runLoad = (spec: LoadSpec, hooks: RunHooks = {}): Effect.Effect<LoadResult, LoadgenError> =>
  Effect.scoped(
    Effect.gen(function* () {
      const plan = yield* planThreads(spec)
      if (spec.serverPids.length > 0) {
        yield* readCpu(spec.serverPids).pipe(Effect.mapError((e) => new LoadgenError({ message: e.message })))
      }
      const progress = new SharedArrayBuffer(8 * plan.length)
      const progressView = new Float64Array(progress)
      const handles = yield* Effect.forEach(plan, (_, slot) => spawn({ progress, slot }))
      yield* Effect.forEach(plan, (spec, slot) => ask(handles[slot]!, "connect", handles[slot]!.ref.ask(new Connect({ spec }))), {
        concurrency: "unbounded",
        discard: true
      })

      const t0 = nowMs()
      const signal: StartSignal = {
        measureFromMs: t0 + spec.warmup * 1000,
        measureUntilMs: t0 + (spec.warmup + spec.seconds) * 1000,
        drainTimeoutMs: spec.drainTimeout * 1000
      }
      const running = yield* Effect.forEach(handles, (h) => ask(h, "run", h.ref.ask(new Run({ signal }))), { concurrency: "unbounded" }).pipe(
        Effect.forkScoped
      )

      if (hooks.onProgress) {
        const report = hooks.onProgress
        let last = { t: t0, replies: 0 }
        yield* Effect.suspend(() => {
          const t = nowMs()
          const replies = progressView.reduce((a, b) => a + b, 0)
          const rps = t > last.t ? ((replies - last.replies) * 1000) / (t - last.t) : 0
          last = { t, replies }
          const phase = t < signal.measureFromMs ? "warmup" : t < signal.measureUntilMs ? "measuring" : "draining"
          return report({ phase, elapsed: (t - t0) / 1000, replies, rps })
        }).pipe(Effect.repeat(Schedule.spaced(hooks.progressEvery ?? "500 millis")), Effect.delay(hooks.progressEvery ?? "500 millis"), Effect.forkScoped)
      }

      const sleepUntil = (ms: number) => Effect.suspend(() => Effect.sleep(Duration.millis(Math.max(0, ms - nowMs()))))
      yield* sleepUntil(signal.measureFromMs)
      const serverErrors: Array<string> = []
      const end =
        spec.serverPids.length > 0
          ? yield* startWindow(spec.serverPids).pipe(
              Effect.catchAll((e) => Effect.sync(() => (serverErrors.push(`server pid is gone before the measured window: ${e.message}`), undefined)))
            )
          : undefined
      const cpu0 = process.cpuUsage()
      yield* sleepUntil(signal.measureUntilMs)
      const cpu1 = process.cpuUsage(cpu0)
      let server: ServerStats | undefined
      if (end) {
        server = yield* end(spec.seconds).pipe(
          Effect.catchAll((e) => Effect.sync(() => (serverErrors.push(`server pid is gone at the end of the measured window: ${e.message}`), undefined)))
        )
      }
      const results = yield* Fiber.join(running)
      return merge(spec, results, server, (cpu1.user + cpu1.system) / 1e6, serverErrors)
    })
  )

const round = (x: number, digits: number) => Number(x.toFixed(digits))

const merge = (
  spec: LoadSpec,
  results: ReadonlyArray<ThreadResult>,
  server: ServerStats | undefined,
  clientCpuSeconds: number,
  extraErrors: ReadonlyArray<string>
): LoadResult => {
  const sum = (f: (r: ThreadResult) => number) => results.reduce((a, r) => a + f(r), 0)
  const samples = sum((r) => r.samples)
  const replies = sum((r) => r.replies)
  const bytes = sum((r) => r.bytes)
  const measuredBytes = sum((r) => r.measuredBytes)
  const errors: Array<string> = results.flatMap((r) => (r.firstError === null ? [] : [r.firstError]))
  let errorCount = sum((r) => r.errors)
  // Every reply's length is checked as it arrives; this catches accounting slips in the generator itself.
  if (bytes !== replies * spec.range || measuredBytes !== samples * spec.range) {
    errors.push(`byte count mismatch: ${bytes} payload bytes for ${replies} replies of ${spec.range} (window: ${measuredBytes} for ${samples})`)
    errorCount++
  }
  errors.push(...extraErrors)
  errorCount += extraErrors.length
  if (samples === 0) {
    errors.push(`no samples in the measured window (${spec.seconds} s)`)
    errorCount++
  }
  const hits = mergeEncoded(results.map((r) => r.hitHistogram))
  const misses = mergeEncoded(results.map((r) => r.missHistogram))
  const all = mergeEncoded(results.flatMap((r) => [r.hitHistogram, r.missHistogram]))
  const lat = latencySummary(all)
  const hitLat = latencySummary(hits)
  const missLat = latencySummary(misses)
  return {
    addr: `${spec.host}:${spec.port}`,
    conns: spec.conns,
    depth: spec.depth,
    range: spec.range,
    threads: results.length,
    seconds: spec.seconds,
    rps: round(samples / spec.seconds, 1),
    mib_s: round(measuredBytes / spec.seconds / 1048576, 1),
    ...lat,
    samples,
    errors: errorCount,
    error_frames: sum((r) => r.errorFrames),
    first_error: errors[0] ?? null,
    bytes: measuredBytes,
    cpu_percent: server ? round(server.cpu_percent, 1) : null,
    kernel_share: server && server.kernel_share !== null ? round(server.kernel_share, 3) : null,
    rss_kb: server ? server.rss_kb : null,
    cpu_us_per_req: server && samples > 0 ? round((server.cpu_seconds * 1e6) / samples, 2) : null,
    client_cores: round(clientCpuSeconds / spec.seconds, 3),
    client_us_per_req: samples > 0 ? round((clientCpuSeconds * 1e6) / samples, 2) : null,
    client_reads_per_req: samples > 0 ? round(sum((r) => r.windowReads) / samples, 3) : null,
    client_writes_per_req: samples > 0 ? round(sum((r) => r.windowWrites) / samples, 3) : null,
    miss_share: spec.missShare,
    hit_samples: sum((r) => r.hitSamples),
    miss_samples: sum((r) => r.missSamples),
    hit_p50_us: hitLat.p50_us,
    hit_p99_us: hitLat.p99_us,
    miss_p50_us: missLat.p50_us,
    miss_p99_us: missLat.p99_us
  }
}

/** The reason a result counts as a failed run (first error verbatim), or undefined when it passed. */
export const failureOf = (r: LoadResult): string | undefined =>
  r.errors > 0 || r.samples === 0 ? (r.first_error ?? `no samples in the measured window (${r.seconds} s)`) : undefined
