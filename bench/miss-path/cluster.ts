/**
 * The cluster side of bench/miss-path.ts, a process of its own: origin stub (with the given
 * latency and per-response bandwidth), coordinator and one worker (LocalCluster), the worker's
 * settings from argv[2] (JSON). Prints one JSON line with the addresses, then runs until killed.
 */
import { Effect } from "effect"
import { NodeRuntime } from "@effect/platform-node"
import { LocalCluster } from "../../src/cluster/LocalCluster.js"
import type { WorkerSettings } from "../../src/worker/config.js"

const worker = JSON.parse(process.argv[2] ?? "{}") as Partial<WorkerSettings>
const latencyMs = Number(process.argv[3] ?? "30")
const bandwidth = Number(process.argv[4] ?? "100000000")

Effect.scoped(
  Effect.gen(function* () {
    const cluster = yield* LocalCluster.make({ ephemeral: true, workers: 1, gateway: false, worker })
    yield* cluster.origin.setFaults({ latency: { kind: "fixed", ms: latencyMs }, bandwidthBytesPerSec: bandwidth })
    const w = cluster.workers[0]!
    console.log(
      JSON.stringify({
        ready: true,
        origin: cluster.origin.url,
        root: cluster.origin.root,
        coordinator: cluster.coordinator.controlAddress,
        admin: w.adminAddress
      })
    )
    return yield* Effect.never
  })
).pipe(NodeRuntime.runMain)
