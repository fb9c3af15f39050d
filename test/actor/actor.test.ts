import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Schema } from "effect"
import { Actor, ActorStopped, type Handlers, type LocalActorError, MailboxFull } from "../../src/actor/index.js"
import {
  Account,
  type AccountState,
  accountHandlers,
  Balance,
  Deposit,
  emptyAccount,
  makeAccount,
  Note,
  Overdrawn,
  Withdraw
} from "./fixtures/account.js"

/** A protocol whose handler waits on a gate the test opens, to hold the actor busy. */
class Gate extends Schema.TaggedRequest<Gate>()("Gate", { success: Schema.String, failure: Schema.Never, payload: { label: Schema.String } }) {}
class Append extends Schema.TaggedRequest<Append>()("Append", {
  success: Schema.Array(Schema.String),
  failure: Schema.Never,
  payload: { item: Schema.String, pauseMs: Schema.Int }
}) {}
const Busy = Schema.Union(Gate, Append)

const busyActor = (
  capacity: number,
  gate: Deferred.Deferred<void>,
  concurrency = { now: 0, max: 0 },
  entered?: Deferred.Deferred<void>
) =>
  Actor.make({
    name: "busy",
    protocol: Busy,
    capacity,
    initial: [] as ReadonlyArray<string>,
    handlers: {
      Gate: (s, m) =>
        Effect.as(Effect.zipRight(entered ? Deferred.succeed(entered, undefined) : Effect.void, Deferred.await(gate)), [m.label, s] as const),
      Append: (s, m) =>
        Effect.gen(function* () {
          concurrency.max = Math.max(concurrency.max, ++concurrency.now)
          if (m.pauseMs > 0) yield* Effect.sleep(m.pauseMs)
          concurrency.now--
          const next = [...s, m.item]
          return [next, next] as const
        })
    }
  })

describe("Actor ask and tell", () => {
  it.scoped("replies per message type and keeps the state after a declared failure", () =>
    Effect.gen(function* () {
      const account = yield* makeAccount("typed")
      const balance: number = yield* account.ask(new Deposit({ amount: 70 }))
      expect(balance).toBe(70)
      const overdrawn = yield* Effect.flip(account.ask(new Withdraw({ amount: 100 })))
      expect(overdrawn).toEqual(new Overdrawn({ balance: 70, wanted: 100 }))
      expect(yield* account.ask(new Withdraw({ amount: 30 }))).toBe(40)
      yield* account.tell(new Deposit({ amount: 2 }))
      const note = yield* account.ask(new Note({ text: "hi", tags: ["b", "a", "b"] }))
      expect(note.count).toBe(1)
      expect(note.tags).toEqual(["a", "b"])
      expect(yield* account.ask(new Balance())).toBe(42)
      expect(yield* account.askExit(new Withdraw({ amount: 50 }))).toEqual(Exit.fail(new Overdrawn({ balance: 42, wanted: 50 })))
    }))

  it.scoped("types ask by message and handlers by the protocol (checked by tsc --noEmit)", () =>
    Effect.gen(function* () {
      const account = yield* makeAccount("types")
      // @ts-expect-error Balance replies with a number, not a string
      const _wrongReply: Effect.Effect<string, unknown> = account.ask(new Balance())
      // @ts-expect-error Withdraw can fail with Overdrawn, so its error type is more than the actor's errors
      const _undeclared: Effect.Effect<number, LocalActorError> = account.ask(new Withdraw({ amount: 1 }))
      const _declared: Effect.Effect<number, LocalActorError> = account.ask(new Deposit({ amount: 1 }))
      const _wrongHandler: Handlers<Account, AccountState, never> = {
        ...accountHandlers,
        // @ts-expect-error the reply to Balance must be a number
        Balance: (s) => Effect.succeed(["a lot", s] as const)
      }
      void [_wrongReply, _undeclared, _wrongHandler]
      // @ts-expect-error every message of the protocol needs a handler
      const _missing: Handlers<Account, AccountState, never> = { Deposit: accountHandlers.Deposit }
      void _missing
      // @ts-expect-error a message outside the protocol cannot be sent
      yield* Effect.either(account.tell(new Gate({ label: "x" })))
      expect(yield* _declared).toBe(1)
    }))

  it.live("handles messages one at a time in mailbox order", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const concurrency = { now: 0, max: 0 }
        const actor = yield* busyActor(64, yield* Deferred.make<void>(), concurrency)
        const items = Array.from({ length: 20 }, (_, i) => `m${i}`)
        // Posted in order before any reply is awaited; earlier messages take longer to handle.
        const waits = yield* Effect.forEach(items, (item, i) => actor.post(new Append({ item, pauseMs: 20 - i })))
        const replies = yield* Effect.all(waits, { concurrency: "unbounded" })
        replies.forEach((exit, i) => expect(exit).toEqual(Exit.succeed(items.slice(0, i + 1))))
        expect(concurrency.max).toBe(1)
      })
    ))
})

