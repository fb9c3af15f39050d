/**
 * The failover proof: two workers as real child processes, the gateway on the
 * cache route, the official S3 SDK streaming ranged reads through it. One worker is
 * SIGKILLed mid-stream: zero client-visible errors, zero wrong bytes, and the reads
 * keep coming from the cache (the survivor) or, per piece, the origin.
 */
import { GetObjectCommand } from "@aws-sdk/client-s3"
import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import * as path from "node:path"
import * as Router from "../../src/backend/Router.js"
import { Gateway } from "../../src/gateway/Gateway.js"
import { spawnWorker, type Child } from "../cluster/fixtures/processes.js"
import { tempDir } from "../origin/fixtures/testOrigin.js"
import { s3ClientFor } from "../support/sdkSuite.js"
import { authOn, gatewayEndpoint } from "./fixtures/targets.js"
import { loopbackCoordinator } from "../support/loopbackCoordinator.js"
import { stubWithObjects } from "../support/stubWithObjects.js"
import { eventually } from "../support/eventually.js"

const MiB = 1024 * 1024
const BLOCK = MiB
const HEARTBEAT_MS = 300

describe("gateway failover", () => {
  it.scopedLive(
    "a worker SIGKILLed during a stream of ranged reads: zero client-visible errors, zero wrong bytes",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const bytes = randomBytes(24 * MiB + 777)
        const origin = yield* stubWithObjects(dir, { "failover/big.bin": bytes })
        const coordinator = yield* loopbackCoordinator(Router.layerLocal(origin.url), { heartbeatIntervalMs: HEARTBEAT_MS, missedHeartbeats: 3 })

        const workers = new Map<string, Child>()
        for (const id of ["worker-a", "worker-b"]) {
          const cache = path.join(dir, id)
          workers.set(
            id,
            yield* spawnWorker(
              {
                TALON_WORKER_ID: id,
                TALON_WORKER_COORDINATOR: coordinator.controlAddress,
                TALON_WORKER_DATA_ADDR: "127.0.0.1:0",
                TALON_WORKER_ADMIN_ADDR: "127.0.0.1:0",
                TALON_WORKER_CACHE_DIRS: cache,
                TALON_WORKER_BLOCK_SIZE: String(BLOCK),
                TALON_WORKER_PAGE_SIZE: String(256 * 1024),
                TALON_WORKER_HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_MS),
                TALON_S3_ENDPOINT: origin.url,
                TALON_S3_ACCESS_KEY_ID: "talon",
                TALON_S3_SECRET_ACCESS_KEY: "talon-secret"
              },
              ["--cache-dir", cache]
            )
          )
        }
        const diagnostics = () => [...workers].map(([id, c]) => `--- ${id} (pid ${c.pid}) ---\n${c.output()}`).join("\n")
        yield* coordinator.members.pipe(
          Effect.delay("100 millis"),
          Effect.repeat({ until: (m) => m.length === 2 }),
          Effect.timeoutFail({ duration: Duration.seconds(90), onTimeout: () => new Error(`workers did not register:\n${diagnostics()}`) })
        )

        const gw = yield* Layer.build(
          Gateway.layerDeployment({
            gateway: { listen: "127.0.0.1:0", ...authOn, workerTimeoutMs: 10_000 },
            route: "cache",
            router: Router.localOptions(origin.url),
            client: { coordinator: coordinator.controlAddress, blockSize: BLOCK, replicas: 2, connectTimeoutMs: 1000 }
          })
        ).pipe(Effect.map((ctx) => Context.get(ctx, Gateway)))
        const s3 = s3ClientFor(gatewayEndpoint(gw))

        let reads = 0
        let afterKill = 0
        let killed = false
        const errors: Array<string> = []
        const wrong: Array<string> = []
        let seed = 12345
        const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31)
        const reader = async (stopAt: () => boolean) => {
          while (!stopAt()) {
            const start = next() % (bytes.length - 1)
            const len = 1 + (next() % (3 * MiB))
            const end = Math.min(bytes.length - 1, start + len - 1)
            try {
              const out = await s3.send(new GetObjectCommand({ Bucket: "failover", Key: "big.bin", Range: `bytes=${start}-${end}` }))
              const got = Buffer.from(await out.Body!.transformToByteArray())
              if (!got.equals(bytes.subarray(start, end + 1))) wrong.push(`bytes=${start}-${end}: ${got.length} bytes, differ`)
            } catch (e) {
              errors.push(`bytes=${start}-${end}: ${(e as Error).name}: ${(e as Error).message}`)
            }
            reads++
            if (killed) afterKill++
          }
        }
        let stop = false
        const readers = Promise.all([0, 1, 2, 3].map(() => reader(() => stop)))

        // Warm both workers, then kill the one that has served (owns) the first block.
        yield* eventually(Effect.sync(() => expect(reads >= 24 || errors.length > 0).toBe(true)), { what: "24 reads before the kill", within: "60 seconds" })
        const cachedBefore = gw.stats().cachePieces
        const victim = workers.get("worker-a")!
        victim.process.kill("SIGKILL")
        killed = true
        const exit = yield* Effect.promise(() => victim.exited)
        expect(exit.signal).toBe("SIGKILL")
        yield* eventually(Effect.sync(() => expect(afterKill >= 40 || errors.length > 0).toBe(true)), { what: "40 reads after the kill", within: "60 seconds" })
        stop = true
        yield* Effect.promise(() => readers)

        const stats = gw.stats()
        console.log(
          `gateway failover: ${reads} ranged reads (${afterKill} after the kill); pieces from cache ${stats.cachePieces} (${cachedBefore} before), from origin after failures ${stats.fallbackPieces}`
        )
        expect(errors, diagnostics()).toEqual([])
        expect(wrong).toEqual([])
        expect(afterKill).toBeGreaterThanOrEqual(40)
        expect(cachedBefore).toBeGreaterThan(0)
        // The survivor kept serving from the cache after the kill.
        expect(stats.cachePieces).toBeGreaterThan(cachedBefore)
        expect(stats.aborted).toBe(0)
        expect(workers.get("worker-b")!.process.exitCode).toBeNull()
      }),
    120_000
  )
})
