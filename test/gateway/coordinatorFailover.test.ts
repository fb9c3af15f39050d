/**
 * The gateway's coordinator setting as a list: the cache route keeps serving from
 * the workers (not from the origin) after the first coordinator stops, because its
 * client moves to the second. A real worker and two coordinators in this process,
 * real sockets; every response checked against the origin's bytes.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Exit, Layer, Logger, Scope } from "effect"
import { createHash } from "node:crypto"
import * as path from "node:path"
import { BackendStore } from "../../src/backend/BackendStore.js"
import * as Router from "../../src/backend/Router.js"
import { NodeRole } from "../../src/core/ids.js"
import { Gateway, type GatewayShape } from "../../src/gateway/Gateway.js"
import { OriginStub } from "../../src/origin/OriginStub.js"
import { sampleBytes } from "../../src/origin/seed.js"
import { ControlChannel } from "../../src/transport/ControlChannel.js"
import { Worker } from "../../src/worker/Worker.js"
import { raw, tempDir } from "../origin/fixtures/testOrigin.js"
import { patientCoordinator } from "../support/loopbackCoordinator.js"

const MiB = 1024 * 1024
const BLOCK = 2 * MiB
const OBJECT = sampleBytes(5, 5 * MiB + 321)
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex")
const send = <O>(p: () => Promise<O>) => Effect.promise(p)

describe("gateway with a coordinator list", () => {
  it.scopedLive("the first coordinator stops: reads still come from the cache, and the gateway's log says its client moved", () => {
    const logs: Array<string> = []
    const logger = Logger.make(({ logLevel, message }) => {
      logs.push(`${logLevel.label} ${Array.isArray(message) ? message.join(" ") : String(message)}`)
    })
    return Effect.gen(function* () {
      const dir = yield* tempDir
      const origin = yield* OriginStub.make({ root: path.join(dir, "origin") })
      yield* send(() => raw(origin.url, "PUT", "/cached"))
      yield* send(() => raw(origin.url, "PUT", "/cached/obj.bin", {}, OBJECT))
      const backend = Layer.succeed(BackendStore, yield* Router.make(Router.localOptions(origin.url)))
      const coordinator = (scope: Scope.Scope) =>
        patientCoordinator(backend).pipe(Scope.extend(scope))
      const firstScope = yield* Scope.make()
      yield* Effect.addFinalizer(() => Scope.close(firstScope, Exit.void))
      const first = yield* coordinator(firstScope)
      const second = yield* coordinator(yield* Effect.scope)

      yield* Layer.build(
        Worker.layerSettings({
          id: "w1",
          dataAddress: "127.0.0.1:0",
          adminAddress: "127.0.0.1:0",
          coordinator: first.controlAddress,
          cacheDirs: [path.join(dir, "cache")],
          blockSize: BLOCK,
          pageSize: 256 * 1024,
          heartbeatIntervalMs: 500
        }).pipe(Layer.provide(backend))
      )
      const [member] = yield* first.members.pipe(
        Effect.delay("50 millis"),
        Effect.repeat({ until: (m) => m.length >= 1 }),
        Effect.timeoutFail({ duration: Duration.seconds(30), onTimeout: () => new Error("the worker did not register") })
      )
      // The same worker on the second coordinator (it never expires members in this test).
      const control = yield* ControlChannel.make(second.controlAddress)
      yield* control.request({ _tag: "Register", node: { id: member!.id, address: member!.address, role: NodeRole.Worker } })

      const gw = yield* Layer.build(
        Gateway.layerDeployment({
          gateway: { listen: "127.0.0.1:0", auth: false, workerTimeoutMs: 10_000 },
          route: "cache",
          router: Router.localOptions(origin.url),
          client: {
            coordinator: `${first.controlAddress},${second.controlAddress}`,
            blockSize: BLOCK,
            connectTimeoutMs: 500,
            statTtlMs: 100,
            membershipTtlMs: 200
          }
        })
      ).pipe(Effect.map((ctx): GatewayShape => Context.get(ctx, Gateway)))

      const getChecked = (range?: string) =>
        Effect.gen(function* () {
          const headers: Record<string, string> = range === undefined ? {} : { Range: range }
          const r = yield* send(() => raw(gw.url, "GET", "/cached/obj.bin", headers))
          const ref = yield* send(() => raw(origin.url, "GET", "/cached/obj.bin", headers))
          expect(r.status).toBe(ref.status)
          expect(r.headers.etag).toBe(ref.headers.etag)
          expect(sha(r.body)).toBe(sha(ref.body))
        })

      yield* getChecked()
      yield* getChecked("bytes=1000000-3500000")
      const before = gw.stats()
      expect(before.cachePieces).toBeGreaterThan(0)
      expect(before.fallbackPieces).toBe(0)

      yield* Scope.close(firstScope, Exit.void)
      // Past the stat and membership TTLs many times over: both must have come from the second coordinator.
      for (let i = 0; i < 5; i++) {
        yield* Effect.sleep("250 millis")
        yield* getChecked()
        yield* getChecked("bytes=-100000")
      }
      const after = gw.stats()
      // From the cache: through the route's client, or relayed from the workers by splice.
      expect(after.cachePieces + after.remoteBodies).toBeGreaterThan(before.cachePieces + before.remoteBodies)
      expect(after.fallbackPieces).toBe(0)
      expect(after.aborted).toBe(0)
      expect(
        logs.filter((l) => l.includes(`coordinator ${first.controlAddress} does not answer`) && l.includes(`moved to coordinator ${second.controlAddress}`)),
        logs.join("\n")
      ).toHaveLength(1)
    }).pipe(Effect.provide(Logger.add(logger)))
  }, 120_000)
})
