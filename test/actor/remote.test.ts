import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Effect, Either, Exit, FastCheck as fc, Logger, LogLevel, Runtime, Schema, type Scope } from "effect"
import { fork } from "node:child_process"
import { fileURLToPath } from "node:url"
import { MessageChannel, Worker } from "node:worker_threads"
import {
  type ActorError,
  type ActorRef,
  ActorStopped,
  Channel,
  MailboxFull,
  Remote,
  RemoteProtocolError,
  RemoteUnavailable
} from "../../src/actor/index.js"
import { bundledScript } from "../support/bundledScript.js"
import { Account, Answering, Balance, Crash, Deposit, Hang, makeAccount, Note, Withdraw } from "./fixtures/account.js"

const untilReady = (channel: Channel.Channel) =>
  Effect.async<void>((resume) => {
    // The canceler runs only on interruption, so each outcome unsubscribes itself.
    const settle = (outcome: Effect.Effect<void>) => {
      unsubscribe()
      resume(outcome)
    }
    const unsubscribe = channel.subscribe(
      (m) => m === "ready" && settle(Effect.void),
      (reason) => settle(Effect.dieMessage(`the server went away before it was ready: ${reason}`))
    )
    return Effect.sync(unsubscribe)
  })

// The thread and the child run the fixtures bundled (test/support/bundledScript.ts), not through tsx.
const threadScript = fileURLToPath(new URL("./fixtures/thread.ts", import.meta.url))

/** A worker thread serving the accounts on a MessagePort transferred to it; terminated with the scope. */
const startThread: Effect.Effect<{ worker: Worker; channel: Channel.Channel }, never, Scope.Scope> = Effect.gen(function* () {
  const { port1, port2 } = new MessageChannel()
  const worker = yield* Effect.acquireRelease(
    Effect.promise(() => bundledScript(threadScript)).pipe(
      Effect.map((script) => new Worker(script, { workerData: { port: port2 }, transferList: [port2] }))
    ),
    (w) => Effect.promise(() => w.terminate()).pipe(Effect.zipRight(Effect.sync(() => port1.close())))
  )
  worker.on("error", (e) => console.error("account thread failed:", e))
  const channel = Channel.fromPort(port1)
  yield* untilReady(channel)
  return { worker, channel }
})

const childScript = fileURLToPath(new URL("./fixtures/child.ts", import.meta.url))

/** A child process (child_process.fork, JSON IPC) serving the accounts; killed and awaited with the scope. */
const startChild = Effect.gen(function* () {
  const child = yield* Effect.acquireRelease(
    Effect.promise(() => bundledScript(childScript)).pipe(
      Effect.map((script) => fork(script, [], { execArgv: [], stdio: ["ignore", "inherit", "inherit", "ipc"] }))
    ),
    (c) =>
      Effect.async<void>((resume) => {
        if (c.exitCode !== null || c.signalCode !== null) return resume(Effect.void)
        c.once("exit", () => resume(Effect.void))
        c.kill()
      })
  )
  const channel = Channel.fromProcess(child)
  yield* untilReady(channel)
  return { child, channel }
})

type Outcome = Either.Either<Exit.Exit<unknown, unknown> | "accepted", ActorError>

/** Posts every message first (asks, or tells where `tell` says so), then collects the outcomes in order. */
const drive = (ref: ActorRef<Account, ActorError>, msgs: ReadonlyArray<readonly [Account, boolean]>) =>
  Effect.gen(function* () {
    const waits: Array<Effect.Effect<Outcome>> = []
    for (const [msg, tell] of msgs) {
      if (tell) {
        // A tell is handed over before the next message is posted; only asks are left waiting.
        waits.push(Effect.succeed(yield* Effect.either(Effect.as(ref.tell(msg), "accepted" as const))))
        continue
      }
      const posted = yield* Effect.either(ref.post(msg))
      waits.push(Either.isLeft(posted) ? Effect.succeed(Either.left(posted.left)) : Effect.either(posted.right))
    }
    return yield* Effect.all(waits)
  })

/** Arbitrary protocol messages give the same replies and failures from the remote actor as from a local one. */
const sameAsLocal = (channel: Channel.Channel, runs: number) =>
  Effect.gen(function* () {
    const remote = yield* Remote.ref(channel, { name: "account", protocol: Account })
    // Both live across all runs and see the same messages, so their states stay in step.
    const local = yield* makeAccount("account").pipe(Logger.withMinimumLogLevel(LogLevel.Error))
    const runtime = yield* Effect.runtime<never>()
    const messages = fc.array(fc.tuple(Arbitrary.make(Answering), fc.boolean()), { maxLength: 12 })
    yield* Effect.promise(() =>
      fc.assert(
        fc.asyncProperty(messages, async (msgs) => {
          const [mine, theirs] = await Runtime.runPromise(runtime)(Effect.all([drive(local, msgs), drive(remote, msgs)]))
          expect(theirs).toEqual(mine)
        }),
        { numRuns: runs }
      )
    )
    // The runs did reach the actor: a last deposit shows the balance both agree on.
    expect(yield* remote.ask(new Deposit({ amount: 1 }))).toBe(yield* local.ask(new Deposit({ amount: 1 })))
  })

