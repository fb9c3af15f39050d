/**
 * The stub serves a 1 GiB object to a deliberately slow reader with bounded memory:
 * the server runs as a child process (the OriginStub layer alone) so its RSS can
 * be sampled from /proc/<pid>/status while the reader crawls, then drains.
 */
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as path from "node:path"
import { sampleBytes } from "../../src/origin/seed.js"
import { sameBytes } from "../support/checks.js"
import { slowRead, startListeningChild } from "../../bench/kit/slowReader.js"
import { bundledScript } from "../support/bundledScript.js"
import { sparseObject } from "../support/sparseObject.js"
import { rawEffect, tempDir } from "./fixtures/testOrigin.js"

const GiB = 1024 * 1024 * 1024
const HUGE = sparseObject(GiB, [0, 512 * 1024 * 1024, GiB - 65536], 65536)

it.scopedLive(
  "serves 1 GiB to a slow reader with RSS growth under 64 MiB",
  () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const root = path.join(dir, "root")
      const file = path.join(root, "bigdata", "huge.bin")
      yield* Effect.promise(() => HUGE.write(file))
      // The fixture bundled (test/support/bundledScript.ts): plain node starts it in a fraction of tsx's time.
      const script = yield* Effect.promise(() => bundledScript("test/origin/fixtures/serveStub.ts"))
      const t0 = performance.now()
      const { child, port } = yield* startListeningChild([script, root], {})
      const startupMs = performance.now() - t0
      // Warm the read path (JIT, lazy module state) so the baseline excludes one-time costs.
      const warm = yield* rawEffect(`http://127.0.0.1:${port}`, "GET", "/bigdata/huge.bin", { Range: "bytes=0-65535" })
      expect(sameBytes(warm.body, sampleBytes(0, 65536))).toBe("equal")
      // Slow phase: one read every 50 ms for 3 s, then drain as fast as possible.
      const result = yield* Effect.promise(() =>
        slowRead({ port, pid: child.pid!, path: "/bigdata/huge.bin", expectLength: GiB, slowMs: 3000, check: HUGE.matches })
      )
      const growthMiB = (result.peak - result.baseline) / (1024 * 1024)
      console.log(
        `origin child RSS baseline ${(result.baseline / 2 ** 20).toFixed(1)} MiB, peak ${(result.peak / 2 ** 20).toFixed(1)} MiB, growth ${growthMiB.toFixed(1)} MiB; slow phase read ${(result.slowBytes / 2 ** 20).toFixed(1)} MiB; child start ${startupMs.toFixed(0)} ms, transfer ${result.transferMs.toFixed(0)} ms`
      )
      // The reader really was slow: far less than the object crossed during the slow phase.
      expect(result.slowBytes).toBeLessThan(GiB / 8)
      expect(result.body).toBe(GiB)
      expect(result.ok).toBe(true)
      expect(growthMiB).toBeLessThan(64)
    }),
  60_000
)
