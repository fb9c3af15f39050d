/**
 * A typed actor on Effect primitives: one fiber owns the state and handles the messages of a
 * bounded mailbox one at a time, in the order they arrived.
 *
 * The protocol is a union of `Schema.TaggedRequest` classes, so each message names its reply
 * and failure types: `ask(msg)` is typed per message, `tell(msg)` enqueues and forgets. A
 * handler's declared failure goes back to the asker and leaves the state as it was; a defect
 * crashes the actor (the asker gets `ActorCrashed`) and supervision decides whether it restarts
 * (see Supervision.ts). A full mailbox is a `MailboxFull` error at once, never a longer queue.
 */
import { Cause, Deferred, Effect, Equal, Exit, Fiber, Option, Queue, type Request, type Schema, type Scope } from "effect"
import { ActorCrashed, ActorStopped, type LocalActorError, MailboxFull } from "./errors.js"
import { describeDefect, none, type Supervision, supervise } from "./Supervision.js"

/** Any message type: a request with a tag (every `Schema.TaggedRequest` class is one). */
export type AnyMessage = Request.Request<any, any> & { readonly _tag: string }
export type Reply<M> = M extends Request.Request<infer A, infer _E> ? A : never
export type Failure<M> = M extends Request.Request<infer _A, infer E> ? E : never

/** A handle on an actor; a remote reference (Remote.ts) has the same shape, with `E` widened by channel errors. */
export interface ActorRef<Msg extends AnyMessage, E = LocalActorError> {
  readonly name: string
  /** The union schema of the messages, used to carry them across a channel. */
  readonly protocol: Schema.Schema<Msg, any>
  /** Sends `msg` and waits for the handler's reply or declared failure. */
  ask<M extends Msg>(msg: M): Effect.Effect<Reply<M>, Failure<M> | E>
  /** Like `ask`, with the handler's outcome as an Exit, apart from the actor's own errors. */
  askExit<M extends Msg>(msg: M): Effect.Effect<Exit.Exit<Reply<M>, Failure<M>>, E>
  /**
   * Enqueues `msg` now (or fails now) and returns the wait for its outcome, so a caller can
   * post several messages in order before waiting for any. A remote reference sends `msg` now
   * and reports a refusal (e.g. `MailboxFull`) through the wait.
   */
  post<M extends Msg>(msg: M): Effect.Effect<Effect.Effect<Exit.Exit<Reply<M>, Failure<M>>, E>, E>
  /** Enqueues `msg` without waiting for it to be handled; a declared failure is only logged. */
  tell(msg: Msg): Effect.Effect<void, E>
  /** Refuses new messages, lets the queued ones be handled, then ends the actor. */
  readonly stop: Effect.Effect<void>
}

type Tagged<Msg, K> = Extract<Msg, { readonly _tag: K }>

const LaterTypeId: unique symbol = Symbol.for("talon/actor/Later")

/** A reply a handler leaves to work that runs on its own fiber (see `later`). */
export interface Later<A, E> {
  readonly [LaterTypeId]: typeof LaterTypeId
  readonly effect: Effect.Effect<A, E>
}

/**
 * Replies with `effect`'s outcome without holding the mailbox: the handler's next state is in
 * place at once and the actor takes its next message while `effect` runs (slow I/O that needs
 * no state, e.g. an origin request). A defect in it fails that one ask with `ActorCrashed` and
 * does not restart the actor; it is interrupted when the actor's scope closes (`ActorStopped`).
 * Work that must touch the state again when it is done asks the actor itself.
 */
export const later = <A, E>(effect: Effect.Effect<A, E>): Later<A, E> => ({ [LaterTypeId]: LaterTypeId, effect })

const isLater = (u: unknown): u is Later<unknown, unknown> => typeof u === "object" && u !== null && LaterTypeId in u

