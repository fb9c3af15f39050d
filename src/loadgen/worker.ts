/**
 * One load-generator thread: an actor (src/actor) served over the thread's parent port, so the
 * controller talks to it with the Schema-typed requests of threadMessages.ts. `Connect` opens the
 * thread's share of the connections; `Run` runs the measured window on them and replies with
 * the thread's counts. The request loop itself (engine.ts) is plain TypeScript.
 */
import { parentPort, workerData } from "node:worker_threads"
import { Effect } from "effect"
import { Actor, Channel, Remote } from "../actor/index.js"
import { type ConnectedThread, connectThread } from "./engine.js"
import { THREAD_ACTOR, ThreadFailed, type ThreadMessage, ThreadProtocol } from "./threadMessages.js"

/** The thread's `workerData`: shared memory is no message, so it comes at start. */
export interface WorkerInput {
  /** One float64 per thread: replies so far, read by the controller for progress lines. */
  readonly progress: SharedArrayBuffer
  readonly slot: number
}

interface State {
  readonly thread: ConnectedThread | null
}

const input = workerData as WorkerInput
const progress = new Float64Array(input.progress)
const failed = (e: unknown) => new ThreadFailed({ message: e instanceof Error ? e.message : String(e) })

const serve = Effect.gen(function* () {
  const actor = yield* Actor.make<ThreadMessage, State>({
    name: THREAD_ACTOR,
    protocol: ThreadProtocol,
    capacity: 4,
    initial: { thread: null },
    handlers: {
      Connect: (state, { spec }) =>
        state.thread !== null
          ? Effect.fail(new ThreadFailed({ message: `loadgen thread ${input.slot} is already connected` }))
          : Effect.tryPromise({ try: () => connectThread(spec, progress, input.slot), catch: failed }).pipe(
              Effect.map((thread) => [undefined, { thread }] as const)
            ),
      Run: (state, { signal }) =>
        state.thread === null
          ? Effect.fail(new ThreadFailed({ message: `loadgen thread ${input.slot} got Run before Connect` }))
          : Effect.tryPromise({ try: () => state.thread!.run(signal), catch: failed }).pipe(Effect.map((result) => [result, state] as const))
    }
  })
  yield* Remote.serve(actor, Channel.fromPort(parentPort!))
  // Serves until the controller terminates the thread.
  return yield* Effect.never
})

Effect.runFork(Effect.scoped(serve))
