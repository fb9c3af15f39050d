/**
 * An actor across a channel (Channel.ts): `serve` answers for a local actor, `ref` returns an
 * `ActorRef` for the actor on the other side, used exactly like a local one.
 *
 * Every message crosses as its protocol Schema's encoded form, every outcome as the request's
 * `Schema.exitSchema` encoding, and the actor's own errors (mailbox full, stopped, crashed) as
 * their Schema classes. Nothing received is trusted: a message that does not decode is refused
 * with `RemoteProtocolError` (the server keeps serving), a reply that does not decode fails
 * that one ask, and a channel that closes fails every waiting ask with `RemoteUnavailable`.
 */
import { Deferred, Effect, Either, Exit, FiberSet, ParseResult, Queue, Schema, type Scope } from "effect"
import { randomUUID } from "node:crypto"
import type { ActorRef, AnyMessage, Failure, Reply } from "./Actor.js"
import type { Channel } from "./Channel.js"
import { type ActorError, RemoteProtocolError, RemoteUnavailable } from "./errors.js"
import * as Wire from "./wire.js"

/** A message that can cross a channel: a `Schema.TaggedRequest` instance. */
export type RemoteMessage = AnyMessage & Schema.WithResult.All

// Failure-free requests type their failure schema as `never`, which no single WithResult type covers.
const withResult = (msg: RemoteMessage) => msg as unknown as Schema.WithResult<any, any, any, any, never>

const parseDetail = (e: ParseResult.ParseError) => ParseResult.TreeFormatter.formatErrorSync(e)

/** Serves `actor` on `channel` until the scope closes. */
export const serve = <Msg extends RemoteMessage, E>(actor: ActorRef<Msg, E>, channel: Channel): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const name = actor.name
    const inbox = yield* Queue.unbounded<unknown>()
    const CLOSED = Symbol("closed")
    const replies = yield* FiberSet.make()
    const unsubscribe = channel.subscribe(
      (raw) => void inbox.unsafeOffer(raw),
      () => void inbox.unsafeOffer(CLOSED)
    )
    yield* Effect.addFinalizer(() => Effect.sync(unsubscribe))

    const send = (message: Wire.ToClient) =>
      Effect.sync(() => {
        try {
          channel.send(message)
        } catch {
          // The peer is gone; its reference fails its own waiters when it sees the close.
        }
      })
    const refuse = (to: { client: string; id: number }, error: unknown) =>
      send({ _tag: `${Wire.PREFIX}Refused`, actor: name, client: to.client, id: to.id, error: encodeRefusal(name, error) })
    const decodeMsg = Schema.decodeUnknownEither(actor.protocol)

    const handle = (raw: unknown): Effect.Effect<void, never, Scope.Scope> => {
      const to = Wire.addressOf(raw)
      if (!to || to.actor !== name) return Effect.void // another actor's, or not actor traffic at all
      const envelope = Schema.decodeUnknownEither(Wire.ToServer)(raw)
      if (Either.isLeft(envelope)) {
        return refuse(to, new RemoteProtocolError({ actor: name, detail: `malformed envelope: ${parseDetail(envelope.left)}` }))
      }
      const env = envelope.right
      if (env._tag === `${Wire.PREFIX}Stop`) {
        return FiberSet.run(replies, Effect.zipRight(actor.stop, send({ ...env, _tag: `${Wire.PREFIX}Accepted` }))).pipe(Effect.asVoid)
      }
      const decoded = decodeMsg(env.msg)
      if (Either.isLeft(decoded)) {
        const detail = `could not decode message #${env.id}: ${parseDetail(decoded.left)}`
        return refuse(env, new RemoteProtocolError({ actor: name, detail }))
      }
      const msg = decoded.right
      if (env._tag === `${Wire.PREFIX}Tell`) {
        return actor.tell(msg).pipe(
          Effect.matchEffect({
            onFailure: (e) => refuse(env, e),
            onSuccess: () => send({ _tag: `${Wire.PREFIX}Accepted`, actor: name, client: env.client, id: env.id })
          })
        )
      }
      // Posted here, in arrival order; only the wait for the outcome runs on its own fiber.
      return actor.post(msg).pipe(
        Effect.matchEffect({
          onFailure: (e) => refuse(env, e),
          onSuccess: (wait) =>
            FiberSet.run(
              replies,
              wait.pipe(
                Effect.matchEffect({
                  onFailure: (e) => refuse(env, e),
                  onSuccess: (exit) =>
                    Schema.serializeExit(withResult(msg), exit).pipe(
                      Effect.matchEffect({
                        onFailure: (e) =>
                          refuse(env, new RemoteProtocolError({ actor: name, detail: `the reply to ${msg._tag} does not encode: ${parseDetail(e)}` })),
                        onSuccess: (encoded) =>
                          send({ _tag: `${Wire.PREFIX}Exit`, actor: name, client: env.client, id: env.id, exit: encoded })
                      })
                    )
                })
              )
            ).pipe(Effect.asVoid)
        })
      )
    }

    yield* Effect.forkScoped(
      Effect.gen(function* () {
        for (;;) {
          const raw = yield* Queue.take(inbox)
          if (raw === CLOSED) return
          yield* handle(raw)
        }
      })
    )
  })

