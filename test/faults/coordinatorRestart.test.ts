/**
 * The only coordinator killed with SIGKILL and restarted on the same address while
 * a client reads: coordinator and two workers as real processes, the origin stub
 * in this process. With the membership and stat TTLs short enough to expire during
 * the outage, no read may fail and every byte must match the origin: the client
 * keeps its last membership, stats come from workers (an object first seen during
 * the outage too), the restarted coordinator's empty list does not replace the
 * membership, and the workers register again by themselves.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Ref } from "effect"
import { bothListed, HEARTBEAT_MS, listedWorkers, MiB, outageClient, outageOrigin, pacedReader, readsLateObject } from "./fixtures/coordinatorOutage.js"
import { coordinatorOn, isRunning, kill9, pollUntil, report } from "./fixtures/talon.js"

describe("fault: coordinator kill -9 and restart while clients read", () => {
  it.live(
    "reads go on from the last membership with zero failures; workers re-register by themselves",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { dir, origin } = yield* outageOrigin
          const coordinator = yield* coordinatorOn(origin, HEARTBEAT_MS)
          let coordinatorChild = yield* coordinator.start
          // `listed` is the test's own view of the coordinator: what it lists right now.
          const { workers, listed, diagnostics } = yield* listedWorkers(dir, origin, coordinator.address, () => [["coordinator", coordinatorChild]])

          const client = yield* outageClient(coordinator.address, origin.objects)
          const { seed, reader } = yield* pacedReader(client, origin.objects)
          const stats = reader.stats

          // ---- kill -9 the coordinator ----
          const killedAt = Date.now()
          expect((yield* kill9(coordinatorChild)).signal).toBe("SIGKILL")
          const readsAtKill = (yield* Ref.get(stats)).reads
          yield* pollUntil(Effect.sync(() => client.controlPlane()), (c) => !c.coordinatorReachable, 30_000, () => "the client never noticed")
          // Past both TTLs several times over, with the coordinator still down.
          yield* pollUntil(Ref.get(stats), () => Date.now() - killedAt >= 3000, 60_000, () => "reader stalled during the outage")
          // An object nobody asked about before the outage: its stat has to come from a worker.
          yield* readsLateObject(client, origin.objects)
          // A worker can also tell that an object does not exist.
          const missing = yield* Effect.flip(client.stat("s3://faults/never-written.bin"))
          expect(missing._tag).toBe("ObjectNotFound")
          const duringOutage = client.controlPlane()
          expect(duringOutage.coordinatorReachable).toBe(false)
          expect(duringOutage.workerStats).toBeGreaterThan(0)
          expect(duringOutage.staleMembershipUses).toBeGreaterThan(0)
          const readsInOutage = (yield* Ref.get(stats)).reads - readsAtKill
          expect(readsInOutage).toBeGreaterThan(0)

          // ---- restart on the same address ----
          const restartedAt = Date.now()
          coordinatorChild = yield* coordinator.start
          // Its start-up (a Node process loading the bundle) is not the workers' doing: measured apart.
          yield* pollUntil(listed, () => true, 120_000, () => `the coordinator did not come back:\n${diagnostics()}`, 20)
          const listeningMs = Date.now() - restartedAt
          yield* pollUntil(listed, bothListed, 120_000, () => `workers did not re-register:\n${diagnostics()}`, 20)
          const reregisteredMs = Date.now() - restartedAt - listeningMs
          yield* pollUntil(Effect.sync(() => client.controlPlane()), (c) => c.coordinatorReachable, 60_000, () => "client never reconnected")
          const reconnectedMs = Date.now() - restartedAt
          const readsWithoutCoordinator = (yield* Ref.get(stats)).reads - readsAtKill
          expect((yield* client.members(true)).map((n) => n.id).sort()).toEqual(["worker-a", "worker-b"])

          yield* reader.more(20, "after the restart")
          yield* Fiber.interrupt(reader.fiber)
          const final = yield* Ref.get(stats)
          expect(final.errors).toEqual([])
          expect(final.wrong).toBe(0)
          for (const w of workers) expect(isRunning(w.child)).toBe(true)
          const cp = client.controlPlane()
          yield* report(
            `coordinator kill -9 + restart (seed ${seed}): ${final.reads} reads (${readsWithoutCoordinator} between the kill and the ` +
              `client reconnecting, ${readsInOutage} before the restart began), ` +
              `${(final.bytes / MiB).toFixed(1)} MiB checked, 0 failed, 0 wrong; restart begun ${restartedAt - killedAt} ms after the kill; ` +
              `restarted coordinator answering after ${listeningMs} ms, both workers re-registered ${reregisteredMs} ms later ` +
              `(heartbeat ${HEARTBEAT_MS} ms), client reconnected ${reconnectedMs} ms after the restart; ` +
              `stale-membership uses ${cp.staleMembershipUses}, empty lists ignored ${cp.emptyMembershipsIgnored}, ` +
              `stats from workers ${cp.workerStats}, stale stats ${cp.staleStats}, coordinator failures ${cp.coordinatorFailures}`
          )
        })
      ),
    240_000
  )
})
