/**
 * TalonClient against the real thing, in one process: origin stub → backend
 * Router → coordinator + two workers (Worker.layer) → client. Origin traffic is
 * read from the stub's own counters.
 */
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Duration, Effect, Layer, Stream } from "effect"
import * as Router from "../../src/backend/Router.js"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import { Worker } from "../../src/worker/Worker.js"
import { scopedTempDir } from "../support/scopedTempDir.js"
import { loopbackCoordinator } from "../support/loopbackCoordinator.js"
import { stubWithObjects } from "../support/stubWithObjects.js"
import { loopbackWorkerSettings } from "../support/loopbackWorker.js"

const BLOCK = 128 * 1024
const PAGE = 16 * 1024

const tempDir = scopedTempDir("talon-client-")

describe("TalonClient with a real coordinator and real workers", () => {
  it.live(
    "cold and warm reads (S3 and Azure), streaming, stat and list through the cluster",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const dir = yield* tempDir
          const data = randomBytes(5 * BLOCK + 777)
          const origin = yield* stubWithObjects(dir, { "bucket/sets/a.bin": data, "bucket/sets/b.bin": data.subarray(0, 99) })
          const backend = Router.layerLocal(origin.url)
          const coordinator = yield* loopbackCoordinator(backend)
          for (const id of ["w1", "w2"]) {
            yield* Layer.build(
              Worker.layerSettings(
                loopbackWorkerSettings(id, dir, coordinator.controlAddress, {
                  blockSize: BLOCK,
                  pageSize: PAGE,
                  dataPlane: "portable",
                  versionTtlMs: 60_000
                })
              ).pipe(Layer.provide(backend))
            )
          }
          yield* coordinator.members.pipe(
            Effect.delay("20 millis"),
            Effect.repeat({ until: (m) => m.length === 2 }),
            Effect.timeout(Duration.seconds(20))
          )
          const client = yield* makeTalonClient({ coordinator: coordinator.controlAddress, blockSize: BLOCK })

          for (const uri of ["s3://bucket/sets/a.bin", "az://bucket/sets/a.bin"]) {
            const cold = yield* client.read(uri, 0, data.length)
            expect(Buffer.from(cold).equals(data), uri).toBe(true)
            const before = yield* origin.stats()
            const warm = yield* client.read(uri, 0, data.length)
            expect(Buffer.from(warm).equals(data), uri).toBe(true)
            const range = yield* client.read(uri, BLOCK - 5, 2 * BLOCK + 10)
            expect(Buffer.from(range).equals(data.subarray(BLOCK - 5, 3 * BLOCK + 5)), uri).toBe(true)
            const streamed = yield* Stream.runCollect(client.readStream(uri, 3, data.length))
            expect(Buffer.concat(Chunk.toArray(streamed)).equals(data.subarray(3)), uri).toBe(true)
            const after = yield* origin.stats()
            // Warm: no origin GET moved (metadata is cached by the client and the workers).
            expect(after.requests.get, uri).toBe(before.requests.get)
            expect(after.bytesServed, uri).toBe(before.bytesServed)
          }

          expect(yield* client.stat("s3://bucket/sets/b.bin")).toMatchObject({ size: 99 })
          expect(yield* client.list("s3://bucket/sets/")).toEqual([
            { path: "/s3/bucket/sets/a.bin", size: data.length },
            { path: "/s3/bucket/sets/b.bin", size: 99 }
          ])
          expect(yield* client.list("/az/bucket/sets/b")).toEqual([{ path: "/az/bucket/sets/b.bin", size: 99 }])
          const missing = yield* Effect.flip(client.read("s3://bucket/sets/none.bin", 0, 1))
          expect(missing._tag).toBe("ObjectNotFound")
        })
      ),
    60_000
  )
})
