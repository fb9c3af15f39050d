/**
 * `talon gateway --colocate` as the command line runs it (in-process): a worker from
 * TALON_WORKER_* starts in the gateway's process and registers with the coordinator, the banner
 * says the gateway is co-located, and a range read once is then sent by sendfile from the
 * worker's block files (the worker's own plane is portable here, so any sendfile is the gateway's).
 */
import { Command } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { expect, it } from "@effect/vitest"
import { createHash, randomBytes } from "node:crypto"
import * as path from "node:path"
import { ConfigProvider, Effect, Fiber } from "effect"
import { vi } from "vitest"
import * as Router from "../../src/backend/Router.js"
import { gatewayCommand } from "../../src/gateway/cli.js"
import { OriginStub } from "../../src/origin/OriginStub.js"
import { nativeCounters } from "../../src/worker/plane/Native.js"
import { raw, tempDir } from "../origin/fixtures/testOrigin.js"
import { patientCoordinator } from "../support/loopbackCoordinator.js"
import { eventually } from "../support/eventually.js"

const run = Command.run(
  gatewayCommand(() => import("../../src/cluster/colocated.js").then((m) => m.colocatedWorker)),
  { name: "talon-gateway", version: "test" }
)
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex")

it.scopedLive("--colocate starts a worker in the process and sends its resident blocks by sendfile", () =>
  Effect.gen(function* () {
    const dir = yield* tempDir
    const origin = yield* OriginStub.make({ root: path.join(dir, "origin") })
    const coordinator = yield* patientCoordinator(Router.layerLocal(origin.url))
    const data = randomBytes(3 * 1024 * 1024 + 17)
    yield* Effect.promise(() => raw(origin.url, "PUT", "/colo"))
    yield* Effect.promise(() => raw(origin.url, "PUT", "/colo/data.bin", {}, data))
    const logged: Array<string> = []
    const spy = vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => void logged.push(args.map(String).join(" ")))
    yield* Effect.addFinalizer(() => Effect.sync(() => spy.mockRestore()))
    const argv = ["node", "talon-gateway", "--colocate", "--listen", "127.0.0.1:0", "--route", "cache", "--auth", "off", "--coordinator", coordinator.controlAddress, "--block-size", "1M"]
    const env = new Map([
      ["TALON_S3_ENDPOINT", origin.url],
      ["TALON_S3_ACCESS_KEY_ID", "talon"],
      ["TALON_S3_SECRET_ACCESS_KEY", "talon-secret"],
      ["TALON_WORKER_ID", "colocated"],
      ["TALON_WORKER_COORDINATOR", coordinator.controlAddress],
      ["TALON_WORKER_DATA_ADDR", "127.0.0.1:0"],
      ["TALON_WORKER_ADMIN_ADDR", "127.0.0.1:0"],
      ["TALON_WORKER_CACHE_DIRS", path.join(dir, "cache")],
      ["TALON_WORKER_BLOCK_SIZE", "1M"],
      ["TALON_WORKER_DATA_PLANE", "portable"]
    ])
    const fiber = yield* run(argv).pipe(Effect.provide(NodeContext.layer), Effect.withConfigProvider(ConfigProvider.fromMap(env)), Effect.forkScoped)
    const url = yield* eventually(
      Effect.sync(() => {
        const m = logged.join("\n").match(/listening on (http:\/\/127\.0\.0\.1:\d+) \(cache route\)/)
        if (m === null) throw new Error(`not in the log yet:\n${logged.join("\n")}`)
        return m[1]!
      }),
      { what: "the gateway to report its endpoint", within: "30 seconds", every: "50 millis" }
    )
    expect(logged.join("\n")).toContain("co-located")
    yield* coordinator.members.pipe(Effect.delay("20 millis"), Effect.repeat({ until: (m) => m.length === 1 }), Effect.timeout("30 seconds"))
    const range = { Range: "bytes=100-2100099" }
    const first = yield* Effect.promise(() => raw(url, "GET", "/colo/data.bin", range))
    expect(sha(first.body)).toBe(sha(data.subarray(100, 2_100_100)))
    const before = nativeCounters()!.sendfileCalls
    const second = yield* Effect.promise(() => raw(url, "GET", "/colo/data.bin", range))
    expect(second.status).toBe(206)
    expect(sha(second.body)).toBe(sha(data.subarray(100, 2_100_100)))
    expect(nativeCounters()!.sendfileCalls).toBeGreaterThan(before)
    yield* Fiber.interrupt(fiber)
  })
)
