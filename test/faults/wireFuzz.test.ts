/**
 * Wire fuzzing over real connections: fast-check sequences of valid, mutated and
 * truncated frames against a worker's data port and a coordinator's control port,
 * each running as its own process. Every connection must get a clear error frame
 * or be closed, no reply may carry a byte that is not the object's, and afterwards
 * the process is still up, its RSS bounded, and a clean client reads correctly.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import { COORDINATOR_CAPS } from "../../src/coordinator/ControlServer.js"
import { WorkerPool } from "../../src/client/WorkerPool.js"
import { Backend } from "../../src/core/ids.js"
import { WORKER_CAPS } from "../../src/worker/server/DataServer.js"
import { runSequence } from "./fixtures/fuzzConnection.js"
import { sequenceArb, type Target } from "./fixtures/fuzzFrames.js"
import {
  coordinatorOn,
  isRunning,
  originWith,
  outputs,
  pollUntil,
  report,
  startWorker,
  tempDir,
  vmRssKiB
} from "./fixtures/talon.js"
import type { Child } from "../cluster/fixtures/processes.js"

const MiB = 1024 * 1024
const BLOCK = MiB
const SIZE = 3 * MiB + 333
const URI = "s3://faults/fuzz.bin"
const RUNS = Number(process.env.FUZZ_RUNS ?? "300")
/** RSS growth allowed over a whole fuzz run: far below what buffering one over-cap frame would cost. */
const RSS_SLACK_KIB = 96 * 1024

const fuzz = (port: number, target: Target, child: Child, label: string) =>
  Effect.promise(async () => {
    const totals = { sequences: 0, frames: 0, replies: 0, errorFrames: 0, bytesChecked: 0 }
    await fc.assert(
      fc.asyncProperty(sequenceArb(target), async (seq) => {
        const outcome = await runSequence(port, target, seq)
        totals.sequences++
        totals.frames += outcome.framesSent
        totals.replies += outcome.replies
        totals.errorFrames += outcome.errorFrames
        totals.bytesChecked += outcome.bytesChecked
        if (outcome.violations.length > 0) throw new Error(outcome.violations.join("\n"))
        if (!isRunning(child)) throw new Error(`${label} exited:\n${child.output().slice(-4000)}`)
      }),
      { numRuns: RUNS, endOnFailure: true }
    )
    return totals
  })

describe("wire fuzzing", () => {
  it.live(
    "a worker's data port: every sequence answered or closed, only the object's bytes, still serving afterwards",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const dir = yield* tempDir
          const origin = yield* originWith(dir, { "fuzz.bin": SIZE })
          const bytes = origin.objects.get(URI)!
          // Standalone (no coordinator): ready at once, so every frame reaches the serve path.
          const worker = yield* startWorker(dir, origin, {
            id: "fuzzed",
            coordinator: "",
            blockSize: BLOCK,
            heartbeatMs: 1000,
            env: { TALON_WORKER_READ_TIMEOUT_MS: "1000" }
          })
          const port = Number(worker.address.split(":")[1])
          // A clean client: one GetRange of the whole object straight to the worker, every byte compared.
          const clean = (address: string) =>
            Effect.gen(function* () {
              const pool = new WorkerPool({ connectionsPerWorker: 1, requestTimeout: "20 seconds", connectTimeout: "2 seconds", maxRequestBytes: 8 * MiB })
              const object = { backend: Backend.S3, bucket: "faults", objectPath: "fuzz.bin" }
              const got = yield* pool.getRange(address, object, 0, SIZE).pipe(Effect.ensuring(Effect.sync(() => pool.close())))
              return Buffer.from(got).equals(bytes)
            })
          yield* pollUntil(clean(worker.address), (ok) => ok, 120_000, () => `worker did not start:\n${outputs([["worker", worker.child]])}`, 200)
          const rssBefore = vmRssKiB(worker.child.pid)

          const totals = yield* fuzz(port, { bucket: "faults", key: "fuzz.bin", bytes, caps: WORKER_CAPS, explainsCloses: process.env.FUZZ_WORKER_EXPLAINS === "1" }, worker.child, "the worker")

          expect(isRunning(worker.child)).toBe(true)
          expect(yield* clean(worker.address)).toBe(true)
          const rssAfter = vmRssKiB(worker.child.pid)
          expect(rssAfter - rssBefore).toBeLessThan(RSS_SLACK_KIB)
          yield* report(
            `worker data port fuzz: ${totals.sequences} connections, ${totals.frames} frames, ${totals.replies} replies ` +
              `(${totals.errorFrames} error frames), ${(totals.bytesChecked / MiB).toFixed(1)} MiB of range replies checked; ` +
              `RSS ${(rssBefore / 1024).toFixed(0)} -> ${(rssAfter / 1024).toFixed(0)} MiB`
          )
        })
      ),
    300_000
  )

  it.live(
    "a coordinator's control port: every sequence answered or closed, still serving a clean client afterwards",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const dir = yield* tempDir
          const origin = yield* originWith(dir, { "fuzz.bin": SIZE })
          const bytes = origin.objects.get(URI)!
          const coordinator = yield* coordinatorOn(origin, 500, ["--read-timeout-ms", "1000"])
          const child = yield* coordinator.start
          const worker = yield* startWorker(dir, origin, { id: "w", coordinator: coordinator.address, blockSize: BLOCK, heartbeatMs: 500 })
          const client = yield* makeTalonClient({ coordinator: coordinator.address, blockSize: BLOCK, membershipTtlMs: 500 })
          const diagnostics = () => outputs([["coordinator", child], ["worker", worker.child]])
          yield* pollUntil(client.members(true), (m) => m.length === 1, 120_000, () => `worker did not register:\n${diagnostics()}`, 200)
          expect(Buffer.from(yield* client.read(URI, 0, SIZE)).equals(bytes)).toBe(true)
          const rssBefore = vmRssKiB(child.pid)

          const port = Number(coordinator.address.split(":")[1])
          const totals = yield* fuzz(port, { bucket: "faults", key: "fuzz.bin", bytes, caps: COORDINATOR_CAPS, explainsCloses: true }, child, "the coordinator")

          expect(isRunning(child)).toBe(true)
          const rssAfter = vmRssKiB(child.pid)
          expect(rssAfter - rssBefore).toBeLessThan(RSS_SLACK_KIB)
          // A clean client: membership, stat, list and a full read, every byte checked.
          expect((yield* client.members(true)).map((n) => n.id)).toEqual(["w"])
          expect((yield* client.stat(URI)).size).toBe(SIZE)
          expect((yield* client.list("s3://faults/")).map((e) => e.path)).toEqual(["/s3/faults/fuzz.bin"])
          expect(Buffer.from(yield* client.read(URI, 17, SIZE)).equals(bytes.subarray(17))).toBe(true)
          yield* report(
            `coordinator control port fuzz: ${totals.sequences} connections, ${totals.frames} frames, ${totals.replies} replies ` +
              `(${totals.errorFrames} error frames); RSS ${(rssBefore / 1024).toFixed(0)} -> ${(rssAfter / 1024).toFixed(0)} MiB`
          )
        })
      ),
    300_000
  )
})
