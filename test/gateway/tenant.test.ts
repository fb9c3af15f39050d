/**
 * The gateway's cache route with a tenant (its embedded client's `tenant`): its reads are
 * charged to that tenant on the workers, and once the tenant is over its limit a GET is
 * answered 503 (retryable) rather than read from the origin, which would defeat the limit.
 */
import { GetObjectCommand, type S3ServiceException } from "@aws-sdk/client-s3"
import { expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Either, Layer } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import * as Router from "../../src/backend/Router.js"
import { LocalCluster } from "../../src/cluster/LocalCluster.js"
import { Gateway } from "../../src/gateway/Gateway.js"
import { parsePolicy } from "../../src/worker/tenants/policy.js"
import { s3ClientFor } from "../support/sdkSuite.js"
import { authOn, gatewayEndpoint } from "./fixtures/targets.js"

const BLOCK = 4 * 1024 * 1024

it.live(
  "a gateway tenant over its limit gets 503s, never origin reads",
  () =>
    Effect.gen(function* () {
      // A burst of 3 reads, refilled one per 1000 s: nothing refills while the test runs.
      const rateLimits = Either.getOrThrow(parsePolicy(JSON.stringify({ enabled: true, overrides: { gw: { read_iops: { rate: 0.001, burst_ratio: 3000 } } } })))
      const cluster = yield* LocalCluster.make({
        ephemeral: true,
        workers: 1,
        heartbeatIntervalMs: 500,
        gateway: false,
        worker: { blockSize: BLOCK, pageSize: 256 * 1024, versionTtlMs: 600_000, rateLimits }
      }).pipe(Effect.orDie)
      yield* cluster.coordinator.members.pipe(
        Effect.delay("50 millis"),
        Effect.repeat({ until: (m) => m.filter((n) => n.role === 1).length >= 1 }),
        Effect.timeout(Duration.seconds(30)),
        Effect.orDie
      )
      const bytes = randomBytes(100_000)
      yield* Effect.promise(async () => {
        await fs.mkdir(path.join(cluster.origin.root, "tenants"), { recursive: true })
        await fs.writeFile(path.join(cluster.origin.root, "tenants", "obj.bin"), bytes)
      })
      const ctx = yield* Layer.build(
        Gateway.layerDeployment({
          gateway: { listen: "127.0.0.1:0", ...authOn },
          route: "cache",
          router: Router.localOptions(cluster.origin.url),
          // No client read-ahead: these sequential GETs would otherwise be served from one read-ahead chunk.
          client: { coordinator: cluster.coordinator.controlAddress, blockSize: BLOCK, tenant: "gw", readAheadBytes: 0 }
        }).pipe(Layer.orDie)
      )
      const gw = Context.get(ctx, Gateway)
      const s3 = s3ClientFor(gatewayEndpoint(gw))
      const statuses: Array<number> = []
      for (let i = 0; i < 6; i++) {
        const r = yield* Effect.promise(() =>
          s3.send(new GetObjectCommand({ Bucket: "tenants", Key: "obj.bin", Range: `bytes=${i * 1000}-${i * 1000 + 999}` })).then(
            async (o) => {
              expect(Buffer.from(await o.Body!.transformToByteArray()).equals(bytes.subarray(i * 1000, i * 1000 + 1000))).toBe(true)
              return 200
            },
            (e: S3ServiceException) => e.$metadata.httpStatusCode ?? 0
          )
        )
        statuses.push(r)
      }
      expect(statuses).toEqual([200, 200, 200, 503, 503, 503])
      const stats = gw.stats()
      expect(stats.fallbackPieces).toBe(0)
      expect(stats.originReads).toBe(0)
      const metrics = yield* Effect.promise(() => fetch(`http://127.0.0.1:${cluster.workers[0]!.adminPort}/metrics`).then((r) => r.text()))
      expect(metrics).toContain(`talon_worker_tenant_requests_total{tenant="gw",outcome="admitted"} 3`)
      expect(metrics).toContain(`talon_worker_tenant_requests_total{tenant="gw",outcome="rate_limited"} 3`)
    }).pipe(Effect.scoped),
  120_000
)
