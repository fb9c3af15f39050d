/**
 * `talon up` runs its gateway co-located by default: a range read once through the data port
 * is then resident in one of the cluster's in-process workers, and the gateway sends it from
 * there by sendfile, the same bytes the origin holds.
 */
import { createHash } from "node:crypto"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { LocalCluster } from "../../src/cluster/LocalCluster.js"
import { SAMPLE_KEY, SEED_BUCKET, sampleBytes } from "../../src/origin/seed.js"
import { raw } from "../origin/fixtures/testOrigin.js"

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex")

describe("talon up gateway", () => {
  it("sends ranges resident in its workers by sendfile", async () => {
    const seen = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const cluster = yield* LocalCluster.make({ ephemeral: true, workers: 2 })
          const gw = cluster.gateway!
          const range = { Range: "bytes=1000-1500999" }
          const first = yield* Effect.promise(() => raw(gw.url, "GET", `/${SEED_BUCKET}/${SAMPLE_KEY}`, range))
          const before = gw.stats().localBodies
          const second = yield* Effect.promise(() => raw(gw.url, "GET", `/${SEED_BUCKET}/${SAMPLE_KEY}`, range))
          return { first: sha(first.body), second: sha(second.body), before, after: gw.stats().localBodies }
        })
      )
    )
    const want = sha(sampleBytes(1000, 1_500_000))
    expect(seen.first).toBe(want)
    expect(seen.second).toBe(want)
    expect(seen.before).toBe(0)
    expect(seen.after).toBe(1)
  }, 60_000)
})
