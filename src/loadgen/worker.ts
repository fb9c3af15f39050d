/**
 * One load-generator thread: runs its share of the connections and reports
 * back. Protocol with the main thread: → `ready` once connected, ← `start`
 * (StartSignal), → `result` (ThreadResult) or `failed` (message).
 */
import { parentPort, workerData } from "node:worker_threads"
import { runThread, type StartSignal, type ThreadSpec } from "./engine.js"

export interface WorkerInput {
  readonly spec: ThreadSpec
  readonly progress: SharedArrayBuffer
  readonly slot: number
}

export type WorkerMessage =
  | { readonly type: "ready" }
  | { readonly type: "result"; readonly result: import("./engine.js").ThreadResult }
  | { readonly type: "failed"; readonly message: string }

const port = parentPort!
const input = workerData as WorkerInput
const post = (m: WorkerMessage) => port.postMessage(m)

runThread(
  input.spec,
  () =>
    new Promise<StartSignal>((resolve) => {
      port.once("message", (m: StartSignal) => resolve(m))
      post({ type: "ready" })
    }),
  new Float64Array(input.progress),
  input.slot
).then(
  (result) => post({ type: "result", result }),
  (e: unknown) => post({ type: "failed", message: e instanceof Error ? e.message : String(e) })
)
