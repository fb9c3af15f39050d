/**
 * Two coordinators, the first killed with SIGKILL while a client configured with
 * both reads: coordinators and workers as real processes, the origin stub in this
 * process. Each worker process registers with the first coordinator itself; this
 * test registers the same workers (same ids and data addresses) with the second
 * and heartbeats them there, so both list the same membership. No read may fail,
 * every byte must match the origin, and the client's counters and its log (through
 * the logger this test installs) must say it moved to the second coordinator.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Logger, Ref, Schedule } from "effect"
import { NodeRole } from "../../src/core/ids.js"
import { ControlChannel } from "../../src/transport/ControlChannel.js"
import {
  bothListed,
  HEARTBEAT_MS,
  listedWorkers,
  membershipProbe,
  MiB,
  outageClient,
  outageOrigin,
  pacedReader,
  readsLateObject
} from "./fixtures/coordinatorOutage.js"
import { coordinatorOn, isRunning, kill9, pollUntil, report, type WorkerProcess } from "./fixtures/talon.js"

describe("fault: the client's first coordinator killed with -9", () => {
  it.live(
    "the client moves to the second coordinator: zero failed reads, and its counters and log say so",
    () => {
      const logs: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        logs.push(`${logLevel.label} ${Array.isArray(message) ? message.join(" ") : String(message)}`)
      })
      return Effect.scoped(
        Effect.gen(function* () {
          const { dir, origin } = yield* outageOrigin
          const first = yield* coordinatorOn(origin, HEARTBEAT_MS)
          const second = yield* coordinatorOn(origin, HEARTBEAT_MS)
          const firstChild = yield* first.start
          const secondChild = yield* second.start
          const { workers, diagnostics } = yield* listedWorkers(dir, origin, first.address, () => [
            ["first", firstChild],
            ["second", secondChild]
          ])
          const listedSecond = yield* membershipProbe(second.address)

          // The same workers on the second coordinator: Register once, then Heartbeat (Register again when refused).
          const secondControl = yield* ControlChannel.make(second.address, { retries: 0, requestTimeout: "2 seconds" })
          const keepRegistered = (w: WorkerProcess) =>
            secondControl.request({ _tag: "Heartbeat", node: w.id, blockCount: 0 }).pipe(
              Effect.filterOrFail((r) => r._tag === "Ack" && r.ok, () => "not registered"),
              Effect.catchAll(() =>
                secondControl.request({ _tag: "Register", node: { id: w.id, address: w.address, role: NodeRole.Worker } })
              ),
              Effect.ignore
            )
          yield* Effect.forEach(workers, keepRegistered, { discard: true }).pipe(
            Effect.repeat(Schedule.spaced(`${HEARTBEAT_MS} millis`)),
            Effect.forkScoped
          )
          yield* pollUntil(listedSecond, bothListed, 60_000, () => `workers not listed by the second coordinator:\n${diagnostics()}`, 100)

          const client = yield* outageClient(`${first.address},${second.address}`, origin.objects)
          expect(client.controlPlane()).toMatchObject({ coordinator: first.address, coordinatorFailovers: 0 })

          const { seed, reader } = yield* pacedReader(client, origin.objects)

          // ---- kill -9 the first coordinator ----
          const killedAt = Date.now()
          expect((yield* kill9(firstChild)).signal).toBe("SIGKILL")
          const readsAtKill = (yield* Ref.get(reader.stats)).reads
          yield* pollUntil(
            Effect.sync(() => client.controlPlane()),
            (c) => c.coordinator === second.address,
            60_000,
            () => `the client never moved: ${JSON.stringify(client.controlPlane())}`
          )
          const movedMs = Date.now() - killedAt
          // Past both TTLs several times over: membership and stats now come from the second coordinator.
          yield* pollUntil(Ref.get(reader.stats), () => Date.now() - killedAt >= 3000, 60_000, () => "reader stalled after the kill")
          yield* reader.more(20, "after the move")
          yield* readsLateObject(client, origin.objects)
          expect((yield* client.members(true)).map((n) => n.id).sort()).toEqual(["worker-a", "worker-b"])
          yield* Fiber.interrupt(reader.fiber)

          const final = yield* Ref.get(reader.stats)
          expect(final.errors).toEqual([])
          expect(final.wrong).toBe(0)
          const cp = client.controlPlane()
          expect(cp.coordinator).toBe(second.address)
          expect(cp.coordinatorFailovers).toBe(1)
          expect(cp.coordinatorReachable).toBe(true)
          // Confirmed by the second coordinator since the kill, not carried over from the first.
          expect(cp.membershipAgeMs!).toBeLessThan(Date.now() - killedAt)
          const moved = logs.filter((l) => l.includes(`coordinator ${first.address} does not answer`) && l.includes(`moved to coordinator ${second.address}`))
          expect(moved, logs.join("\n")).toHaveLength(1)
          expect(moved[0]!.startsWith("WARN")).toBe(true)
          for (const w of workers) expect(isRunning(w.child)).toBe(true)
          yield* report(
            `coordinator failover (seed ${seed}): ${final.reads} reads (${final.reads - readsAtKill} after the kill), ` +
              `${(final.bytes / MiB).toFixed(1)} MiB checked, 0 failed, 0 wrong; client on the second coordinator ${movedMs} ms after the kill; ` +
              `coordinator failures ${cp.coordinatorFailures}, stats from workers ${cp.workerStats}, stale stats ${cp.staleStats}, ` +
              `stale-membership uses ${cp.staleMembershipUses}`
          )
        })
      ).pipe(Effect.provide(Logger.add(logger)))
    },
    240_000
  )
})
