/**
 * Trace export: a coordinator with TALON_OTLP_ENDPOINT set sends its control-request spans
 * as OTLP/HTTP JSON to a collector stand-in (an HTTP server on port 0); with no endpoint the
 * tracing layer is empty and nothing is loaded.
 */
import * as http from "node:http"
import { ConfigProvider, Effect, Either, Layer, ManagedRuntime } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { Coordinator } from "../../src/coordinator/Coordinator.js"
import { NodeRole } from "../../src/core/ids.js"
import { ControlChannel } from "../../src/transport/ControlChannel.js"
import { tracingLayer } from "../../src/transport/tracing.js"
import { otlpEndpoint } from "../../src/config/traces.js"
import { flattenConfig, providerOf } from "../../src/cli/configFile.js"
import { memoryBackend } from "../coordinator/fixtures/memoryBackend.js"
import { objects } from "../coordinator/fixtures/harness.js"
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import { Backend } from "../../src/core/ids.js"
import { makeDirBackend, pattern } from "../worker/support/dirBackend.js"
import { makeCleanup, startWorker, tempDir } from "../worker/support/harness.js"
import { readRange } from "../worker/support/rawClient.js"

interface OtlpSpan {
  readonly name: string
  readonly traceId: string
  readonly startTimeUnixNano: string
  readonly attributes: ReadonlyArray<{ key: string; value: { stringValue?: string } }>
}
interface OtlpBody {
  readonly resourceSpans: ReadonlyArray<{
    resource: { attributes: ReadonlyArray<{ key: string; value: { stringValue?: string } }> }
    scopeSpans: ReadonlyArray<{ spans: ReadonlyArray<OtlpSpan> }>
  }>
}

const bodies: Array<{ path: string; body: OtlpBody }> = []
const collector = http.createServer((req, res) => {
  const chunks: Array<Buffer> = []
  req.on("data", (c: Buffer) => chunks.push(c))
  req.on("end", () => {
    bodies.push({ path: req.url ?? "", body: JSON.parse(Buffer.concat(chunks).toString("utf8")) as OtlpBody })
    res.writeHead(200, { "content-type": "application/json" }).end("{}")
  })
})
afterAll(() => new Promise<void>((r) => collector.close(() => r())))

describe("tracing", () => {
  it("reads the endpoint from TALON_OTLP_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT; none = the empty layer; not a URL = refused", () => {
    const endpoint = (env: Record<string, string>) =>
      Effect.runSync(Effect.either(otlpEndpoint.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))))
    expect(endpoint({})).toEqual(Either.right(undefined))
    expect(endpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/" })).toEqual(Either.right("http://c:4318"))
    expect(endpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", TALON_OTLP_ENDPOINT: "http://t:4318" })).toEqual(Either.right("http://t:4318"))
    const refused = endpoint({ TALON_OTLP_ENDPOINT: "collector:4318" })
    expect(Either.isLeft(refused) && String(refused.left)).toMatch(/TALON_OTLP_ENDPOINT: must be an http:\/\/ or https:\/\/ URL/)
    expect(tracingLayer("x", undefined)).toBe(Layer.empty)
    // A config file's [otlp] endpoint is the same setting.
    const flat = flattenConfig({ otlp: { endpoint: "http://f:4318" } })
    expect("settings" in flat && Effect.runSync(otlpEndpoint.pipe(Effect.withConfigProvider(providerOf(flat.settings))))).toBe("http://f:4318")
  })

  it("a coordinator exports one span per control request to the collector, with its service name", async () => {
    await new Promise<void>((r) => collector.listen(0, "127.0.0.1", () => r()))
    const endpoint = `http://127.0.0.1:${(collector.address() as { port: number }).port}`
    process.env["TALON_OTLP_ENDPOINT"] = endpoint
    const layer = Coordinator.layer({ listen: "127.0.0.1:0", adminListen: "127.0.0.1:0" }).pipe(Layer.provide(memoryBackend(objects)))
    const rt = ManagedRuntime.make(layer)
    try {
      // The endpoint is read when the layer is built.
      const c = await rt.runPromise(Coordinator)
      delete process.env["TALON_OTLP_ENDPOINT"]
      await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const ch = yield* ControlChannel.make(c.controlAddress)
            yield* ch.request({ _tag: "Register", node: { id: "w-t", address: "127.0.0.1:7109", role: NodeRole.Worker } })
            yield* ch.request({ _tag: "Heartbeat", node: "w-t", blockCount: 1 })
          })
        )
      )
    } finally {
      delete process.env["TALON_OTLP_ENDPOINT"]
      // Closing the layer flushes the spans still buffered.
      await rt.dispose()
    }
    const spans = bodies.flatMap(({ path, body }) => {
      expect(path).toBe("/v1/traces")
      return body.resourceSpans.flatMap((rs) => {
        const service = rs.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue
        return rs.scopeSpans.flatMap((ss) => ss.spans.map((s) => ({ service, ...s })))
      })
    })
    const control = spans.filter((s) => s.name === "talon.coordinator.control")
    const messages = control.map((s) => s.attributes.find((a) => a.key === "talon.control.message")?.value.stringValue)
    expect(messages).toEqual(expect.arrayContaining(["Register", "Heartbeat"]))
    expect(new Set(control.map((s) => s.service))).toEqual(new Set(["talon-coordinator"]))
    // Two requests, two traces: each control request is its own root.
    const mine = control.filter((_, i) => messages[i] === "Register" || messages[i] === "Heartbeat")
    expect(new Set(mine.map((s) => s.traceId)).size).toBe(mine.length)
  })

  it("a worker miss exports the origin HEAD, then the origin fetch (with the fill), as talon-worker", async () => {
    const cleanup = makeCleanup()
    const before = bodies.length
    try {
      const root = await tempDir(cleanup, "talon-origin-")
      await fsp.mkdir(path.join(root, "bkt"), { recursive: true })
      const data = pattern(256 * 1024, 5)
      await fsp.writeFile(path.join(root, "bkt", "traced.bin"), data)
      process.env["TALON_OTLP_ENDPOINT"] = `http://127.0.0.1:${(collector.address() as { port: number }).port}`
      const w = await startWorker(cleanup, makeDirBackend(root).layer, { cacheDirs: [await tempDir(cleanup, "talon-cache-")] })
      delete process.env["TALON_OTLP_ENDPOINT"]
      const read = await readRange(w.worker.dataPort, { backend: Backend.S3, bucket: "bkt", objectPath: "traced.bin" }, 0, 4096)
      expect(read.ok && read.bytes.equals(data.subarray(0, 4096))).toBe(true)
      await w.stop()
    } finally {
      delete process.env["TALON_OTLP_ENDPOINT"]
      await cleanup.run()
    }
    const spans = bodies.slice(before).flatMap(({ body }) =>
      body.resourceSpans.flatMap((rs) => {
        const service = rs.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue
        return rs.scopeSpans.flatMap((ss) => ss.spans.map((s) => ({ service, ...s })))
      })
    )
    const worker = spans.filter((s) => s.service === "talon-worker").sort((a, b) => (BigInt(a.startTimeUnixNano) < BigInt(b.startTimeUnixNano) ? -1 : 1))
    expect(worker.map((s) => s.name)).toEqual(["talon.worker.origin.head", "talon.worker.origin.fetch"])
    for (const s of worker) expect(s.attributes.find((a) => a.key === "talon.object")?.value.stringValue).toBe("traced.bin")
  })
})
