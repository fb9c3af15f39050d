/**
 * A slow consumer never makes the gateway read ahead unboundedly: `talon gateway`
 * (cache route) runs as a child process, a 1 GiB object streams through it from a
 * worker to a reader that crawls for a few seconds and then drains, and the child's
 * VmRSS must grow by less than 64 MiB plus the embedded client's read-ahead window
 * (`readAheadBytes`, which the gateway's sequential piece reads are read ahead by) while
 * the reader crawls. Over the whole transfer, draining included, the bound has another
 * 64 MiB: a fast drain turns over ~100 MB/s of Buffers that are returned on the garbage
 * collector's schedule, not the stream's — still a small fraction of the 1 GiB streamed.
 */
import { expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Layer } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { BackendStore } from "../../src/backend/BackendStore.js"
import { CLIENT_DEFAULTS } from "../../src/client/config.js"
import * as Router from "../../src/backend/Router.js"
import { OriginStub } from "../../src/origin/OriginStub.js"
import { sampleBytes } from "../../src/origin/seed.js"
import { Worker } from "../../src/worker/Worker.js"
import { raw, tempDir } from "../origin/fixtures/testOrigin.js"
import { sparseObject } from "../support/sparseObject.js"
import { slowRead, startListeningChild } from "../../bench/kit/slowReader.js"
import { loopbackCoordinator } from "../support/loopbackCoordinator.js"

const MiB = 1024 * 1024
const GiB = 1024 * MiB
const BLOCK = 64 * MiB
const HUGE = sparseObject(GiB, [0, 512 * MiB + 12345, GiB - 65536], 65536)

const shmDir = Effect.acquireRelease(
  Effect.promise(() => fs.mkdtemp(path.join(process.platform === "linux" ? "/dev/shm" : "/tmp", "talon-gw-cache-"))),
  (d) => Effect.promise(() => fs.rm(d, { recursive: true, force: true }))
)

const LIMIT_MIB = 64 + CLIENT_DEFAULTS.readAheadBytes / MiB
const DRAIN_LIMIT_MIB = LIMIT_MIB + 64

it.scopedLive(
  `streams 1 GiB through the cache route to a slow reader with gateway RSS growth under ${LIMIT_MIB} MiB (64 + the read-ahead window) while it crawls, ${DRAIN_LIMIT_MIB} MiB in all`,
  () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const file = path.join(dir, "origin", "bigdata", "huge.bin")
      yield* Effect.promise(() => HUGE.write(file))
      const origin = yield* OriginStub.make({ root: path.join(dir, "origin") })
      const backend = Layer.succeed(BackendStore, yield* Router.make(Router.localOptions(origin.url)))
      const coordinator = yield* loopbackCoordinator(backend, { heartbeatIntervalMs: 1000 })
      const worker = yield* Layer.build(
        Worker.layerSettings({
          id: "w1",
          dataAddress: "127.0.0.1:0",
          adminAddress: "127.0.0.1:0",
          coordinator: coordinator.controlAddress,
          cacheDirs: [yield* shmDir],
          blockSize: BLOCK,
          pageSize: 8 * MiB,
          heartbeatIntervalMs: 1000
        }).pipe(Layer.provide(backend))
      ).pipe(Effect.map((ctx) => Context.get(ctx, Worker)))
      yield* coordinator.members.pipe(
        Effect.delay("50 millis"),
        Effect.repeat({ until: (m) => m.length >= 1 }),
        Effect.timeout(Duration.seconds(20))
      )

      const t0 = performance.now()
      const { child, port, output } = yield* startListeningChild(
        [
          "bin/talon.mjs",
          "gateway",
          "--listen",
          "127.0.0.1:0",
          "--route",
          "cache",
          "--auth",
          "off",
          "--coordinator",
          coordinator.controlAddress,
          "--block-size",
          String(BLOCK),
          "--worker-timeout-ms",
          "60000"
        ],
        { TALON_S3_ENDPOINT: origin.url, TALON_S3_ACCESS_KEY_ID: "talon", TALON_S3_SECRET_ACCESS_KEY: "talon-secret" }
      )
      const startupMs = performance.now() - t0
      // Warm the read path (JIT, the client's first membership fetch) so the baseline excludes one-time costs.
      const warm = yield* Effect.promise(() => raw(`http://127.0.0.1:${port}`, "GET", "/bigdata/huge.bin", { Range: "bytes=0-65535" }))
      expect(warm.body.equals(sampleBytes(0, 65536))).toBe(true)
      expect(output()).toContain("AUTH IS OFF")

      const result = yield* Effect.promise(() =>
        slowRead({
          port,
          pid: child.pid!,
          path: "/bigdata/huge.bin",
          expectLength: GiB,
          slowMs: 4000,
          check: HUGE.matches
        })
      )
      const growthMiB = (result.peak - result.baseline) / MiB
      const slowGrowthMiB = (result.slowPeak - result.baseline) / MiB
      console.log(
        `gateway child RSS baseline ${(result.baseline / MiB).toFixed(1)} MiB, peak ${(result.peak / MiB).toFixed(1)} MiB, growth ${growthMiB.toFixed(1)} MiB (${slowGrowthMiB.toFixed(1)} MiB while slow); slow phase read ${(result.slowBytes / MiB).toFixed(1)} MiB; child start ${startupMs.toFixed(0)} ms, transfer ${result.transferMs.toFixed(0)} ms; worker served ${(worker.stats.bytesServed / MiB).toFixed(0)} MiB`
      )
      expect(result.slowBytes).toBeLessThan(GiB / 8)
      expect(result.body).toBe(GiB)
      expect(result.ok).toBe(true)
      // The bytes came from the worker (the cache route), not around it.
      expect(worker.stats.bytesServed).toBeGreaterThanOrEqual(GiB)
      expect(slowGrowthMiB).toBeLessThan(LIMIT_MIB)
      expect(growthMiB).toBeLessThan(DRAIN_LIMIT_MIB)
    }),
  240_000
)
