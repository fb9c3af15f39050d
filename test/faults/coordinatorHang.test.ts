/**
 * The coordinator hung (SIGSTOP: its port still accepts connections, nothing
 * answers) while a client reads, then resumed (SIGCONT). Coordinator and two
 * workers are real processes. No read may fail, every byte must match the
 * origin, and reads must not wait on the hung coordinator more than its control
 * timeout: stats go to workers and the membership is the last one. After the
 * resume, the coordinator may briefly expire every worker (their heartbeats went
 * unanswered): the client must keep its membership through that, and the workers
 * re-register by themselves.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Ref } from "effect"
import { ControlChannel } from "../../src/transport/ControlChannel.js"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import type { ControlMessage } from "../../src/protocol/index.js"
import { coordinatorOn, isRunning, originWith, outputs, pollUntil, randomReader, report, startWorker, tempDir, type WorkerProcess } from "./fixtures/talon.js"

const MiB = 1024 * 1024
const BLOCK = MiB
const HEARTBEAT_MS = 300
const CONTROL_TIMEOUT_MS = 1000
const SIZES = { "a.bin": 6 * MiB + 3, "b.bin": 4 * MiB + 1, "new.bin": MiB + 9 }
const URIS = ["s3://faults/a.bin", "s3://faults/b.bin"]

describe("fault: coordinator hung (SIGSTOP) and resumed while clients read", () => {
  it.live(
    "zero failed reads, none waiting on the hung coordinator past its control timeout; workers re-register after the resume",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const dir = yield* tempDir
          const origin = yield* originWith(dir, SIZES)
          const coordinator = yield* coordinatorOn(origin, HEARTBEAT_MS)
          const child = yield* coordinator.start
          const workers: Array<WorkerProcess> = []
          for (const id of ["worker-a", "worker-b"]) {
            workers.push(yield* startWorker(dir, origin, { id, coordinator: coordinator.address, blockSize: BLOCK, heartbeatMs: HEARTBEAT_MS }))
          }
          const diagnostics = () => outputs([["coordinator", child] as const, ...workers.map((w) => [w.id, w.child] as const)])
          const probe = yield* ControlChannel.make(coordinator.address, { retries: 0, requestTimeout: "2 seconds", connectTimeout: "1 second" })
          const listed = probe
            .request({ _tag: "MembershipQuery" })
            .pipe(Effect.map((m: ControlMessage) => (m._tag === "MembershipList" ? m.nodes.length : 0)))
          yield* pollUntil(listed, (n) => n === 2, 120_000, () => `workers did not register:\n${diagnostics()}`, 100)

          const client = yield* makeTalonClient({
            coordinator: coordinator.address,
            blockSize: BLOCK,
            replicas: 2,
            membershipTtlMs: 1000,
            statTtlMs: 500,
            controlTimeoutMs: CONTROL_TIMEOUT_MS,
            connectTimeoutMs: 500
          })
          for (const uri of URIS) yield* client.read(uri, 0, origin.objects.get(uri)!.length)
          const seed = Date.now() >>> 0
          const reader = yield* randomReader(client.read, origin.objects, URIS, { seed, maxLength: 2 * BLOCK, pauseMs: 5 })
          yield* reader.more(20, "before the hang")

          // ---- SIGSTOP: connections are accepted by the kernel, nothing is answered ----
          yield* Ref.update(reader.stats, (s) => ({ ...s, slowestMs: 0 }))
          const stoppedAt = Date.now()
          child.process.kill("SIGSTOP")
          const readsAtStop = (yield* Ref.get(reader.stats)).reads
          yield* pollUntil(Effect.sync(() => client.controlPlane()), (c) => !c.coordinatorReachable, 30_000, () => "the client never noticed")
          yield* pollUntil(Ref.get(reader.stats), () => Date.now() - stoppedAt >= 4000, 60_000, () => "reader stalled during the hang")
          const fresh = origin.objects.get("s3://faults/new.bin")!
          expect(Buffer.from(yield* client.read("s3://faults/new.bin", 0, fresh.length)).equals(fresh)).toBe(true)
          const hung = yield* Ref.get(reader.stats)
          const during = client.controlPlane()

          // ---- SIGCONT ----
          const resumedAt = Date.now()
          child.process.kill("SIGCONT")
          yield* pollUntil(listed, (n) => n === 2, 120_000, () => `workers did not re-register:\n${diagnostics()}`, 20)
          const reregisteredMs = Date.now() - resumedAt
          yield* pollUntil(Effect.sync(() => client.controlPlane()), (c) => c.coordinatorReachable, 60_000, () => "client never reconnected")
          yield* reader.more(20, "after the resume")
          yield* Fiber.interrupt(reader.fiber)

          const final = yield* Ref.get(reader.stats)
          expect(final.errors).toEqual([])
          expect(final.wrong).toBe(0)
          expect(hung.reads - readsAtStop).toBeGreaterThan(0)
          expect(during.workerStats).toBeGreaterThan(0)
          // A read may wait for one coordinator request to time out (plus its own work), never for more.
          expect(hung.slowestMs).toBeLessThan(CONTROL_TIMEOUT_MS * 3 + 5000)
          for (const w of workers) expect(isRunning(w.child)).toBe(true)
          const cp = client.controlPlane()
          yield* report(
            `coordinator SIGSTOP ${resumedAt - stoppedAt} ms then SIGCONT (seed ${seed}): ${final.reads} reads, ` +
              `${(final.bytes / MiB).toFixed(1)} MiB checked, 0 failed, 0 wrong; ${hung.reads - readsAtStop} reads while hung, ` +
              `slowest ${hung.slowestMs} ms (control timeout ${CONTROL_TIMEOUT_MS} ms); stats from workers ${during.workerStats}; ` +
              `both workers listed again ${reregisteredMs} ms after SIGCONT; empty lists ignored ${cp.emptyMembershipsIgnored}`
          )
        })
      ),
    240_000
  )
})
