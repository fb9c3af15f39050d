/**
 * Liveness and epoch rules: the table with explicit clocks (exact), then the
 * running coordinator with short real intervals over a real socket.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Schedule } from "effect"
import fc from "fast-check"
import { ControlChannel } from "../../src/transport/ControlChannel.js"
import { MembershipTable } from "../../src/coordinator/Membership.js"
import { NodeRole, type NodeInfo } from "../../src/core/ids.js"
import { testCoordinator } from "./fixtures/harness.js"

const node = (id: string, port = 7001): NodeInfo => ({ id, address: `127.0.0.1:${port}`, role: NodeRole.Worker })

describe("MembershipTable", () => {
  it("epoch advances exactly when the healthy membership changes", () => {
    const t = new MembershipTable(300, 10)
    expect(t.epoch).toBe(10)
    expect(t.register(node("a"), 0)).toBe(true)
    expect(t.epoch).toBe(11)
    // Re-registering the same node (a worker restart with the same address) is not a change.
    expect(t.register(node("a"), 50)).toBe(false)
    expect(t.heartbeat("a", 3, 100)).toBe(true)
    expect(t.epoch).toBe(11)
    expect(t.register(node("b"), 100)).toBe(true)
    expect(t.epoch).toBe(12)
    // A moved node is a change.
    expect(t.register(node("b", 7002), 150)).toBe(true)
    expect(t.epoch).toBe(13)
    // At 401 "a" (last seen 100) is past the 300 ms window; "b" (150) is not.
    expect(t.healthy(400).map((m) => m.info.id)).toEqual(["a", "b"])
    expect(t.healthy(401).map((m) => m.info.id)).toEqual(["b"])
    expect(t.epoch).toBe(14)
    expect(t.healthy(402).map((m) => m.info.id)).toEqual(["b"])
    expect(t.epoch).toBe(14)
    // An expired node is forgotten: its heartbeat is refused until it registers again.
    expect(t.heartbeat("a", 0, 402)).toBe(false)
    expect(t.register(node("a"), 403)).toBe(true)
    expect(t.epoch).toBe(15)
    expect(t.counters).toMatchObject({ expirations: 1, rejectedHeartbeats: 1 })
  })

  it("property: the epoch moves by exactly the number of healthy-set changes, and never backwards", () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant("register" as const), id: fc.integer({ min: 0, max: 4 }), port: fc.integer({ min: 1, max: 2 }) }),
      fc.record({ kind: fc.constant("heartbeat" as const), id: fc.integer({ min: 0, max: 4 }) }),
      fc.record({ kind: fc.constant("tick" as const), ms: fc.integer({ min: 0, max: 250 }) })
    )
    fc.assert(
      fc.property(fc.array(op, { maxLength: 80 }), (ops) => {
        const t = new MembershipTable(200, 0)
        let now = 0
        let previous = new Map<string, string>()
        for (const o of ops) {
          const epochBefore = t.epoch
          const expiredBefore = t.counters.expirations
          if (o.kind === "tick") now += o.ms
          else if (o.kind === "register") t.register(node(`n${o.id}`, o.port), now)
          else t.heartbeat(`n${o.id}`, 0, now)
          const current = new Map(t.healthy(now).map((m) => [m.info.id, m.info.address]))
          const same =
            current.size === previous.size && [...current].every(([id, addr]) => previous.get(id) === addr)
          expect(t.epoch).toBeGreaterThanOrEqual(epochBefore)
          // Any change of the healthy set moves the epoch ...
          if (!same) expect(t.epoch).toBeGreaterThan(epochBefore)
          // ... and without a change (and no expire-then-rejoin in between) it stays put.
          if (same && t.counters.expirations === expiredBefore) expect(t.epoch).toBe(epochBefore)
          previous = current
        }
      })
    )
  })
})

describe("coordinator liveness over a real socket", () => {
  it.live("a worker that stops heartbeating leaves MembershipList within the window; the epoch moves once", () =>
    // A 1 s window beaten every 100 ms: a loaded CI machine can stall a loop for a few hundred
    // ms, which must not expire the worker that keeps heartbeating.
    testCoordinator({ heartbeatIntervalMs: 250, missedHeartbeats: 4 }, (c, port) =>
      Effect.scoped(
        Effect.gen(function* () {
          const address = `127.0.0.1:${port}`
          const alive = yield* ControlChannel.make(address)
          const doomed = yield* ControlChannel.make(address)
          yield* alive.request({ _tag: "Register", node: node("alive", 7101) })
          yield* doomed.request({ _tag: "Register", node: node("doomed", 7102) })
          const afterJoin = yield* c.epoch
          expect(afterJoin).toBe(102)

          const beat = (ch: ControlChannel, id: string) =>
            ch.request({ _tag: "Heartbeat", node: id, blockCount: 5 }).pipe(Effect.repeat(Schedule.spaced("100 millis")))
          const aliveBeats = yield* Effect.fork(beat(alive, "alive"))
          const doomedBeats = yield* Effect.fork(beat(doomed, "doomed"))
          yield* Effect.sleep("400 millis")
          // Both heartbeating: nobody expired, the epoch did not move.
          const both = yield* alive.request({ _tag: "MembershipQuery" })
          expect(both._tag === "MembershipList" && both.nodes.map((n) => n.id)).toEqual(["alive", "doomed"])
          expect(yield* c.epoch).toBe(afterJoin)

          yield* Fiber.interrupt(doomedBeats)
          // Poll: gone once the 1 s window has passed (plus one sweep), well within 10 s.
          const gone = yield* alive.request({ _tag: "MembershipQuery" }).pipe(
            Effect.delay("20 millis"),
            Effect.repeat({ until: (m) => m._tag === "MembershipList" && !m.nodes.some((n) => n.id === "doomed") }),
            Effect.timeout(Duration.seconds(10))
          )
          expect(gone._tag === "MembershipList" && gone.nodes.map((n) => n.id)).toEqual(["alive"])
          expect(yield* c.epoch).toBe(afterJoin + 1)
          // The survivor is still listed by the admin view, with its heartbeat block count.
          const cluster = yield* c.cluster
          expect(cluster.members.map((m) => [m.id, m.blockCount])).toEqual([["alive", 5]])

          // The doomed worker's next heartbeat is refused; re-registering brings it back (epoch +1).
          const refused = yield* doomed.request({ _tag: "Heartbeat", node: "doomed", blockCount: 0 })
          expect(refused._tag === "Ack" && refused.ok).toBe(false)
          yield* doomed.request({ _tag: "Register", node: node("doomed", 7102) })
          expect(yield* c.epoch).toBe(afterJoin + 2)
          yield* Fiber.interrupt(aliveBeats)
        })
      )
    )
  )
})
