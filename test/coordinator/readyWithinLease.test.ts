/**
 * A coordinator cut off from etcd turns unready within its lease TTL. etcd is
 * paused with SIGSTOP, so connections hang instead of being refused (the hard
 * case: no error ever arrives, only silence). The bound is a correctness
 * property (a coordinator must not serve membership past the point where
 * records may have expired unseen), measured from the moment of the pause.
 */
import { Effect } from "effect"
import { describe, expect, it } from "@effect/vitest"
import { EtcdCluster, etcdAvailable } from "./state/etcdHarness.js"
import { coordinatorOn, originWith, outputs, pollUntil, tempDir } from "../faults/fixtures/talon.js"
import type { Child } from "../cluster/fixtures/processes.js"

const T = 300_000
const START_MS = 180_000
const HEARTBEAT_MS = 1000
/** What the coordinator derives from the flags below: 2 x heartbeat x missed heartbeats (3). */
const LEASE_TTL_MS = 6 * HEARTBEAT_MS

const readyz = (adminAddress: string) =>
  Effect.tryPromise(async () => (await fetch(`http://${adminAddress}/readyz`, { signal: AbortSignal.timeout(2000) })).status)

/** Pauses etcd member 0 for the scope; it is always resumed, so the harness can stop it. */
const pausedEtcd = (etcd: EtcdCluster) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      etcd.members[0]!.proc!.kill("SIGSTOP")
      return Date.now()
    }),
    () => Effect.sync(() => void etcd.members[0]!.proc?.kill("SIGCONT"))
  )

describe.runIf(etcdAvailable())("coordinator readiness against a hung etcd", () => {
  it.live("turns 503 within the lease TTL of a SIGSTOP and ready again after SIGCONT", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const etcd = yield* Effect.acquireRelease(
          Effect.promise(() => EtcdCluster.start(1)),
          (e) => Effect.promise(() => e.stop())
        )
        const dir = yield* tempDir
        const origin = yield* originWith(dir, { "a.bin": 1024 })
        const c = yield* coordinatorOn(origin, HEARTBEAT_MS, ["--state", "etcd", "--etcd-endpoints", etcd.endpoints.join(","), "--cluster-id", "lease"])
        const children: Array<readonly [string, Child]> = [["coordinator", yield* c.start]]
        const why = () => outputs(children)
        yield* pollUntil(readyz(c.adminAddress), (code) => code === 200, START_MS, () => `coordinator never ready\n${why()}`)
        // Settle into steady state (probes answered) before the pause.
        yield* Effect.sleep("2 seconds")
        expect(yield* readyz(c.adminAddress)).toBe(200)

        const measured = yield* Effect.scoped(
          Effect.gen(function* () {
            const stoppedAt = yield* pausedEtcd(etcd)
            yield* pollUntil(readyz(c.adminAddress), (code) => code === 503, 60_000, () => `still ready with etcd paused\n${why()}`, 20)
            return Date.now() - stoppedAt
          })
        )
        console.log(`coordinator unready ${measured} ms after etcd was paused (lease TTL ${LEASE_TTL_MS} ms)`)
        expect(measured).toBeLessThan(LEASE_TTL_MS)

        // Resumed (the scope above sent SIGCONT): ready again.
        yield* pollUntil(readyz(c.adminAddress), (code) => code === 200, 90_000, () => `not ready after etcd resumed\n${why()}`)
      })
    ),
    T
  )
})
