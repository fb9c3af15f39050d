/**
 * The gateway's HTTP surface over raw sockets (origin route, auth off): what is
 * refused with NotImplemented, addressing, locally answered requests, request ids and
 * version echo, the bounded runtime (concurrency, body size, response deadline).
 */
import { expect, layer } from "@effect/vitest"
import * as net from "node:net"
import { performance } from "node:perf_hooks"
import { Context, Effect, Layer } from "effect"
import * as Router from "../../src/backend/Router.js"
import { Gateway, type GatewayShape } from "../../src/gateway/Gateway.js"
import type { GatewayOptions } from "../../src/gateway/config.js"
import { sampleBytes } from "../../src/origin/seed.js"
import { raw } from "../origin/fixtures/testOrigin.js"
import { gatewayFixture, TestOriginStub } from "./fixtures/targets.js"

const BUCKET = "rawgw"
const DATA = sampleBytes(42, 5000)
const send = <O>(p: () => Promise<O>) => Effect.promise(p)

/** Another gateway over the same origin, with its own limits; stopped with the test's scope. */
const gatewayWith = (options: Partial<GatewayOptions>) =>
  Effect.flatMap(TestOriginStub, (origin) =>
    Layer.build(
      Gateway.layerDeployment({ gateway: { listen: "127.0.0.1:0", auth: false, ...options }, route: "origin", router: Router.localOptions(origin.url) })
    ).pipe(Effect.map((ctx): GatewayShape => Context.get(ctx, Gateway)))
  )

