/**
 * The official AWS SDK v3 S3 client runs the origin issue's SDK suite against the
 * gateway, auth on (its SigV4 verified), on both routes; every body is checked by
 * SHA-256 against the origin behind the gateway.
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { s3SdkSuite } from "../support/sdkSuite.js"
import { s3WriteSuite } from "../support/sdkWrites.js"
import { gatewayFixture, readPlacedObject } from "./fixtures/targets.js"

for (const route of ["cache", "origin"] as const) {
  layer(gatewayFixture(route), { excludeTestServices: true, timeout: "60 seconds" })(`S3 SDK through the gateway (${route} route)`, (it) => {
    s3SdkSuite(it)
    s3WriteSuite(it)

    it.effect(`the bytes came through the ${route} route`, () =>
      Effect.gen(function* () {
        // The suite's own reads mostly follow their writes within the fresh-after-write
        // window (they bypass the cache by design), so one object placed at the origin is read too.
        const stats = yield* readPlacedObject("s3")
        expect(stats.route).toBe(route)
        expect(stats.aborted).toBe(0)
        if (route === "cache") expect(stats.cachePieces).toBeGreaterThan(0)
        else {
          expect(stats.cachePieces).toBe(0)
          expect(stats.originReads).toBeGreaterThan(0)
        }
      })
    )
  })
}
