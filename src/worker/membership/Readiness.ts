/**
 * Whether the worker may serve. The value is immutable and lives in a
 * `SubscriptionRef` (admin, loops and tests follow its changes); the serve
 * loop reads the latest synchronously on every request, so the ref's last
 * value is mirrored in a field only `update` writes.
 */
import { Context, Effect, Layer, Stream, SubscriptionRef } from "effect"

export interface Readiness {
  readonly ready: boolean
  /** Accepted by a coordinator (false when standalone). */
  readonly registered: boolean
  /** The node id in use (resolved once the data listener is bound). */
  readonly nodeId: string
  /** Why the worker is (not) ready, for /readyz. */
  readonly detail: string
  /** The coordinator the last accepted heartbeat went to. */
  readonly coordinator: string | undefined
}

export const initialReadiness: Readiness = { ready: false, registered: false, nodeId: "", detail: "starting", coordinator: undefined }

export class ReadyState {
  #latest: Readiness = initialReadiness
  /** Told when `ready` changes (the hit table must stop answering once the worker is not ready). */
  onChange: ((ready: boolean) => void) | undefined = undefined
  readonly #listeners = new Set<(r: Readiness) => void>()

  constructor(readonly ref: SubscriptionRef.SubscriptionRef<Readiness>) {}

  get current(): Readiness {
    return this.#latest
  }
  get ready(): boolean {
    return this.#latest.ready
  }
  get registered(): boolean {
    return this.#latest.registered
  }
  get nodeId(): string {
    return this.#latest.nodeId
  }
  get detail(): string {
    return this.#latest.detail
  }

  /** Every change, from the current value on. */
  get changes(): Stream.Stream<Readiness> {
    return this.ref.changes
  }

  /** Replaces the fields given; listeners hear of it only when something changed. */
  update(patch: Partial<Readiness>): Effect.Effect<void> {
    return Effect.flatMap(
      SubscriptionRef.modify(this.ref, (r) => {
        const next = { ...r, ...patch }
        const same = (Object.keys(patch) as Array<keyof Readiness>).every((k) => r[k] === next[k])
        return [same ? undefined : ([r, next] as const), same ? r : next] as const
      }),
      (changed) =>
        Effect.sync(() => {
          if (changed === undefined) return
          const [before, after] = changed
          this.#latest = after
          if (before.ready !== after.ready) this.onChange?.(after.ready)
          for (const l of this.#listeners) l(after)
        })
    )
  }

  /** `update` for plain callbacks (IPC handlers) outside any Effect. */
  unsafeUpdate(patch: Partial<Readiness>): void {
    Effect.runSync(this.update(patch))
  }

  /** Calls `listener` after every change until the returned function is called. */
  subscribe(listener: (r: Readiness) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }
}

export const makeReadyState: Effect.Effect<ReadyState> = Effect.map(SubscriptionRef.make(initialReadiness), (ref) => new ReadyState(ref))

export class WorkerReadiness extends Context.Tag("talon/worker/WorkerReadiness")<WorkerReadiness, ReadyState>() {
  static readonly layer = Layer.effect(WorkerReadiness, makeReadyState)
}
