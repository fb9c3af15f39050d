/**
 * The coordinator proof, end to end: an origin stub and a coordinator in
 * this process, two workers as real child processes. A worker killed with
 * SIGKILL disappears from the membership within the liveness window, and the
 * client then reads the same bytes through the remaining worker.
 */
import { epochForWire, membershipEpoch } from "../../src/coordinator/state/epoch.js"
import { randomBytes } from "node:crypto"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Either } from "effect"
import * as Router from "../../src/backend/Router.js"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import { objectIdFromUri } from "../../src/core/objectId.js"
import { Maglev } from "../../src/placement/index.js"
import { spawnWorker, type Child } from "./fixtures/processes.js"
import { scopedTempDir } from "../support/scopedTempDir.js"
import { loopbackCoordinator } from "../support/loopbackCoordinator.js"
import { stubWithObjects } from "../support/stubWithObjects.js"

const BLOCK = 256 * 1024
const HEARTBEAT_MS = 200
const MISSED = 3
const WINDOW_MS = HEARTBEAT_MS * MISSED
const URI = "s3://cluster/data/sample.bin"

const tempDir = scopedTempDir("talon-cluster-")

describe("cluster: worker failure", () => {
  it.live(
    "a SIGKILLed worker leaves the membership within the window; reads then succeed through the survivor",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const dir = yield* tempDir
          const bytes = randomBytes(12 * BLOCK + 4321)
          const origin = yield* stubWithObjects(dir, { "cluster/data/sample.bin": bytes })
          const coordinator = yield* loopbackCoordinator(Router.layerLocal(origin.url), {
            heartbeatIntervalMs: HEARTBEAT_MS,
            missedHeartbeats: MISSED
          })

          const workers = new Map<string, Child>()
          for (const id of ["worker-a", "worker-b"]) {
            const child = yield* spawnWorker({
              TALON_WORKER_ID: id,
              TALON_WORKER_COORDINATOR: coordinator.controlAddress,
              TALON_WORKER_DATA_ADDR: "127.0.0.1:0",
              TALON_WORKER_ADMIN_ADDR: "127.0.0.1:0",
              TALON_WORKER_CACHE_DIRS: path.join(dir, id),
              TALON_WORKER_BLOCK_SIZE: String(BLOCK),
              TALON_WORKER_PAGE_SIZE: "0",
              TALON_WORKER_HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_MS),
              TALON_S3_ENDPOINT: origin.url,
              TALON_S3_ACCESS_KEY_ID: "talon",
              TALON_S3_SECRET_ACCESS_KEY: "talon-secret"
            }, ["--cache-dir", path.join(dir, id)])
            workers.set(id, child)
          }
          const diagnostics = () =>
            [...workers].map(([id, c]) => `--- ${id} (pid ${c.pid}) ---\n${c.output()}`).join("\n")

          // Both children registered (they load TypeScript through tsx on start, slow on a busy machine: allow a generous bound).
          yield* coordinator.members.pipe(
            Effect.delay("100 millis"),
            Effect.repeat({ until: (m) => m.length === 2 }),
            Effect.timeoutFail({
              duration: Duration.seconds(120),
              onTimeout: () => new Error(`workers did not register:\n${diagnostics()}`)
            })
          )

          yield* Effect.logInfo("both workers registered")
          const client = yield* makeTalonClient({
            coordinator: coordinator.controlAddress,
            blockSize: BLOCK,
            replicas: 2,
            membershipTtlMs: 60_000
          })
          const cold = yield* client.read(URI, 0, bytes.length)
          expect(Buffer.from(cold).equals(bytes)).toBe(true)
          yield* Effect.logInfo("cold read done")
          const originGets = (yield* origin.stats()).requests.get
          const warm = yield* client.read(URI, 0, bytes.length)
          expect(Buffer.from(warm).equals(bytes)).toBe(true)
          expect((yield* origin.stats()).requests.get).toBe(originGets)

          // Kill the primary of block 0, so the post-failure read must route around it.
          const members = yield* client.members()
          const object = Either.getOrThrow(objectIdFromUri(URI))
          const info = yield* client.stat(URI)
          const victim = Maglev.build(members).primary({ object, offset: 0, blockSize: BLOCK, version: info.version })!
          const survivor = victim === "worker-a" ? "worker-b" : "worker-a"
          const epochBefore = yield* coordinator.epoch
          const killedAt = Date.now()
          workers.get(victim)!.process.kill("SIGKILL")
          const exit = yield* Effect.promise(() => workers.get(victim)!.exited)
          expect(exit.signal).toBe("SIGKILL")

          const remaining = yield* coordinator.members.pipe(
            Effect.delay("20 millis"),
            Effect.repeat({ until: (m) => m.length === 1 }),
            Effect.timeoutFail({
              duration: Duration.seconds(10),
              onTimeout: () => new Error(`${victim} never left the membership:\n${diagnostics()}`)
            })
          )
          const goneAfter = Date.now() - killedAt
          expect(remaining.map((n) => n.id)).toEqual([survivor])
          // Its last heartbeat preceded the kill, so it must be gone one window after the kill,
          // give or take this process's own scheduling (the 20 ms poll, event-loop lag).
          expect(goneAfter).toBeLessThanOrEqual(WINDOW_MS + 1000)
          // The epoch is the content hash of the new membership: changed, and what any coordinator derives from it.
          const epochAfter = yield* coordinator.epoch
          expect(epochAfter).not.toBe(epochBefore)
          expect(epochAfter).toBe(epochForWire(yield* membershipEpoch(remaining)))
          const cluster = yield* coordinator.cluster
          expect(cluster.members.map((m) => m.id)).toEqual([survivor])

          // The client still caches the old membership (TTL 60 s): its replica fallback or
          // refresh-and-retry must carry the read to the survivor, byte for byte.
          const after = yield* client.read(URI, 0, bytes.length)
          expect(Buffer.from(after).equals(bytes)).toBe(true)
          const partial = yield* client.read(URI, BLOCK - 100, 3 * BLOCK)
          expect(Buffer.from(partial).equals(bytes.subarray(BLOCK - 100, 4 * BLOCK - 100))).toBe(true)
          // With a fresh membership the client routes everything to the survivor alone.
          expect((yield* client.members(true)).map((n) => n.id)).toEqual([survivor])
          expect(workers.get(survivor)!.process.exitCode).toBeNull()
          yield* Effect.logInfo(`${victim} left the membership ${goneAfter} ms after SIGKILL (window ${WINDOW_MS} ms)`)
        })
      ),
    180_000
  )
})
