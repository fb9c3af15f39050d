/**
 * What the load generator's controller and its threads say to each other, as Schema classes: a
 * thread is an actor (src/actor) served over its worker port, and the controller holds a
 * `Remote.ref` to it. Two requests, in order: `Connect` (open every connection of the thread's
 * share, reply once all are up) and `Run` (wait for the shared start time, run the window,
 * drain, reply with the counts and histograms). Everything here crosses as structured clone.
 */
import { Schema } from "effect"

/** A pre-encoded GetRange frame: request id at byte 8, offset (u64 LE) at `offsetPos`. */
export const FrameTemplate = Schema.Struct({ bytes: Schema.Uint8ArrayFromSelf, offsetPos: Schema.Int })
export type FrameTemplate = typeof FrameTemplate.Type

/** What one thread runs. */
export const ThreadSpec = Schema.Struct({
  host: Schema.String,
  port: Schema.Int,
  /** Global indices of this thread's connections (they seed the RNG and split the cold region). */
  conns: Schema.Array(Schema.Int),
  totalConns: Schema.Int,
  depth: Schema.Int,
  range: Schema.Int,
  /** Hit traffic: offsets are uniform multiples of `range` in `[0, hotBlocks × range)`. */
  hot: FrameTemplate,
  hotBlocks: Schema.Int,
  /** Fraction of requests sent to the cold region (0 = all hits). */
  missShare: Schema.Number,
  /** Cold traffic: frame for the miss object (may be the hot object itself). */
  miss: Schema.NullOr(FrameTemplate),
  /** First cold offset; connection c takes `missStart + (c + k × totalConns) × missStride`, k = 0, 1, … */
  missStart: Schema.Number,
  missStride: Schema.Number,
  /** Cold offsets must satisfy `offset + range ≤ missEnd`. */
  missEnd: Schema.Number,
  /** True when cold requests name the same object as hot ones (so --verify applies to them too). */
  missSameObject: Schema.Boolean,
  seed: Schema.Number,
  /** Local file holding the hot object's bytes; every payload byte is compared with it. */
  verify: Schema.NullOr(Schema.String),
  failFast: Schema.Boolean,
  readBufferBytes: Schema.Int,
  /** Warmup ramp: requests in flight per connection grow from 1 to `depth` over this many ms (0: none). */
  rampMs: Schema.Number
})
export type ThreadSpec = typeof ThreadSpec.Type

/** The measured window as absolute times shared by all threads (ms since the epoch, fractional), and how long the drain may take. */
export const StartSignal = Schema.Struct({ measureFromMs: Schema.Number, measureUntilMs: Schema.Number, drainTimeoutMs: Schema.Number })
export type StartSignal = typeof StartSignal.Type

export const ThreadResult = Schema.Struct({
  /** Successful replies completed inside the measured window. */
  samples: Schema.Number,
  hitSamples: Schema.Number,
  missSamples: Schema.Number,
  /** Successful replies completed at any time (warmup and drain included). */
  replies: Schema.Number,
  /** Payload bytes of successful replies (any time). */
  bytes: Schema.Number,
  /** Payload bytes of successful replies inside the window. */
  measuredBytes: Schema.Number,
  errors: Schema.Number,
  errorFrames: Schema.Number,
  /** Socket reads and writes inside the window: Node pays a JS callback per read and stream work per write. */
  windowReads: Schema.Number,
  windowWrites: Schema.Number,
  firstError: Schema.NullOr(Schema.String),
  /** Compressed HdrHistograms (µs) of hits and misses inside the window. */
  hitHistogram: Schema.String,
  missHistogram: Schema.String
})
export type ThreadResult = typeof ThreadResult.Type

/** A thread could not do what it was asked (connect failed, run before connect, …). */
export class ThreadFailed extends Schema.TaggedError<ThreadFailed>()("ThreadFailed", {
  message: Schema.String
}) {}

/** Opens every connection of `spec`; replies once all are connected. */
export class Connect extends Schema.TaggedRequest<Connect>()("Connect", {
  success: Schema.Void,
  failure: ThreadFailed,
  payload: { spec: ThreadSpec }
}) {}

/** Runs the window that `signal` names on the connected thread; replies after the drain. */
export class Run extends Schema.TaggedRequest<Run>()("Run", {
  success: ThreadResult,
  failure: ThreadFailed,
  payload: { signal: StartSignal }
}) {}

export const ThreadProtocol = Schema.Union(Connect, Run)
export type ThreadMessage = typeof ThreadProtocol.Type

/** The name each thread serves its actor under. */
export const THREAD_ACTOR = "loadgen-thread"
