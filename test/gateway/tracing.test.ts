/**
 * Gateway traces: with TALON_OTLP_ENDPOINT set, a GET through the cache route that misses
 * (the gateway's stat goes to the origin, the worker fills from it) is one trace as a
 * collector stand-in receives it: `talon.gateway.request`, then its children
 * `talon.gateway.stat` (a HEAD at the origin) and `talon.gateway.read` (the body from the
 * worker), in that order. A repeat read shows its stat came from the gateway's cache; a
 * missing key has a stat and no body read.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Context, Duration, Effect, Exit, Layer, Scope } from "effect"
import * as http from "node:http"
import * as path from "node:path"
import { BackendStore } from "../../src/backend/BackendStore.js"
import * as Router from "../../src/backend/Router.js"
import { Gateway } from "../../src/gateway/Gateway.js"
import { OriginStub } from "../../src/origin/OriginStub.js"
import { sampleBytes } from "../../src/origin/seed.js"
import { Worker } from "../../src/worker/Worker.js"
import { raw, tempDir } from "../origin/fixtures/testOrigin.js"
import { patientCoordinator } from "../support/loopbackCoordinator.js"

const MiB = 1024 * 1024
const BUCKET = "traced"
const OBJECT = sampleBytes(11, 3 * MiB + 17)

type AnyValue = { readonly stringValue?: string; readonly intValue?: number }
interface OtlpSpan {
  readonly name: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly startTimeUnixNano: string
  readonly endTimeUnixNano: string
  readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: AnyValue }>
}
interface OtlpBody {
  readonly resourceSpans: ReadonlyArray<{
    readonly resource: { readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: AnyValue }> }
    readonly scopeSpans: ReadonlyArray<{ readonly spans: ReadonlyArray<OtlpSpan> }>
  }>
}

/** An OTLP/HTTP JSON receiver on port 0 keeping every span with its service name. */
const collector = Effect.acquireRelease(
  Effect.async<{ readonly url: string; readonly spans: Array<OtlpSpan & { readonly service: string | undefined }>; readonly server: http.Server }>((resume) => {
    const spans: Array<OtlpSpan & { readonly service: string | undefined }> = []
    const server = http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as OtlpBody
        for (const rs of body.resourceSpans) {
          const service = rs.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue
          for (const ss of rs.scopeSpans) for (const s of ss.spans) spans.push({ service, ...s })
        }
        res.writeHead(200, { "content-type": "application/json" }).end("{}")
      })
    })
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, spans, server })))
  }),
  ({ server }) => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
)

const attr = (s: OtlpSpan, key: string): string | number | undefined => {
  const v = s.attributes.find((a) => a.key === key)?.value
  return v?.stringValue ?? (v?.intValue === undefined ? undefined : Number(v.intValue))
}
const nanos = (t: string) => BigInt(t)

