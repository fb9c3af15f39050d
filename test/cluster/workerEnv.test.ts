/**
 * `talon up`'s workers take every setting the cluster does not fix from TALON_WORKER_*, as
 * `talon worker` does (a user reproducing a problem on a local cluster switches the hit table,
 * plane or serve mode this way).
 */
import { ConfigProvider, Effect } from "effect"
import { describe, expect, it } from "vitest"
import { LocalCluster } from "../../src/cluster/LocalCluster.js"

describe("talon up worker settings", () => {
  it("honours TALON_WORKER_* for what the cluster leaves open, and keeps its own addresses", async () => {
    const env = new Map([
      ["TALON_WORKER_SERVE_MODE", "multiplexed"],
      ["TALON_WORKER_DATA_PLANE", "portable"],
      ["TALON_WORKER_DATA_ADDR", "127.0.0.1:1"]
    ])
    const seen = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const cluster = yield* LocalCluster.make({ ephemeral: true, workers: 1, gateway: false })
          const w = cluster.workers[0]!
          return { mode: w.serveMode, plane: w.dataPlane, port: w.dataPort }
        })
      ).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(env)))
    )
    expect(seen.mode).toBe("multiplexed")
    expect(seen.plane).toBe("portable")
    expect(seen.port).not.toBe(1)
  })
})
