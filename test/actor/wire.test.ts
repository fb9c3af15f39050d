import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc, Logger, LogLevel, Runtime } from "effect"
import { MessageChannel } from "node:worker_threads"
import { Channel, Remote } from "../../src/actor/index.js"
import { Account, Balance, Deposit, makeAccount } from "./fixtures/account.js"

/** Sends `raw` on `channel` and waits for the reply addressed to `client`/`id`, if one is due. */
const exchange = (channel: Channel.Channel, raw: unknown, client: string, id: number) =>
  Effect.async<unknown>((resume) => {
    // The canceler runs only on interruption, so each outcome unsubscribes itself.
    const settle = (outcome: Effect.Effect<unknown>) => {
      unsubscribe()
      resume(outcome)
    }
    const unsubscribe = channel.subscribe(
      (m) => {
        const r = m as { client?: unknown; id?: unknown }
        if (r !== null && typeof r === "object" && r.client === client && r.id === id) settle(Effect.succeed(m))
      },
      (reason) => settle(Effect.dieMessage(reason))
    )
    channel.send(raw)
    return Effect.sync(unsubscribe)
  })

describe("Remote serving of arbitrary data", () => {
  it.scopedLive("never throws: junk is ignored, malformed actor traffic is refused, and serving goes on", () =>
    Effect.gen(function* () {
      const { port1, port2 } = new MessageChannel()
      yield* Effect.addFinalizer(() => Effect.sync(() => port1.close()))
      const account = yield* makeAccount("account").pipe(Logger.withMinimumLogLevel(LogLevel.Error))
      yield* Remote.serve(account, Channel.fromPort(port1))
      const peer = Channel.fromPort(port2)
      const remote = yield* Remote.ref(peer, { name: "account", protocol: Account })
      const runtime = yield* Effect.runtime<never>()
      let id = 0

      const tags = fc.constantFrom("talon.actor/Ask", "talon.actor/Tell", "talon.actor/Stop", "talon.actor/Exit", "Deposit")
      const envelope = fc.record(
        { _tag: tags, actor: fc.constant("account"), msg: fc.oneof(fc.anything(), fc.record({ _tag: fc.constantFrom("Deposit", "Balance"), amount: fc.anything() })) },
        { requiredKeys: ["_tag", "actor"] }
      )
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(fc.anything(), envelope, async (junk, env) => {
            await Runtime.runPromise(runtime)(
              Effect.gen(function* () {
                peer.send(junk) // not addressed to any actor: ignored
                const n = id++
                if (env._tag === "talon.actor/Stop" || env._tag === "talon.actor/Exit" || env._tag === "Deposit") {
                  peer.send({ ...env, client: "fuzz", id: n, _tag: env._tag === "talon.actor/Stop" ? "talon.actor/Nonsense" : env._tag })
                } else {
                  const reply = (yield* exchange(peer, { ...env, client: "fuzz", id: n }, "fuzz", n)) as { _tag: string; error?: { _tag: string } }
                  // Anything that decodes was served; anything else was refused with a protocol error.
                  if (reply._tag === "talon.actor/Refused") expect(["RemoteProtocolError", "MailboxFull"]).toContain(reply.error?._tag)
                  else expect(["talon.actor/Exit", "talon.actor/Accepted"]).toContain(reply._tag)
                }
                const before = yield* remote.ask(new Balance())
                expect(yield* remote.ask(new Deposit({ amount: 1 }))).toBe(before + 1)
              })
            )
          }),
          { numRuns: 200 }
        )
      )
    }))
})