const encodeRefusal = (actor: string, error: unknown): unknown => {
  const encoded = Schema.encodeEither(Wire.Refusal)(error as Wire.Refusal)
  if (Either.isRight(encoded)) return encoded.right
  const detail = `the actor failed with something other than an actor error: ${String(error)}`
  return Schema.encodeSync(Wire.Refusal)(new RemoteProtocolError({ actor, detail }))
}

interface Waiter {
  readonly msg: RemoteMessage | undefined
  readonly done: Deferred.Deferred<Exit.Exit<any, any>, ActorError>
}

export interface RemoteOptions<Msg> {
  /** The served actor's name (`serve` answers only messages addressed to it). */
  readonly name: string
  readonly protocol: Schema.Schema<Msg, any>
}

/** A reference to the actor `name` served on the other end of `channel`, valid until the scope closes. */
export const ref = <Msg extends RemoteMessage>(
  channel: Channel,
  options: RemoteOptions<Msg>
): Effect.Effect<ActorRef<Msg, ActorError>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { name, protocol } = options
    const client = randomUUID()
    const waiters = new Map<number, Waiter>()
    let nextId = 0
    let closed: RemoteUnavailable | undefined

    const close = (reason: string) => {
      closed ??= new RemoteUnavailable({ actor: name, reason })
      for (const w of waiters.values()) Deferred.unsafeDone(w.done, Exit.fail(closed))
      waiters.clear()
    }
    const settle = (id: number, outcome: Exit.Exit<Exit.Exit<any, any>, ActorError>) => {
      const w = waiters.get(id)
      if (!w) return
      waiters.delete(id)
      Deferred.unsafeDone(w.done, outcome)
    }
    const protocolError = (detail: string) => Exit.fail(new RemoteProtocolError({ actor: name, detail }))

    const onMessage = (raw: unknown) => {
      const to = Wire.addressOf(raw)
      if (!to || to.actor !== name || to.client !== client) return
      const decoded = Schema.decodeUnknownEither(Wire.ToClient)(raw)
      if (Either.isLeft(decoded)) return settle(to.id, protocolError(`malformed reply: ${parseDetail(decoded.left)}`))
      const reply = decoded.right
      if (reply._tag === `${Wire.PREFIX}Accepted`) return settle(reply.id, Exit.succeed(Exit.void))
      if (reply._tag === `${Wire.PREFIX}Refused`) {
        const error = Schema.decodeUnknownEither(Wire.Refusal)(reply.error)
        return settle(reply.id, Either.isRight(error) ? Exit.fail(error.right) : protocolError(`malformed refusal: ${parseDetail(error.left)}`))
      }
      const msg = waiters.get(reply.id)?.msg
      if (!msg) return settle(reply.id, protocolError(`an outcome came for #${reply.id}, which was not an ask`))
      const exit = Schema.decodeUnknownEither(Schema.exitSchema(withResult(msg)))(reply.exit)
      settle(
        reply.id,
        Either.isRight(exit) ? Exit.succeed(exit.right) : protocolError(`the reply to ${msg._tag} does not decode: ${parseDetail(exit.left)}`)
      )
    }
    const unsubscribe = channel.subscribe(onMessage, close)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        unsubscribe()
        close("the reference's scope closed")
      })
    )

    const encodeMsg = Schema.encodeEither(protocol)
    const transmit = (kind: "Ask" | "Tell" | "Stop", msg: RemoteMessage | undefined) =>
      Effect.flatMap(Deferred.make<Exit.Exit<any, any>, ActorError>(), (done) =>
        Effect.suspend((): Effect.Effect<Effect.Effect<Exit.Exit<any, any>, ActorError>, ActorError> => {
          if (closed) return Effect.fail(closed)
          let wire: unknown
          if (msg) {
            const encoded = encodeMsg(msg as Msg)
            if (Either.isLeft(encoded)) {
              return Effect.fail(new RemoteProtocolError({ actor: name, detail: `could not encode ${msg._tag}: ${parseDetail(encoded.left)}` }))
            }
            wire = encoded.right
          }
          const id = nextId++
          waiters.set(id, { msg: kind === "Ask" ? msg : undefined, done })
          try {
            channel.send({ _tag: `${Wire.PREFIX}${kind}`, actor: name, client, id, ...(msg ? { msg: wire } : {}) })
          } catch (e) {
            close(e instanceof Error ? e.message : String(e))
          }
          return Effect.succeed(Deferred.await(done))
        })
      )

    const remote: ActorRef<Msg, ActorError> = {
      name,
      protocol,
      post: <M extends Msg>(msg: M) =>
        transmit("Ask", msg) as Effect.Effect<Effect.Effect<Exit.Exit<Reply<M>, Failure<M>>, ActorError>, ActorError>,
      askExit: (msg) => Effect.flatten(remote.post(msg)),
      ask: (msg) => Effect.flatten(Effect.flatten(remote.post(msg))),
      tell: (msg) => Effect.asVoid(Effect.flatten(transmit("Tell", msg))),
      stop: Effect.ignore(Effect.flatten(transmit("Stop", undefined)))
    }
    return remote
  })
