/**
 * `Actor.later`: a handler's reply produced off the actor fiber. The actor takes its next message
 * while the reply is pending; the reply's failure reaches the asker typed; a defect fails only that
 * ask; the pending reply is told the actor stopped when its scope closes.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Schema, Scope } from "effect"
import { Actor, ActorCrashed, ActorStopped } from "../../src/actor/index.js"

class Slow extends Schema.TaggedError<Slow>()("Slow", { detail: Schema.String }) {}
class Wait extends Schema.TaggedRequest<Wait>()("Wait", { success: Schema.String, failure: Slow, payload: { mode: Schema.Literal("ok", "fail", "die") } }) {}
class Count extends Schema.TaggedRequest<Count>()("Count", { success: Schema.Int, failure: Schema.Never, payload: {} }) {}

const make = (gate: Deferred.Deferred<void>) =>
  Actor.make({
    name: "later",
    protocol: Schema.Union(Wait, Count),
    capacity: 16,
    initial: 0,
    handlers: {
      // The state moves now; the reply comes when the gate opens.
      Wait: (n, m) =>
        Effect.succeed([
          Actor.later(
            Deferred.await(gate).pipe(
              Effect.zipRight(m.mode === "ok" ? Effect.succeed(`done after ${n + 1}`) : m.mode === "fail" ? Effect.fail(new Slow({ detail: "origin" })) : Effect.dieMessage("boom"))
            )
          ),
          n + 1
        ] as const),
      Count: (n) => Effect.succeed([n, n] as const)
    }
  })

describe("Actor.later", () => {
  it.live("replies later without holding the mailbox; failures typed, defects confined to their ask", () =>
    Effect.gen(function* () {
      const gate = yield* Deferred.make<void>()
      const actor = yield* make(gate)
      const ok = yield* actor.post(new Wait({ mode: "ok" }))
      const fail = yield* actor.post(new Wait({ mode: "fail" }))
      const die = yield* actor.post(new Wait({ mode: "die" }))
      // All three are pending, yet the actor answers the next message with the state they left.
      expect(yield* actor.ask(new Count())).toBe(3)
      yield* Deferred.succeed(gate, undefined)
      expect(yield* ok).toEqual(Exit.succeed("done after 1"))
      const failed = yield* fail
      expect(Exit.isFailure(failed) && failed.cause._tag === "Fail" && failed.cause.error).toBeInstanceOf(Slow)
      const crashed = yield* Effect.flip(die)
      expect(crashed).toBeInstanceOf(ActorCrashed)
      // A defect in a later reply does not restart the actor: its state is intact.
      expect(yield* actor.ask(new Count())).toBe(3)
    }).pipe(Effect.scoped)
  )

  it.live("a reply still pending when the actor's scope closes fails with ActorStopped", () =>
    Effect.gen(function* () {
      const gate = yield* Deferred.make<void>()
      const scope = yield* Scope.make()
      const actor = yield* Scope.extend(make(gate), scope)
      const pending = yield* actor.post(new Wait({ mode: "ok" }))
      expect(yield* actor.ask(new Count())).toBe(1)
      yield* Scope.close(scope, Exit.void)
      expect(yield* Effect.flip(pending)).toBeInstanceOf(ActorStopped)
    })
  )
})