layer(gatewayFixture("origin", { gateway: { auth: false, maxBodyBytes: 64 * 1024 } }), { excludeTestServices: true })(
  "gateway over raw HTTP",
  (it) => {
    const setup = Effect.gen(function* () {
      const gw = yield* Gateway
      const origin = yield* TestOriginStub
      yield* send(() => raw(origin.url, "PUT", `/${BUCKET}`))
      yield* send(() => raw(origin.url, "PUT", `/${BUCKET}/data.bin`, {}, DATA))
      return { gw, origin }
    })

    it.effect("refuses read options it cannot serve from the cache; passes other sub-resources to the origin and keeps its answer", () =>
      Effect.gen(function* () {
        const { gw, origin } = yield* setup
        yield* origin.resetStats()
        for (const path of [`/${BUCKET}/data.bin?response-content-type=text/plain`, `/${BUCKET}/data.bin?partNumber=1`]) {
          const r = yield* send(() => raw(gw.url, "GET", path))
          expect(r.status, path).toBe(501)
          expect(r.body.toString(), path).toContain("<Code>NotImplemented</Code>")
          expect(r.body.toString(), path).toContain(`<RequestId>${r.headers["x-amz-request-id"]}</RequestId>`)
        }
        // Nothing refused here was passed on.
        const stats = yield* origin.stats()
        expect(stats.requests.get + stats.requests.put + stats.requests.list + stats.requests.other).toBe(0)

        // The origin's own answers, status and code kept (the stub stores no tags: its 501).
        const tagging = yield* send(() => raw(gw.url, "PUT", `/${BUCKET}/data.bin?tagging`, {}, "<Tagging/>"))
        expect(tagging.status).toBe(501)
        const tags = yield* send(() => raw(gw.url, "GET", `/${BUCKET}/data.bin?tagging`))
        expect(tags.status).toBe(200)
        expect(tags.body.toString()).toContain("<TagSet></TagSet>")
        expect(tagging.body.toString()).toContain("Talon origin stub")
        const created = yield* send(() => raw(gw.url, "PUT", `/${BUCKET}-made`))
        expect(created.status).toBe(200)
        const buckets = yield* send(() => raw(gw.url, "GET", "/"))
        expect(buckets.status).toBe(200)
        expect(buckets.body.toString()).toContain(`<Name>${BUCKET}-made</Name>`)
        const containers = yield* send(() => raw(gw.url, "GET", "/acct?comp=list", { "x-ms-version": "2021-12-02" }))
        expect(containers.status).toBe(200)
        expect(containers.body.toString()).toContain(`ServiceEndpoint="${gw.url}/acct/"`)
        expect(containers.body.toString()).toContain(`<Name>${BUCKET}-made</Name>`)
        // A traversal the origin refuses is the origin's 400, not a retryable 503.
        const traversal = yield* send(() => raw(gw.url, "GET", `/${BUCKET}/a/../../x`))
        expect(traversal.status).toBe(400)
        const head = yield* send(() => raw(gw.url, "HEAD", `/${BUCKET}/a/../../x`))
        expect(head.status).toBe(400)
        const noUpload = yield* send(() => raw(gw.url, "DELETE", `/${BUCKET}/data.bin?uploadId=0123456789abcdef0123456789abcdef`))
        expect(noUpload.status).toBe(404)
        expect(noUpload.body.toString()).toContain("<Code>NoSuchUpload</Code>")
      })
    )

    it.effect("reads one range in every form, refuses several, path-style and virtual-host alike", () =>
      Effect.gen(function* () {
        const { gw } = yield* setup
        const port = new URL(gw.url).port
        for (const host of [`127.0.0.1:${port}`, `${BUCKET}.localhost:${port}`]) {
          const path = host.startsWith(BUCKET) ? "/data.bin" : `/${BUCKET}/data.bin`
          for (const [range, start, end] of [
            ["bytes=0-99", 0, 99],
            ["bytes=4990-", 4990, 4999],
            ["bytes=-10", 4990, 4999],
            ["bytes=100-999999", 100, 4999]
          ] as const) {
            const r = yield* send(() => raw(gw.url, "GET", path, { Host: host, Range: range }))
            expect(r.status, `${host} ${range}`).toBe(206)
            expect(r.headers["content-range"]).toBe(`bytes ${start}-${end}/5000`)
            expect(r.body.equals(DATA.subarray(start, end + 1)), range).toBe(true)
          }
          const many = yield* send(() => raw(gw.url, "GET", path, { Host: host, Range: "bytes=0-1,4-5" }))
          expect(many.status).toBe(416)
          expect(many.body.toString()).toContain("<Code>InvalidRange</Code>")
          const beyond = yield* send(() => raw(gw.url, "GET", path, { Host: host, Range: "bytes=5000-" }))
          expect(beyond.status).toBe(416)
          expect(beyond.headers["content-range"]).toBe("bytes */5000")
        }
        const az = yield* send(() =>
          raw(gw.url, "GET", `/acct/${BUCKET}/data.bin`, { "x-ms-version": "2020-10-02", "x-ms-range": "bytes=10-19", Range: "bytes=0-0", "x-ms-client-request-id": "abc" })
        )
        expect(az.status).toBe(206)
        expect(az.body.equals(DATA.subarray(10, 20))).toBe(true)
        expect(az.headers["x-ms-version"]).toBe("2020-10-02")
        expect(az.headers["x-ms-client-request-id"]).toBe("abc")
        expect(az.headers["x-ms-request-id"]).toMatch(/^[0-9a-f-]{36}$/)
        expect(az.headers["x-ms-blob-type"]).toBe("BlockBlob")
      })
    )

    it.effect("answers GetBucketLocation locally and HeadBucket from the origin", () =>
      Effect.gen(function* () {
        const { gw, origin } = yield* setup
        yield* origin.resetStats()
        const loc = yield* send(() => raw(gw.url, "GET", `/${BUCKET}?location`))
        expect(loc.status).toBe(200)
        expect(loc.body.toString()).toContain("<LocationConstraint")
        const stats = yield* origin.stats()
        expect(stats.total).toBe(0)
        const head = yield* send(() => raw(gw.url, "HEAD", `/${BUCKET}`))
        expect(head.status).toBe(200)
        expect(head.headers["x-amz-bucket-region"]).toBe("us-east-1")
        expect((yield* send(() => raw(gw.url, "HEAD", "/no-such-bucket"))).status).toBe(404)
        const missing = yield* send(() => raw(gw.url, "GET", "/no-such-bucket/k"))
        expect(missing.body.toString()).toContain("<Code>NoSuchBucket</Code>")
      })
    )

    it.effect("lists one bounded page: max-keys above the cap is lowered before the origin sees it", () =>
      Effect.gen(function* () {
        const { gw } = yield* setup
        const r = yield* send(() => raw(gw.url, "GET", `/${BUCKET}?list-type=2&max-keys=50000`))
        expect(r.status).toBe(200)
        expect(r.body.toString()).toContain("<MaxKeys>1000</MaxKeys>")
        expect(r.body.toString()).toContain("<Key>data.bin</Key>")
        const az = yield* send(() => raw(gw.url, "GET", `/acct/${BUCKET}?restype=container&comp=list&maxresults=99999`, { "x-ms-version": "2021-12-02" }))
        expect(az.status).toBe(200)
        expect(az.body.toString()).toContain("<MaxResults>5000</MaxResults>")
        expect(az.body.toString()).toContain(`ServiceEndpoint="${gw.url}/acct/"`)
      })
    )

    it.effect("refuses bodies over the limit, S3 and Azure, and writes nothing", () =>
      Effect.gen(function* () {
        const { gw, origin } = yield* setup
        const big = Buffer.alloc(64 * 1024 + 1, 7)
        const s3 = yield* send(() => raw(gw.url, "PUT", `/${BUCKET}/big.bin`, {}, big))
        expect(s3.status).toBe(400)
        expect(s3.body.toString()).toContain("<Code>EntityTooLarge</Code>")
        const az = yield* send(() =>
          raw(gw.url, "PUT", `/acct/${BUCKET}/big.bin`, { "x-ms-version": "2021-12-02", "x-ms-blob-type": "BlockBlob" }, big)
        )
        expect(az.status).toBe(413)
        expect(az.headers["x-ms-error-code"]).toBe("RequestBodyTooLarge")
        // Chunked transfer with no declared length is cut off at the limit too.
        const chunked = yield* send(() => raw(gw.url, "PUT", `/${BUCKET}/big.bin`, { "Transfer-Encoding": "chunked" }, big))
        expect(chunked.status).toBe(400)
        expect((yield* send(() => raw(origin.url, "HEAD", `/${BUCKET}/big.bin`))).status).toBe(404)
        const ok = yield* send(() => raw(gw.url, "PUT", `/${BUCKET}/small.bin`, {}, big.subarray(0, 1000)))
        expect(ok.status).toBe(200)
        expect((yield* send(() => raw(origin.url, "GET", `/${BUCKET}/small.bin`))).body.equals(big.subarray(0, 1000))).toBe(true)
      })
    )

    it.scoped("refuses requests beyond the concurrency limit with SlowDown / ServerBusy, then serves again", () =>
      Effect.gen(function* () {
        const { origin } = yield* setup
        const gw = yield* gatewayWith({ maxConcurrentRequests: 2 })
        yield* origin.setFaults({ latency: { kind: "fixed", ms: 400 } })
        const results = yield* send(() =>
          Promise.all(
            Array.from({ length: 6 }, (_, i) =>
              i % 2 === 0
                ? raw(gw.url, "GET", `/${BUCKET}/data.bin`)
                : raw(gw.url, "GET", `/acct/${BUCKET}/data.bin`, { "x-ms-version": "2021-12-02" })
            )
          )
        )
        yield* origin.setFaults({ latency: { kind: "none" } })
        const served = results.filter((r) => r.status === 200)
        const refused = results.filter((r) => r.status === 503)
        expect(served.length + refused.length).toBe(6)
        expect(served.length).toBeGreaterThanOrEqual(1)
        expect(served.length).toBeLessThanOrEqual(2)
        for (const r of served) expect(r.body.equals(DATA)).toBe(true)
        for (const r of refused) {
          if (r.headers["x-ms-request-id"] !== undefined) expect(r.headers["x-ms-error-code"]).toBe("ServerBusy")
          else expect(r.body.toString()).toContain("<Code>SlowDown</Code>")
        }
        const after = yield* send(() => raw(gw.url, "GET", `/${BUCKET}/data.bin`))
        expect(after.status).toBe(200)
      })
    )

    it.scoped("answers 503 when the origin misses the response deadline, and keeps serving", () =>
      Effect.gen(function* () {
        const { origin } = yield* setup
        const gw = yield* gatewayWith({ responseTimeoutMs: 300, statTtlMs: 0 })
        yield* origin.setFaults({ latency: { kind: "fixed", ms: 1500 } })
        const slow = yield* send(() => raw(gw.url, "GET", `/${BUCKET}/data.bin`))
        const slowAz = yield* send(() => raw(gw.url, "GET", `/acct/${BUCKET}/data.bin`, { "x-ms-version": "2021-12-02" }))
        yield* origin.setFaults({ latency: { kind: "none" } })
        // The abandoned origin HEADs still finish on their own time; a request now would join them.
        yield* Effect.sleep("1600 millis")
        expect(slow.status).toBe(503)
        expect(slow.body.toString()).toContain("could not answer within 300 ms")
        expect(slowAz.status).toBe(503)
        expect(slowAz.headers["x-ms-error-code"]).toBe("OperationTimedOut")
        const ok = yield* send(() => raw(gw.url, "GET", `/${BUCKET}/data.bin`))
        expect(ok.status).toBe(200)
        expect(ok.body.equals(DATA)).toBe(true)
      })
    )

    it.scoped("a write the origin drops after dispatch answers x-talon-commit-state: indeterminate", () =>
      Effect.gen(function* () {
        const { origin } = yield* setup
        const gw = yield* gatewayWith({})
        yield* origin.setFaults({ failureRate: 1, failureMode: "reset", kinds: ["put", "delete"] })
        const put = yield* send(() => raw(gw.url, "PUT", `/${BUCKET}/maybe.bin`, {}, "maybe"))
        const del = yield* send(() => raw(gw.url, "DELETE", `/acct/${BUCKET}/data.bin`, { "x-ms-version": "2021-12-02" }))
        yield* origin.setFaults({ failureRate: 0, kinds: [] })
        expect(put.status).toBe(503)
        expect(put.headers["x-talon-commit-state"]).toBe("indeterminate")
        expect(put.body.toString()).toContain("may or may not have been applied")
        expect(del.status).toBe(503)
        expect(del.headers["x-talon-commit-state"]).toBe("indeterminate")
        // An origin that answers (even with an error) is not indeterminate.
        const noBucket = yield* send(() => raw(gw.url, "PUT", `/no-such-bucket/x`, {}, "x"))
        expect(noBucket.status).toBe(404)
        expect(noBucket.headers["x-talon-commit-state"]).toBeUndefined()
      })
    )

    it.scoped("keeps an idle keep-alive connection for --keep-alive-timeout-ms and says so in Keep-Alive", () =>
      Effect.gen(function* () {
        const { gw: byDefault } = yield* setup
        const gw = yield* gatewayWith({ keepAliveTimeoutMs: 1000 })
        const probe = (url: string) =>
          send(
            () =>
              new Promise<{ head: string; closedAfterMs: number }>((resolve, reject) => {
                const u = new URL(url)
                const socket = net.connect(Number(u.port), u.hostname)
                let text = ""
                let answeredAt = 0
                socket.on("data", (c) => {
                  text += c.toString("latin1")
                  if (answeredAt === 0 && text.includes("\r\n\r\n")) answeredAt = performance.now()
                  if (url === byDefault.url && answeredAt > 0) socket.destroy()
                })
                socket.on("close", () => resolve({ head: text.split("\r\n\r\n")[0]!, closedAfterMs: performance.now() - answeredAt }))
                socket.on("error", reject)
                socket.write(`GET /${BUCKET}?location HTTP/1.1\r\nHost: ${u.host}\r\n\r\n`)
              })
          )
        const kept = yield* probe(gw.url)
        expect(kept.head.toLowerCase()).toContain("keep-alive: timeout=1")
        // Kept open well past node's 5 s default would be slow to test; past half its own setting shows the setting is used.
        expect(kept.closedAfterMs).toBeGreaterThan(500)
        const dflt = yield* probe(byDefault.url)
        expect(dflt.head.toLowerCase()).toContain("keep-alive: timeout=60")
      })
    )
  }
)
