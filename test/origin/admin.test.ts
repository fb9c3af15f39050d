/**
 * The stub's admin API on its router: bodies are JSON decoded by the faults and tokens
 * schemas (a 400 says which), unknown admin routes list the ones that exist, and admin
 * requests are never counted or faulted while storage requests are.
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { OriginStub } from "../../src/origin/OriginStub.js"
import { raw, TestOrigin } from "./fixtures/testOrigin.js"

const call = (url: string, method: string, path: string, body?: string) => Effect.promise(() => raw(url, method, path, {}, body))
const json = (r: { body: Buffer }) => JSON.parse(r.body.toString()) as Record<string, unknown>

layer(TestOrigin(), { excludeTestServices: true, timeout: "30 seconds" })("origin stub admin API", (it) => {
  it.effect("a faults patch is merged and echoed; a body that is not JSON or not a patch is a 400 saying so", () =>
    Effect.gen(function* () {
      const stub = yield* OriginStub
      const set = yield* call(stub.url, "POST", "/_talon/faults", JSON.stringify({ failureRate: 0.25, kinds: ["get"] }))
      expect(set.status).toBe(200)
      expect(json(set)).toMatchObject({ failureRate: 0.25, kinds: ["get"], failureMode: "503" })
      expect(yield* stub.faults()).toMatchObject({ failureRate: 0.25 })

      const notJson = yield* call(stub.url, "PUT", "/_talon/faults", "{oops")
      expect(notJson.status).toBe(400)
      expect(String(json(notJson).error)).toMatch(/^faults body must be JSON: /)

      const notPatch = yield* call(stub.url, "POST", "/_talon/faults", JSON.stringify({ failureRate: 2 }))
      expect(notPatch.status).toBe(400)
      expect(String(json(notPatch).error)).toContain("failureRate")

      const tooBig = yield* call(stub.url, "POST", "/_talon/tokens", " ".repeat(65 * 1024))
      expect(tooBig.status).toBe(400)
      expect(String(json(tooBig).error)).toBe("tokens body must be JSON: body too large")

      // An empty body is an empty patch.
      const empty = yield* call(stub.url, "POST", "/_talon/faults")
      expect(json(empty)).toMatchObject({ failureRate: 0.25 })
      yield* stub.setFaults({ failureRate: 0, kinds: [] })
    })
  )

  it.effect("an unknown admin route is a 404 listing the routes; admin requests are not counted, storage ones are", () =>
    Effect.gen(function* () {
      const stub = yield* OriginStub
      yield* call(stub.url, "POST", "/_talon/stats/reset")
      const missing = yield* call(stub.url, "GET", "/_talon/nope?x=1")
      expect(missing.status).toBe(404)
      expect(json(missing)).toMatchObject({ error: "unknown admin route GET /_talon/nope" })
      expect(json(missing).routes).toContain("POST /_talon/tokens/expire")
      const wrongMethod = yield* call(stub.url, "PATCH", "/_talon/stats")
      expect(wrongMethod.status).toBe(404)

      expect((yield* call(stub.url, "PUT", "/admin-bucket")).status).toBe(200)
      expect((yield* call(stub.url, "PUT", "/admin-bucket/k.txt", "hello")).status).toBe(200)
      const get = yield* call(stub.url, "GET", "/admin-bucket/k.txt")
      expect(get.body.toString()).toBe("hello")
      expect((yield* call(stub.url, "GET", "/_talon/health")).status).toBe(200)
      const stats = json(yield* call(stub.url, "GET", "/_talon/stats"))
      expect(stats.requests).toMatchObject({ get: 1, put: 1 })
      expect(stats.total).toBe(3)
      expect(stats.bytesServed).toBe(5)
    })
  )

  it.effect("503 and reset faults apply to the kinds named; a reset request gets no response", () =>
    Effect.gen(function* () {
      const stub = yield* OriginStub
      yield* call(stub.url, "PUT", "/fault-bucket")
      yield* call(stub.url, "PUT", "/fault-bucket/k.txt", "body")
      yield* stub.setFaults({ failureRate: 1, failureMode: "503", kinds: ["get"] })
      const busy = yield* call(stub.url, "GET", "/fault-bucket/k.txt")
      expect(busy.status).toBe(503)
      expect(busy.body.toString()).toContain("<Code>SlowDown</Code>")
      expect((yield* call(stub.url, "HEAD", "/fault-bucket/k.txt")).status).toBe(200)
      yield* stub.setFaults({ failureMode: "reset" })
      const reset = yield* Effect.either(Effect.tryPromise(() => raw(stub.url, "GET", "/fault-bucket/k.txt")))
      expect(reset._tag).toBe("Left")
      yield* stub.setFaults({ failureRate: 0, kinds: [] })
      expect((yield* call(stub.url, "GET", "/fault-bucket/k.txt")).body.toString()).toBe("body")
      expect((yield* stub.stats()).faults).toMatchObject({ failed: 2, reset: 1 })
    })
  )
})
