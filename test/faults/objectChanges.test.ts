/**
 * Fault: the object changes at the origin while it is cached (same size, other sizes).
 * A read after the version TTLs returns the new bytes, through TalonClient and through the
 * gateway (whose ETag names them); a read in flight while the object is replaced at a slow
 * origin returns one version whole or fails as a whole — never old and new bytes in one body.
 * Real sockets and files: origin stub, coordinator, two workers, gateway, all in-process.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Either, Layer } from "effect"
import * as Router from "../../src/backend/Router.js"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import { Gateway, type GatewayShape } from "../../src/gateway/Gateway.js"
import { raw } from "../origin/fixtures/testOrigin.js"
import { clusterWithVersionLog, explain, matchingVersion, versionBytes } from "../support/overwrites.js"

const KiB = 1024
const BLOCK = 256 * KiB
const TTL_MS = 250
const URI = "s3://bucket/obj.bin"

const gatewayOn = (originUrl: string, coordinator: string) =>
  Layer.build(
    Gateway.layerDeployment({
      gateway: { listen: "127.0.0.1:0", auth: false, workerTimeoutMs: 20_000, statTtlMs: TTL_MS, pieceBytes: 64 * KiB, readAhead: 4 },
      route: "cache",
      router: Router.localOptions(originUrl),
      client: { coordinator, blockSize: BLOCK, requestTimeoutMs: 30_000, statTtlMs: TTL_MS }
    })
  ).pipe(Effect.map((ctx): GatewayShape => Context.get(ctx, Gateway)))

describe("fault: the object changes at the origin while cached", () => {
  it.live(
    "after the version TTL a read returns the new bytes (same size, smaller, larger); one read never mixes old and new",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { cluster, log } = yield* clusterWithVersionLog({ workers: 2, blockSize: BLOCK, pageSize: 64 * KiB, versionTtlMs: TTL_MS })
          const client = yield* makeTalonClient({ coordinator: cluster.coordinator, blockSize: BLOCK, statTtlMs: TTL_MS })
          const gw = yield* gatewayOn(cluster.origin.url, cluster.coordinator)
          const size = 3 * BLOCK * 4 + 123

          const readBoth = (want: Buffer, label: string) =>
            Effect.gen(function* () {
              const viaClient = yield* client.read(URI, 0, size * 2)
              expect(Buffer.from(viaClient).equals(want), `${label}: client read`).toBe(true)
              const viaGateway = yield* Effect.promise(() => raw(gw.url, "GET", "/bucket/obj.bin"))
              expect(viaGateway.status, label).toBe(200)
              expect(log.byEtag(String(viaGateway.headers.etag))?.bytes, `${label}: gateway ETag`).toBe(want)
              expect(viaGateway.body.equals(want), `${label}: gateway body`).toBe(true)
            })

          // Cached, then replaced: same size, smaller, larger.
          let current = (yield* Effect.promise(() => log.write(versionBytes(size)))).bytes
          yield* readBoth(current, "v0")
          yield* readBoth(current, "v0 warm")
          for (const [label, n] of [["same size", size], ["smaller", size - BLOCK - 999], ["larger", size + 2 * BLOCK + 7]] as const) {
            current = (yield* Effect.promise(() => log.write(versionBytes(n)))).bytes
            yield* Effect.sleep(`${3 * TTL_MS} millis`)
            yield* readBoth(current, label)
          }

          // Replaced while a cold read is in flight from a slow origin.
          yield* cluster.origin.setFaults({ bandwidthBytesPerSec: 2 * 1024 * 1024, kinds: ["get"] })
          for (let round = 0; round < 3; round++) {
            const before = (yield* Effect.promise(() => log.write(versionBytes(size)))).bytes
            yield* Effect.sleep(`${3 * TTL_MS} millis`)
            const clientRead = Effect.either(client.read(URI, 0, size * 2))
            const gatewayRead = Effect.promise(() => raw(gw.url, "GET", "/bucket/obj.bin").then((r) => r, () => undefined))
            const replace = Effect.sleep("250 millis").pipe(
              Effect.zipRight(Effect.promise(() => log.write(versionBytes(round === 1 ? size : size - 5000))))
            )
            const [c, g] = yield* Effect.all([clientRead, gatewayRead, replace], { concurrency: "unbounded" })
            if (Either.isRight(c)) {
              const v = matchingVersion(log, 0, size * 2, c.right)
              expect(v, `round ${round}: client body ${explain(log, 0, c.right)}`).toBeGreaterThanOrEqual(0)
            } else expect(c.left._tag, `round ${round}: ${c.left.message}`).toBe("VersionChanged")
            if (g !== undefined && g.status === 200 && g.body.length === Number(g.headers["content-length"])) {
              const v = log.byEtag(String(g.headers.etag))
              expect(v !== undefined && v.bytes.equals(g.body), `round ${round}: gateway body is its ETag's version`).toBe(true)
            } else if (g !== undefined) expect([200, 503], `round ${round}: gateway status`).toContain(g.status)
            void before
          }

          // Once the origin is quick again and the TTLs pass, the last version is read whole.
          yield* cluster.origin.setFaults({ bandwidthBytesPerSec: 0 })
          yield* Effect.sleep(`${3 * TTL_MS} millis`)
          yield* readBoth(log.versions[log.versions.length - 1]!.bytes, "last")
        })
      ),
    180_000
  )
})
