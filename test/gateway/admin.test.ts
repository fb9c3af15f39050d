/**
 * The gateway's admin port when it cannot serve: /readyz is 503 and names each reason (the
 * origin does not answer; on the cache route, no worker is reachable). The ready case, and
 * /metrics under load, are in test/deploy/observability.test.ts against a live cluster.
 */
import { Context, Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import * as Router from "../../src/backend/Router.js"
import { Gateway } from "../../src/gateway/Gateway.js"
import { deadAddress } from "../support/deadAddress.js"

describe("gateway admin port", () => {
  it("/readyz is 503 with a reason for each thing it cannot reach; /healthz and /metrics still answer", async () => {
    const [origin, coordinator] = await Effect.runPromise(Effect.all([deadAddress, deadAddress]))
    const answers = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const ctx = yield* Layer.build(
            Gateway.layerDeployment({
              gateway: { listen: "127.0.0.1:0", adminListen: "127.0.0.1:0", auth: false },
              route: "cache",
              router: Router.localOptions(`http://${origin}`),
              client: { coordinator }
            })
          )
          const admin = Context.get(ctx, Gateway)
          return yield* Effect.promise(async () => {
            const ready = await fetch(`${admin.adminUrl}/readyz`)
            const health = await fetch(`${admin.adminUrl}/healthz`)
            const metrics = await fetch(`${admin.adminUrl}/metrics`)
            return { status: ready.status, body: (await ready.json()) as { ready: boolean; reasons: Array<string> }, health: health.status, metrics: await metrics.text() }
          })
        })
      )
    )
    expect(answers.status).toBe(503)
    expect(answers.body.ready).toBe(false)
    expect(answers.body.reasons).toHaveLength(2)
    expect(answers.body.reasons[0]).toMatch(/^the origin does not answer/)
    expect(answers.body.reasons[1]).toMatch(/^no cache worker is reachable/)
    expect(answers.health).toBe(200)
    expect(answers.metrics).toContain("# TYPE talon_gateway_requests_total counter")
  }, 30_000)
})
