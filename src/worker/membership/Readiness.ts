import { Context, Layer } from "effect"

/**
 * Whether the worker may serve: set by Membership once registered with the
 * coordinator (or at once when standalone). Read per request by the serve
 * loop, so it is a plain mutable record rather than a Ref.
 */
export class ReadyState {
  #ready = false
  /** Told when `ready` changes (the hit table must stop answering once the worker is not ready). */
  onChange: ((ready: boolean) => void) | undefined = undefined

  get ready(): boolean {
    return this.#ready
  }

  set ready(value: boolean) {
    if (value === this.#ready) return
    this.#ready = value
    this.onChange?.(value)
  }
  /** Registered with a coordinator (false when standalone). */
  registered = false
  /** The node id in use (resolved once the data listener is bound). */
  nodeId = ""
  /** Why the worker is not ready, for /readyz. */
  detail = "starting"
}

export class WorkerReadiness extends Context.Tag("talon/worker/WorkerReadiness")<WorkerReadiness, ReadyState>() {
  static readonly layer = Layer.sync(WorkerReadiness, () => new ReadyState())
}
