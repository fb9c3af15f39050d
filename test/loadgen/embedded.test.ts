/**
 * Loadgen as an embedded service: a program builds a small cluster, provides Loadgen.layer and
 * drives the worker through the same threads `talon loadgen` uses, every payload byte checked.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Backend } from "../../src/core/ids.js"
import { LocalCluster, Loadgen, loadSpec } from "../../src/index.js"
import { sampleBytes, SEED_BUCKET } from "../../src/origin/seed.js"

const RANGE = 64 * 1024
const object = { backend: Backend.S3, bucket: SEED_BUCKET, objectPath: "datasets/sample-1m.bin" }

const scratchFile = (bytes: Buffer) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const dir = mkdtempSync(join(tmpdir(), "talon-loadgen-"))
      writeFileSync(join(dir, "expected.bin"), bytes)
      return { dir, file: join(dir, "expected.bin") }
    }),
    ({ dir }) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )

describe("Loadgen service against an embedded cluster", () => {
  it.scopedLive(
    "runs a verified load on a worker and reports real counts, then catches a wrong byte",
    () =>
      Effect.gen(function* () {
        const cluster = yield* LocalCluster.make({ ephemeral: true, workers: 1, gateway: false })
        const worker = cluster.workers[0]!
        const loadgen = yield* Loadgen
        const { size } = yield* loadgen.stat(cluster.coordinator.controlAddress, object)
        expect(size).toBe(1024 * 1024)

        const expected = sampleBytes(0, size)
        const good = yield* scratchFile(expected)
        const spec = loadSpec({
          host: "127.0.0.1",
          port: worker.dataPort,
          object,
          size,
          conns: 4,
          depth: 2,
          range: RANGE,
          threads: 2,
          seconds: 1,
          warmup: 0.5,
          verify: good.file
        })
        const r = yield* loadgen.runChecked(spec)
        expect(r.errors).toBe(0)
        expect(r.threads).toBe(2)
        expect(r.samples).toBeGreaterThan(0)
        expect(r.hit_samples).toBe(r.samples)
        expect(r.bytes).toBe(r.samples * RANGE)
        expect(r.rps).toBe(r.samples / r.seconds)
        expect(r.p50_us!).toBeLessThanOrEqual(r.p99_us!)
        expect(r.p99_us!).toBeLessThanOrEqual(r.max_us!)

        // The same run against a copy with one byte changed must fail, naming the byte.
        const flipped = Buffer.from(expected)
        const at = 5 * RANGE + 123
        flipped[at] = flipped[at]! ^ 0xff
        const bad = yield* scratchFile(flipped)
        const e = yield* Effect.flip(loadgen.runChecked({ ...spec, verify: bad.file, hotBytes: 8 * RANGE }))
        expect(e.message).toContain(`payload mismatch at byte 123 of range offset ${5 * RANGE} (file offset ${at})`)
      }).pipe(Effect.provide(Loadgen.layer)),
    180_000
  )
})
