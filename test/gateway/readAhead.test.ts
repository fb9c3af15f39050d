/**
 * The gateway's cache route reads ahead of a sequential response: its pieces of one GET (and
 * a series of ranged GETs one after another, as `aws s3 cp` sends) are a sequential run of
 * the embedded client, which fetches the next chunks from the workers before they are asked
 * for; random ranged GETs are not read ahead. Every body is checked against the origin.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Layer } from "effect"
import * as path from "node:path"
import { BackendStore } from "../../src/backend/BackendStore.js"
import * as Router from "../../src/backend/Router.js"
import { Gateway, type GatewayShape } from "../../src/gateway/Gateway.js"
import { OriginStub } from "../../src/origin/OriginStub.js"
import { sampleBytes } from "../../src/origin/seed.js"
import { Worker } from "../../src/worker/Worker.js"
import { raw, tempDir } from "../origin/fixtures/testOrigin.js"
import { patientCoordinator } from "../support/loopbackCoordinator.js"
import { loopbackWorkerSettings } from "../support/loopbackWorker.js"

const MiB = 1024 * 1024
const BLOCK = MiB
const BUCKET = "readahead"
const SIZE = 24 * MiB + 4321

const cluster = Effect.gen(function* () {
  const dir = yield* tempDir
  const origin = yield* OriginStub.make({ root: path.join(dir, "origin") })
  yield* Effect.promise(() => raw(origin.url, "PUT", `/${BUCKET}`))
  const backend = Layer.succeed(BackendStore, yield* Router.make(Router.localOptions(origin.url)))
  const coordinator = yield* patientCoordinator(backend)
  for (const id of ["w1", "w2"]) {
    yield* Layer.build(
      Worker.layerSettings(
        loopbackWorkerSettings(id, dir, coordinator.controlAddress, {
          blockSize: BLOCK,
          pageSize: 256 * 1024,
          dataPlane: "portable"
        })
      ).pipe(Layer.provide(backend))
    )
  }
  yield* coordinator.members.pipe(Effect.delay("50 millis"), Effect.repeat({ until: (m) => m.length >= 2 }), Effect.timeout(Duration.seconds(30)))
  const gw = yield* Layer.build(
    Gateway.layerDeployment({
      // The route's client reads ahead; the splice relay (remoteBody.test.ts) asks each piece itself.
      gateway: { listen: "127.0.0.1:0", auth: false, workerTimeoutMs: 20_000, statTtlMs: 60_000, remoteSplice: false },
      route: "cache",
      router: Router.localOptions(origin.url),
      client: { coordinator: coordinator.controlAddress, blockSize: BLOCK, maxRequestBytes: 2 * MiB, readAheadBytes: 8 * MiB, statTtlMs: 60_000 }
    })
  ).pipe(Effect.map((ctx): GatewayShape => Context.get(ctx, Gateway)))
  const put = (key: string, seed: number) =>
    Effect.promise(async () => {
      const bytes = sampleBytes(seed, SIZE)
      expect((await raw(origin.url, "PUT", `/${BUCKET}/${key}`, {}, bytes)).status).toBe(200)
      return bytes
    })
  return { origin, gw, put }
})

const get = (gw: GatewayShape, key: string, range?: [number, number]) =>
  Effect.promise(() => raw(gw.url, "GET", `/${BUCKET}/${key}`, range === undefined ? {} : { Range: `bytes=${range[0]}-${range[1] - 1}` }))

const readAhead = (gw: GatewayShape) => {
  const s = gw.stats().readAhead
  if (s === undefined) throw new Error("the cache route reports no read-ahead")
  return s
}

describe("gateway read-ahead (cache route)", () => {
  it.scopedLive("a cold single-stream GET is read ahead of, across blocks and workers; each origin byte fetched about once", () =>
    Effect.gen(function* () {
      const { origin, gw, put } = yield* cluster
      const bytes = yield* put("whole.bin", 11)
      yield* origin.resetStats()
      const r = yield* get(gw, "whole.bin")
      expect(r.status).toBe(200)
      expect(r.body.equals(bytes)).toBe(true)
      const s = readAhead(gw)
      expect(s.sequentialReads).toBeGreaterThan(0)
      // All but the run's first pieces came from chunks fetched ahead.
      expect(s.servedBytes).toBeGreaterThan(SIZE - 4 * MiB)
      expect(s.unreadBytes).toBeLessThanOrEqual(2 * MiB)
      const served = (yield* origin.stats()).bytesServed
      expect(served).toBeGreaterThanOrEqual(SIZE)
      expect(served / SIZE).toBeLessThanOrEqual(1.25)
    })
  )

  it.scopedLive("sequential ranged GETs one after another are read ahead; random ranged GETs are not", () =>
    Effect.gen(function* () {
      const { gw, put } = yield* cluster
      const parts = yield* put("parts.bin", 12)
      const random = yield* put("random.bin", 13)

      const before = readAhead(gw)
      const RANGE = 64 * 1024
      let x = 99
      for (let i = 0; i < 32; i++) {
        x = (Math.imul(x, 1103515245) + 12345) >>> 0
        const at = x % (SIZE - RANGE)
        const r = yield* get(gw, "random.bin", [at, at + RANGE])
        expect(r.status).toBe(206)
        expect(r.body.equals(random.subarray(at, at + RANGE))).toBe(true)
      }
      const afterRandom = readAhead(gw)
      expect(afterRandom.fetchedBytes).toBe(before.fetchedBytes)

      // 2 MiB parts, one at a time, as a ranged-GET copy sends them.
      for (let at = 0; at < SIZE; at += 2 * MiB) {
        const end = Math.min(SIZE, at + 2 * MiB)
        const r = yield* get(gw, "parts.bin", [at, end])
        expect(r.status).toBe(206)
        expect(r.body.equals(parts.subarray(at, end))).toBe(true)
      }
      const afterParts = readAhead(gw)
      expect(afterParts.fetchedBytes).toBeGreaterThan(afterRandom.fetchedBytes)
      expect(afterParts.servedBytes - afterRandom.servedBytes).toBeGreaterThan(SIZE / 2)
    })
  )
})
