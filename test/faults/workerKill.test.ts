/**
 * A worker SIGKILLed while a client reads random ranges: three workers as real
 * processes, the coordinator and origin stub in this process, two replicas per
 * block. Every byte of every read is compared with the origin's copy; the
 * client must see no error at all. Reported: when the coordinator dropped the
 * worker, when the client's membership did, and when every block the dead
 * worker owned was served from the cache again (a full pass over them with no
 * origin request). The worker is then restarted on its address and cache
 * directory while the reader goes on: still no error, and when it rejoined.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Fiber, Ref } from "effect"
import * as Router from "../../src/backend/Router.js"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import { makeCoordinator } from "../../src/coordinator/Coordinator.js"
import { objectIdFromUri } from "../../src/core/objectId.js"
import { Maglev } from "../../src/placement/index.js"
import { kill9, originWith, outputs, pollUntil, randomReader, report, startWorker, tempDir, type WorkerProcess } from "./fixtures/talon.js"

const MiB = 1024 * 1024
const BLOCK = MiB
const HEARTBEAT_MS = 300
const SIZE = 24 * MiB + 4321
const URI = "s3://faults/kill.bin"

describe("fault: worker SIGKILL under a reading client", () => {
  it.live(
    "zero wrong bytes and zero client-visible errors; the dead worker's blocks are cached again on the survivors",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const dir = yield* tempDir
          const origin = yield* originWith(dir, { "kill.bin": SIZE })
          const bytes = origin.objects.get(URI)!
          const coordinator = yield* makeCoordinator({
            listen: "127.0.0.1:0",
            adminListen: "127.0.0.1:0",
            heartbeatIntervalMs: HEARTBEAT_MS,
            missedHeartbeats: 3
          }).pipe(Effect.provide(Router.layerLocal(origin.stub.url)))
          const workers: Array<WorkerProcess> = []
          for (const id of ["worker-a", "worker-b", "worker-c"]) {
            workers.push(
              yield* startWorker(dir, origin, { id, coordinator: coordinator.controlAddress, blockSize: BLOCK, heartbeatMs: HEARTBEAT_MS })
            )
          }
          const diagnostics = () => outputs(workers.map((w) => [w.id, w.child] as const))
          yield* pollUntil(coordinator.members, (m) => m.length === 3, 120_000, () => `workers did not register:\n${diagnostics()}`)

          const client = yield* makeTalonClient({
            coordinator: coordinator.controlAddress,
            blockSize: BLOCK,
            replicas: 2,
            membershipTtlMs: 1000,
            connectTimeoutMs: 1000
          })
          expect(Buffer.from(yield* client.read(URI, 0, SIZE)).equals(bytes)).toBe(true)

          // The victim is the primary of the most blocks; those are what recovery is measured on.
          const info = yield* client.stat(URI)
          const object = Either.getOrThrow(objectIdFromUri(URI))
          const maglev = Maglev.build(yield* client.members())
          const primaryOf = (i: number) => maglev.primary({ object, offset: i * BLOCK, blockSize: BLOCK, version: info.version })!
          const blocks = Array.from({ length: Math.ceil(SIZE / BLOCK) }, (_, i) => i)
          const owned = new Map<string, Array<number>>()
          for (const i of blocks) owned.set(primaryOf(i), [...(owned.get(primaryOf(i)) ?? []), i])
          const [victimId, victimBlocks] = [...owned].sort((a, b) => b[1].length - a[1].length)[0]!
          const victim = workers.find((w) => w.id === victimId)!

          const seed = Date.now() >>> 0
          const reader = yield* randomReader(client.read, origin.objects, [URI], { seed, maxLength: 3 * BLOCK })
          const stats = reader.stats
          yield* reader.more(20, "before the kill")

          const killedAt = Date.now()
          const exit = yield* kill9(victim.child)
          expect(exit.signal).toBe("SIGKILL")
          // When the coordinator and the client drop it, watched alongside the recovery passes.
          const dropped = (members: typeof coordinator.members) =>
            Effect.fork(
              Effect.map(
                pollUntil(members, (m) => !m.some((n) => n.id === victimId), 60_000, () => `${victimId} was never dropped`),
                () => Date.now() - killedAt
              )
            )
          const coordinatorDrop = yield* dropped(coordinator.members)
          const clientDrop = yield* dropped(Effect.orDie(client.members()))

          // Recovery: a pass over every block the victim owned that makes no origin request.
          const pass = Effect.gen(function* () {
            const before = (yield* origin.stub.stats()).requests.get
            for (const i of victimBlocks) {
              const length = Math.min(BLOCK, SIZE - i * BLOCK)
              const got = yield* client.read(URI, i * BLOCK, length)
              expect(Buffer.from(got).equals(bytes.subarray(i * BLOCK, i * BLOCK + length))).toBe(true)
            }
            return (yield* origin.stub.stats()).requests.get - before
          })
          yield* pollUntil(pass, (originGets) => originGets === 0, 60_000, () => `victim blocks never came from cache:\n${diagnostics()}`, 10)
          const cachedAgainMs = Date.now() - killedAt
          const coordinatorDroppedMs = yield* Fiber.join(coordinatorDrop)
          const clientDroppedMs = yield* Fiber.join(clientDrop)

          // Keep reading a little past the membership change.
          yield* reader.more(20, "after the drop")

          // The victim comes back on its address and cache directory, with the reader still going.
          const restartedAt = Date.now()
          const back = yield* startWorker(dir, origin, {
            id: victimId,
            coordinator: coordinator.controlAddress,
            blockSize: BLOCK,
            heartbeatMs: HEARTBEAT_MS,
            address: victim.address
          })
          workers.push(back)
          yield* pollUntil(client.members(), (m) => m.some((n) => n.id === victimId), 120_000, () => `victim did not rejoin:\n${diagnostics()}`)
          const rejoinedMs = Date.now() - restartedAt
          const rejoinGets = yield* pass
          yield* reader.more(20, "after the rejoin")
          yield* Fiber.interrupt(reader.fiber)
          const final = yield* Ref.get(stats)
          expect(final.errors).toEqual([])
          expect(final.wrong).toBe(0)
          expect(Buffer.from(yield* client.read(URI, 0, SIZE)).equals(bytes)).toBe(true)
          for (const w of workers) if (w !== victim) expect(w.child.process.exitCode).toBeNull()
          yield* pollUntil(pass, (originGets) => originGets === 0, 60_000, () => "the rejoined worker's blocks never came from cache")
          yield* report(
            `worker SIGKILL (seed ${seed}): victim ${victimId} owned ${victimBlocks.length}/${blocks.length} blocks; ` +
              `${final.reads} reads, ${(final.bytes / MiB).toFixed(1)} MiB checked, 0 errors, 0 wrong bytes; ` +
              `victim's blocks cached again after ${cachedAgainMs} ms; coordinator dropped it after ${coordinatorDroppedMs} ms, ` +
              `client membership after ${clientDroppedMs} ms (window ${3 * HEARTBEAT_MS} ms + client TTL 1000 ms); ` +
              `restarted on its cache directory it was back in the client's membership after ${rejoinedMs} ms, ` +
              `and the first pass over its blocks made ${rejoinGets} origin GETs`
          )
        })
      ),
    240_000
  )
})