describe("Actor mailbox bound", () => {
  it.scoped("refuses a message beyond capacity with MailboxFull and does not grow", () =>
    Effect.gen(function* () {
      const gate = yield* Deferred.make<void>()
      const entered = yield* Deferred.make<void>()
      const actor = yield* busyActor(2, gate, undefined, entered)
      const held = yield* Effect.fork(actor.ask(new Gate({ label: "held" })))
      yield* Deferred.await(entered) // "held" is off the mailbox and being handled
      const queued = [yield* actor.post(new Gate({ label: "q1" })), yield* actor.post(new Gate({ label: "q2" }))]
      const refused = yield* Effect.forEach(Array.from({ length: 50 }), () => Effect.flip(actor.tell(new Append({ item: "x", pauseMs: 0 }))))
      for (const e of refused) {
        expect(e).toBeInstanceOf(MailboxFull)
        expect(e).toMatchObject({ actor: "busy", capacity: 2 })
        expect(e.message).toContain("mailbox full (2 messages waiting)")
      }
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(held)).toBe("held")
      expect(yield* Effect.all(queued)).toEqual([Exit.succeed("q1"), Exit.succeed("q2")])
      // Drained: it takes messages again, and only the two queued ones were ever handled.
      expect(yield* actor.ask(new Append({ item: "after", pauseMs: 0 }))).toEqual(["after"])
    }))
})

describe("Actor stop and scope", () => {
  it.scoped("stop handles what is queued, then refuses with ActorStopped", () =>
    Effect.gen(function* () {
      const account = yield* makeAccount("stopping")
      const waits = yield* Effect.forEach([1, 2, 3], (amount) => account.post(new Deposit({ amount })))
      yield* account.stop
      expect(yield* Effect.all(waits)).toEqual([Exit.succeed(1), Exit.succeed(3), Exit.succeed(6)])
      const after = yield* Effect.flip(account.ask(new Balance()))
      expect(after).toBeInstanceOf(ActorStopped)
      expect(after.message).toContain("stop was called")
      yield* account.stop // idempotent
    }))

  it.live("closing the scope fails the ask in flight and every queued one with ActorStopped", () =>
    Effect.gen(function* () {
      const gate = yield* Deferred.make<void>()
      const { held, queued } = yield* Effect.scoped(
        Effect.gen(function* () {
          const actor = yield* busyActor(8, gate)
          const held = yield* actor.post(new Gate({ label: "held" }))
          const queued = yield* actor.post(new Append({ item: "q", pauseMs: 0 }))
          return { held, queued }
        })
      )
      for (const e of [yield* Effect.flip(held), yield* Effect.flip(queued)]) {
        expect(e).toBeInstanceOf(ActorStopped)
        expect(e.message).toContain("its scope closed")
      }
    }))

  it.scoped("rejects a capacity that is not a positive integer", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(Actor.make({ name: "bad", protocol: Account, capacity: 0, initial: emptyAccount, handlers: accountHandlers }))
      expect(Exit.isFailure(exit) && String(exit.cause)).toContain("capacity must be a positive integer, got 0")
    }))
})