describe("gateway tracing", () => {
  it.scopedLive("a cache-route miss is one trace: request, then its stat at the origin, then the body read", () =>
    Effect.gen(function* () {
      const otlp = yield* collector
      const dir = yield* tempDir
      const origin = yield* OriginStub.make({ root: path.join(dir, "origin") })
      yield* Effect.promise(() => raw(origin.url, "PUT", `/${BUCKET}`))
      yield* Effect.promise(() => raw(origin.url, "PUT", `/${BUCKET}/obj.bin`, {}, OBJECT))
      const backend = Layer.succeed(BackendStore, yield* Router.make(Router.localOptions(origin.url)))
      const coordinator = yield* patientCoordinator(backend)
      yield* Layer.build(
        Worker.layerSettings({
          id: "w1",
          dataAddress: "127.0.0.1:0",
          adminAddress: "127.0.0.1:0",
          coordinator: coordinator.controlAddress,
          cacheDirs: [path.join(dir, "cache")],
          blockSize: 2 * MiB,
          pageSize: 256 * 1024,
          heartbeatIntervalMs: 500
        }).pipe(Layer.provide(backend))
      )
      yield* coordinator.members.pipe(Effect.delay("20 millis"), Effect.repeat({ until: (m) => m.length >= 1 }), Effect.timeout(Duration.seconds(20)))

      // The gateway alone reads the endpoint (its config as a file would give it); its scope closes to flush the spans.
      const gatewayScope = yield* Scope.make()
      const gw = yield* Layer.buildWithScope(
        Gateway.layerDeployment({
          gateway: { listen: "127.0.0.1:0", auth: false },
          route: "cache",
          router: Router.localOptions(origin.url),
          client: { coordinator: coordinator.controlAddress, blockSize: 2 * MiB, readAheadBytes: 0 }
        }),
        gatewayScope
      ).pipe(
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["TALON_OTLP_ENDPOINT", `${otlp.url}/`]]))),
        Effect.map((ctx) => Context.get(ctx, Gateway))
      )
      const first = yield* Effect.promise(() => raw(gw.url, "GET", `/${BUCKET}/obj.bin`, { Range: "bytes=0-1048575" }))
      expect(first.status).toBe(206)
      expect(first.body.equals(OBJECT.subarray(0, MiB))).toBe(true)
      const again = yield* Effect.promise(() => raw(gw.url, "GET", `/${BUCKET}/obj.bin`, { Range: "bytes=0-1048575" }))
      expect(again.body.equals(OBJECT.subarray(0, MiB))).toBe(true)
      expect(gw.stats().cachePieces).toBeGreaterThan(0)
      const missing = yield* Effect.promise(() => raw(gw.url, "GET", `/${BUCKET}/absent.bin`))
      expect(missing.status).toBe(404)
      yield* Scope.close(gatewayScope, Exit.void)

      const gateway = otlp.spans.filter((s) => s.service === "talon-gateway")
      const requests = gateway.filter((s) => s.name === "talon.gateway.request").sort((a, b) => (nanos(a.startTimeUnixNano) < nanos(b.startTimeUnixNano) ? -1 : 1))
      expect(requests.length).toBe(3)
      const miss = requests[0]!
      const hit = requests[1]!
      const absent = requests[2]!
      expect(miss.parentSpanId ?? "").toBe("")
      expect(new Set(requests.map((r) => r.traceId)).size).toBe(3)
      expect(attr(miss, "http.request.method")).toBe("GET")
      expect(attr(miss, "talon.gateway.api")).toBe("s3")
      expect(attr(miss, "talon.gateway.operation")).toBe("read")
      expect(attr(miss, "talon.bucket")).toBe(BUCKET)
      expect(attr(miss, "http.response.status_code")).toBe(206)
      expect(attr(miss, "talon.gateway.route")).toBe("cache")

      // Everything of the miss's trace, in start order: the request, its stat, its body read.
      const trace = gateway.filter((s) => s.traceId === miss.traceId).sort((a, b) => (nanos(a.startTimeUnixNano) < nanos(b.startTimeUnixNano) ? -1 : 1))
      const own = trace.filter((s) => s.name.startsWith("talon.gateway."))
      expect(own.map((s) => s.name)).toEqual(["talon.gateway.request", "talon.gateway.stat", "talon.gateway.read"])
      const stat = own[1]!
      const read = own[2]!
      expect(stat.parentSpanId).toBe(miss.spanId)
      expect(read.parentSpanId).toBe(miss.spanId)
      expect(attr(stat, "talon.stat.source")).toBe("origin")
      expect(attr(stat, "talon.object")).toBe("obj.bin")
      expect(attr(read, "talon.gateway.route")).toBe("cache")
      expect(attr(read, "talon.length")).toBe(MiB)
      // The stat ended before the body was asked for; both within the request.
      expect(nanos(stat.endTimeUnixNano) <= nanos(read.startTimeUnixNano)).toBe(true)
      expect(nanos(read.endTimeUnixNano) <= nanos(miss.endTimeUnixNano)).toBe(true)

      const hitStat = gateway.filter((s) => s.traceId === hit.traceId && s.name === "talon.gateway.stat")
      expect(hitStat.map((s) => attr(s, "talon.stat.source"))).toEqual(["cache"])
      // A missing key: its stat at the origin, no body read, the 404 on the request.
      expect(attr(absent, "http.response.status_code")).toBe(404)
      const absentSpans = gateway.filter((s) => s.traceId === absent.traceId && s.name.startsWith("talon.gateway.")).map((s) => s.name)
      expect(absentSpans.sort()).toEqual(["talon.gateway.request", "talon.gateway.stat"])
    })
  )
})