describe("Remote actor over a worker_threads MessagePort", () => {
  it.scopedLive("answers arbitrary messages exactly as the local actor does", () =>
    Effect.gen(function* () {
      yield* sameAsLocal((yield* startThread).channel, 40)
    }))

  it.scopedLive("fails a waiting ask with RemoteUnavailable when the thread goes away", () =>
    Effect.gen(function* () {
      const { worker, channel } = yield* startThread
      const small = yield* Remote.ref(channel, { name: "small", protocol: Account })
      const waiting = yield* small.post(new Hang())
      yield* Effect.promise(() => worker.terminate())
      const e = yield* Effect.flip(waiting)
      expect(e).toBeInstanceOf(RemoteUnavailable)
      expect(e.message).toContain("message port closed")
      expect(yield* Effect.flip(small.ask(new Balance()))).toEqual(e)
    }))
})

describe("Remote actor over child_process IPC", () => {
  it.scopedLive("answers arbitrary messages exactly as the local actor does", () =>
    Effect.gen(function* () {
      const { channel } = yield* startChild
      yield* sameAsLocal(channel, 40)
    }))

  it.scopedLive("carries typed failures, crashes, a full mailbox and stop as the same errors", () =>
    Effect.gen(function* () {
      const { channel } = yield* startChild
      const account = yield* Remote.ref(channel, { name: "account", protocol: Account })
      expect(yield* account.ask(new Deposit({ amount: 10 }))).toBe(10)
      const overdrawn = yield* Effect.flip(account.ask(new Withdraw({ amount: 11 })))
      expect(overdrawn).toMatchObject({ _tag: "Overdrawn", balance: 10, wanted: 11 })
      expect(yield* Effect.flip(account.ask(new Crash({ why: "remote boom" })))).toMatchObject({
        _tag: "ActorCrashed",
        actor: "account",
        defect: "Error: remote boom"
      })
      const note = yield* account.ask(new Note({ text: "after restart", tags: [] }))
      expect(note.count).toBe(1) // restarted with a fresh state

      // "small" holds one waiting message: with Hang in its handler, the second and third are refused.
      // A remote post cannot know at once, so the refusal arrives through the wait.
      const small = yield* Remote.ref(channel, { name: "small", protocol: Account })
      yield* small.post(new Hang())
      const waits = yield* Effect.forEach([1, 2, 3], () => small.post(new Balance()))
      for (const wait of waits.slice(1)) expect(yield* Effect.flip(wait)).toEqual(new MailboxFull({ actor: "small", capacity: 1 }))

      yield* account.stop
      const stopped = yield* Effect.flip(account.ask(new Balance()))
      expect(stopped).toEqual(new ActorStopped({ actor: "account", reason: "stop was called" }))
    }))

  it.scopedLive("refuses what does not decode with RemoteProtocolError and keeps serving", () =>
    Effect.gen(function* () {
      const { channel } = yield* startChild
      class DepositText extends Schema.TaggedRequest<DepositText>()("Deposit", {
        success: Schema.Int,
        failure: Schema.Never,
        payload: { amount: Schema.String }
      }) {}
      class BalanceText extends Schema.TaggedRequest<BalanceText>()("Balance", { success: Schema.String, failure: Schema.Never, payload: {} }) {}
      const other = yield* Remote.ref(channel, { name: "account", protocol: Schema.Union(DepositText, BalanceText) })
      const badMessage = yield* Effect.flip(other.ask(new DepositText({ amount: "ten" })))
      expect(badMessage).toBeInstanceOf(RemoteProtocolError)
      expect(badMessage.message).toMatch(/could not decode message #0: .*Expected an integer|could not decode message #0/s)
      const badReply = yield* Effect.flip(other.ask(new BalanceText()))
      expect(badReply).toBeInstanceOf(RemoteProtocolError)
      expect(badReply.message).toContain("the reply to Balance does not decode")

      // A malformed envelope for the actor is refused; traffic that is not for an actor is ignored.
      const replies: Array<unknown> = []
      const unsubscribe = channel.subscribe((m) => void replies.push(m), () => undefined)
      channel.send({ note: "not actor traffic" })
      channel.send({ _tag: "talon.actor/Nonsense", actor: "account", client: "raw", id: 7 })
      channel.send({ _tag: "talon.actor/Ask", actor: "account", client: "raw", id: 8 })
      const account = yield* Remote.ref(channel, { name: "account", protocol: Account })
      expect(yield* account.ask(new Deposit({ amount: 3 }))).toBe(3)
      unsubscribe()
      const refusals = replies.filter((m) => (m as { client?: string }).client === "raw") as Array<{
        _tag: string
        id: number
        error: { _tag: string; detail: string }
      }>
      expect(refusals.map((r) => [r._tag, r.id, r.error._tag])).toEqual([
        ["talon.actor/Refused", 7, "RemoteProtocolError"],
        ["talon.actor/Refused", 8, "RemoteProtocolError"]
      ])
      expect(refusals[0]!.error.detail).toContain("malformed envelope")
      expect(refusals[1]!.error.detail).toContain("could not decode message #8")
    }))

  it.scopedLive("fails a waiting ask with RemoteUnavailable when the process exits", () =>
    Effect.gen(function* () {
      const { child, channel } = yield* startChild
      const small = yield* Remote.ref(channel, { name: "small", protocol: Account })
      const waiting = yield* small.post(new Hang())
      child.kill("SIGKILL")
      const e = yield* Effect.flip(waiting)
      expect(e).toBeInstanceOf(RemoteUnavailable)
      expect(e.message).toMatch(/IPC channel disconnected|process exited/)
      expect(yield* Effect.flip(small.ask(new Balance()))).toEqual(e)
    }))
})
