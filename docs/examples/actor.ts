import { Effect, Schedule, Schema } from "effect"
import { MessageChannel } from "node:worker_threads"
import { Actor, Channel, Remote, Supervision } from "../../src/index.js"

// The protocol: one Schema.TaggedRequest class per message, naming its reply and failure.
export class UnknownWorker extends Schema.TaggedError<UnknownWorker>()("UnknownWorker", { worker: Schema.String }) {}
export class Register extends Schema.TaggedRequest<Register>()("Register", {
  success: Schema.Int, // the new membership epoch
  failure: Schema.Never,
  payload: { worker: Schema.String, addr: Schema.String }
}) {}
export class Lookup extends Schema.TaggedRequest<Lookup>()("Lookup", {
  success: Schema.String,
  failure: UnknownWorker,
  payload: { worker: Schema.String }
}) {}
export const Registry = Schema.Union(Register, Lookup)

interface State {
  readonly epoch: number
  readonly workers: ReadonlyMap<string, string>
}

// Scoped: the actor's fiber ends with the scope. A handler returns [reply, next state].
export const registry = Actor.make({
  name: "registry",
  protocol: Registry,
  capacity: 1024, // one more waiting message is refused with MailboxFull
  initial: { epoch: 0, workers: new Map() } as State,
  handlers: {
    Register: (s, m) => {
      const next = { epoch: s.epoch + 1, workers: new Map(s.workers).set(m.worker, m.addr) }
      return Effect.succeed([next.epoch, next] as const)
    },
    Lookup: (s, m) => {
      const addr = s.workers.get(m.worker)
      return addr === undefined ? Effect.fail(new UnknownWorker({ worker: m.worker })) : Effect.succeed([addr, s] as const)
    }
  },
  // A handler that dies restarts the actor with a fresh state, at most 5 times.
  supervision: Supervision.restart(Schedule.exponential("10 millis").pipe(Schedule.intersect(Schedule.recurs(5))))
})

export const program = Effect.scoped(
  Effect.gen(function* () {
    const local = yield* registry
    const epoch = yield* local.ask(new Register({ worker: "w1", addr: "10.0.0.1:7001" })) // number
    const missing = yield* Effect.flip(local.ask(new Lookup({ worker: "w9" }))) // UnknownWorker, or an actor error

    // The same actor across a MessagePort (a worker thread, or Channel.fromProcess for a forked child).
    const { port1, port2 } = new MessageChannel()
    yield* Effect.addFinalizer(() => Effect.sync(() => port1.close()))
    yield* Remote.serve(local, Channel.fromPort(port1))
    const remote = yield* Remote.ref(Channel.fromPort(port2), { name: "registry", protocol: Registry })
    const addr = yield* remote.ask(new Lookup({ worker: "w1" })) // string, decoded with Lookup's schema
    return { epoch, missing: missing._tag, addr }
  })
)
