/**
 * `talon read` and `talon cluster` run in-process (the Command handlers with real
 * argument parsing) against a real coordinator and fake workers.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { PassThrough } from "node:stream"
import { Command } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, type Scope } from "effect"
import { vi } from "vitest"
import { cluster, read, readToSink } from "../../src/client/cli.js"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import type { CoordinatorShape } from "../../src/coordinator/Coordinator.js"
import type { MemoryObject } from "../coordinator/fixtures/memoryBackend.js"
import { testCoordinator } from "../coordinator/fixtures/harness.js"
import { registeredFakeWorker } from "./fixtures/registeredWorker.js"

const BLOCK = 64 * 1024
const data = randomBytes(3 * BLOCK + 99)
const store = new Map<string, MemoryObject>([["/s3/bucket/obj.bin", { bytes: data, version: "v1" }]])

const withWorker = <A, E>(body: (c: CoordinatorShape) => Effect.Effect<A, E, Scope.Scope>) =>
  testCoordinator(
    { heartbeatIntervalMs: 60_000 },
    (c) =>
      Effect.gen(function* () {
        yield* registeredFakeWorker(store, c.controlAddress, "w")
        return yield* body(c)
      }),
    store
  )

const run = <Name extends string, R, E, A>(command: Command.Command<Name, R, E, A>, args: ReadonlyArray<string>) =>
  Command.run(command, { name: "talon", version: "test" })(["node", "talon", ...args]).pipe(
    Effect.provide(NodeContext.layer)
  )

describe("talon read", () => {
  it.live("--offset/--length/--out writes exactly that range to the file", () =>
    withWorker((c) =>
      Effect.gen(function* () {
        const dir = yield* Effect.acquireRelease(
          Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "talon-read-"))),
          (d) => Effect.sync(() => fs.rmSync(d, { recursive: true, force: true }))
        )
        const out = path.join(dir, "range.bin")
        yield* run(read, [
          "--offset", "1000",
          "--length", String(2 * BLOCK),
          "--out", out,
          "--coordinator", c.controlAddress,
          "--block-size", String(BLOCK),
          "s3://bucket/obj.bin"
        ])
        expect(fs.readFileSync(out).equals(data.subarray(1000, 1000 + 2 * BLOCK))).toBe(true)
        // No --length: to the end of the object.
        yield* run(read, ["--offset", "5", "--out", out, "--coordinator", c.controlAddress, "--block-size", String(BLOCK), "s3://bucket/obj.bin"])
        expect(fs.readFileSync(out).equals(data.subarray(5))).toBe(true)
        // A coordinator list: the dead first entry is passed over.
        yield* run(read, ["--out", out, "--coordinator", `127.0.0.1:1,${c.controlAddress}`, "--block-size", String(BLOCK), "s3://bucket/obj.bin"])
        expect(fs.readFileSync(out).equals(data)).toBe(true)
      })
    )
  )

  it.live("the stdout path streams every byte in order through a slow sink", () =>
    withWorker((c) =>
      Effect.gen(function* () {
        const client = yield* makeTalonClient({ coordinator: c.controlAddress, blockSize: BLOCK, maxRequestBytes: 8192 })
        // A sink with a tiny buffer that drains slowly: writes must wait for it.
        const sink = new PassThrough({ highWaterMark: 1024 })
        const received: Array<Buffer> = []
        const drained = new Promise<void>((resolve) => {
          const pump = () => {
            for (let chunk = sink.read(); chunk !== null; chunk = sink.read()) received.push(chunk)
          }
          sink.on("readable", () => setTimeout(pump, 1))
          sink.on("end", () => {
            pump()
            resolve()
          })
        })
        const written = yield* readToSink(client, "s3://bucket/obj.bin", 7, data.length, sink)
        sink.end()
        yield* Effect.promise(() => drained)
        expect(written).toBe(data.length - 7)
        expect(Buffer.concat(received).equals(data.subarray(7))).toBe(true)
      })
    )
  )
})

describe("talon cluster", () => {
  it.live("prints the membership table from the control plane and, with --admin, from the admin API", () =>
    withWorker((c) =>
      Effect.gen(function* () {
        const lines: Array<string> = []
        const spy = vi.spyOn(console, "log").mockImplementation((...args: Array<unknown>) => {
          lines.push(args.map(String).join(" "))
        })
        yield* Effect.ensuring(
          Effect.gen(function* () {
            yield* run(cluster, ["--coordinator", c.controlAddress])
            yield* run(cluster, ["--admin", c.adminAddress])
          }),
          Effect.sync(() => spy.mockRestore())
        )
        const text = lines.join("\n")
        expect(text).toMatch(/1 member\(s\)/)
        expect(text).toMatch(/^w\s+127\.0\.0\.1:\d+\s+worker$/m)
        expect(text).toMatch(/^epoch \d+ · 1 member\(s\)/m)
        expect(text).toMatch(/^w\s+127\.0\.0\.1:\d+\s+worker\s+[\d.]+s ago\s+0$/m)
      })
    )
  )
})