/** One handler per message tag: from the state and the message, the reply (now, or `later`) and the next state. */
export type Handlers<Msg extends AnyMessage, S, R> = {
  readonly [K in Msg["_tag"]]: (
    state: S,
    msg: Tagged<Msg, K>
  ) => Effect.Effect<
    readonly [Reply<Tagged<Msg, K>> | Later<Reply<Tagged<Msg, K>>, Failure<Tagged<Msg, K>>>, S],
    Failure<Tagged<Msg, K>>,
    R
  >
}

export interface ActorOptions<Msg extends AnyMessage, S, R> {
  readonly name: string
  readonly protocol: Schema.Schema<Msg, any>
  /** Most messages waiting in the mailbox; one more is refused with `MailboxFull`. */
  readonly capacity: number
  /** The state of each incarnation; an Effect is run again on every restart. */
  readonly initial: S | Effect.Effect<S, never, R>
  readonly handlers: Handlers<Msg, S, R>
  /** Default: no restarts (`Supervision.none`). */
  readonly supervision?: Supervision
}

interface Envelope {
  readonly msg: AnyMessage
  readonly reply: Deferred.Deferred<Exit.Exit<any, any>, LocalActorError> | undefined
}
const STOP = Symbol("stop")

/** Starts an actor whose fiber lives as long as the enclosing scope (or until `stop`). */
export const make = <Msg extends AnyMessage, S, R = never>(
  options: ActorOptions<Msg, S, R>
): Effect.Effect<ActorRef<Msg>, never, Scope.Scope | R> =>
  Effect.gen(function* () {
    const { name, capacity } = options
    if (!Number.isInteger(capacity) || capacity < 1) {
      return yield* Effect.dieMessage(`actor ${name}: capacity must be a positive integer, got ${capacity}`)
    }
    const mailbox = yield* Queue.unbounded<Envelope | typeof STOP>()
    const done = yield* Deferred.make<void>()
    // Plain variables: each check-and-enqueue below runs without yielding, so no other fiber
    // can slip in between the bound check and the offer.
    let waiting = 0
    let stopped: ActorStopped | undefined
    let current: Envelope | undefined
    const scope = yield* Effect.scope

    const enqueue = (env: Envelope): Effect.Effect<void, LocalActorError> =>
      Effect.suspend((): Effect.Effect<void, LocalActorError> => {
        if (stopped) return Effect.fail(stopped)
        if (waiting >= capacity) return Effect.fail(new MailboxFull({ actor: name, capacity }))
        waiting++
        mailbox.unsafeOffer(env)
        return Effect.void
      })

    const handlers = options.handlers as unknown as Record<
      string,
      (s: S, m: AnyMessage) => Effect.Effect<readonly [unknown, S], unknown, R>
    >
    const incarnation: Effect.Effect<void, Cause.Cause<unknown>, R> = Effect.gen(function* () {
      let state = Effect.isEffect(options.initial) ? yield* (options.initial as Effect.Effect<S, never, R>) : (options.initial as S)
      for (;;) {
        const item = yield* Queue.take(mailbox)
        if (item === STOP) return
        waiting--
        current = item
        const handler = handlers[item.msg._tag]
        const exit = yield* Effect.exit(
          handler ? handler(state, item.msg) : Effect.dieMessage(`no handler for message ${item.msg._tag}`)
        )
        current = undefined
        if (Exit.isSuccess(exit)) {
          state = exit.value[1]
          const reply = exit.value[0]
          if (isLater(reply)) yield* Effect.forkIn(settleLater(item, reply), scope)
          else if (item.reply) Deferred.unsafeDone(item.reply, Exit.succeed(Exit.succeed(reply)))
          continue
        }
        const failure = Cause.failureOption(exit.cause)
        if (Option.isSome(failure) && !Cause.isDie(exit.cause) && !Cause.isInterrupted(exit.cause)) {
          if (item.reply) Deferred.unsafeDone(item.reply, Exit.succeed(Exit.fail(failure.value)))
          else yield* Effect.logDebug(`actor ${name}: told ${item.msg._tag} failed: ${describeDefect(exit.cause)}`)
          continue
        }
        if (stopped !== undefined && Cause.isInterruptedOnly(exit.cause)) {
          // The scope closed while a handler was running: that is shutdown, not a crash.
          if (item.reply) Deferred.unsafeDone(item.reply, Exit.fail(stopped))
          return
        }
        if (item.reply) {
          const crashed = new ActorCrashed({ actor: name, request: item.msg._tag, defect: describeDefect(exit.cause) })
          Deferred.unsafeDone(item.reply, Exit.fail(crashed))
        }
        return yield* Effect.fail(exit.cause)
      }
    })

    const settleLater = (item: Envelope, reply: Later<unknown, unknown>) =>
      Effect.exit(reply.effect).pipe(
        Effect.flatMap((exit) => {
          if (Exit.isSuccess(exit) || (!Cause.isDie(exit.cause) && Option.isSome(Cause.failureOption(exit.cause)))) {
            if (item.reply) Deferred.unsafeDone(item.reply, Exit.succeed(exit))
            else if (Exit.isFailure(exit)) return Effect.logDebug(`actor ${name}: told ${item.msg._tag} failed: ${describeDefect(exit.cause)}`)
            return Effect.void
          }
          const error = Cause.isInterruptedOnly(exit.cause)
            ? new ActorStopped({ actor: name, reason: "its scope closed" })
            : new ActorCrashed({ actor: name, request: item.msg._tag, defect: describeDefect(exit.cause) })
          if (item.reply) Deferred.unsafeDone(item.reply, Exit.fail(error))
          return Effect.void
        }),
        Effect.onInterrupt(() =>
          Effect.sync(() => item.reply && Deferred.unsafeDone(item.reply, Exit.fail(new ActorStopped({ actor: name, reason: "its scope closed" }))))
        )
      )

    // Every message still waiting when the actor ends gets the reason, none waits forever.
    const finish = (reason: string) =>
      Effect.gen(function* () {
        const why = (stopped ??= new ActorStopped({ actor: name, reason }))
        const left = yield* Queue.takeAll(mailbox)
        waiting = 0
        for (const env of [...(current ? [current] : []), ...left]) {
          if (env !== STOP && env.reply) Deferred.unsafeDone(env.reply, Exit.fail(why))
        }
        current = undefined
        yield* Deferred.succeed(done, undefined)
      })

    const fiber = yield* supervise(name, incarnation, options.supervision ?? none).pipe(
      Effect.flatMap(finish),
      Effect.forkScoped
    )
    // Added after forkScoped, so it runs before the fiber is interrupted: refuse first, then end.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        stopped ??= new ActorStopped({ actor: name, reason: "its scope closed" })
        yield* Fiber.interrupt(fiber)
        yield* finish("its scope closed")
      })
    )

    const post = (msg: AnyMessage) =>
      Effect.gen(function* () {
        const reply = yield* Deferred.make<Exit.Exit<any, any>, LocalActorError>()
        yield* enqueue({ msg, reply })
        return Deferred.await(reply)
      })

    const ref: ActorRef<Msg> = {
      name,
      protocol: options.protocol,
      post,
      askExit: (msg) => Effect.flatten(post(msg)),
      ask: (msg) => Effect.flatten(Effect.flatten(post(msg))),
      tell: (msg) => enqueue({ msg, reply: undefined }),
      stop: Effect.fiberIdWith((self) => {
        if (!stopped) {
          stopped = new ActorStopped({ actor: name, reason: "stop was called" })
          mailbox.unsafeOffer(STOP)
        }
        // A handler stopping its own actor must not wait for itself to end.
        return Equal.equals(self, fiber.id()) ? Effect.void : Deferred.await(done)
      })
    }
    return ref
  })
