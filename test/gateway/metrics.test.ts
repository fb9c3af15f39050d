/**
 * The gateway's metric families as rendered: one series per label combination seen, in
 * first-use order, byte sources counted only for answered requests, and both latency phases
 * per protocol and operation.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { describe, expect, it } from "vitest"
import { GatewayMetrics, measure, type Observation, startWatch, TimedResponse } from "../../src/gateway/metrics.js"

const obs = (o: Partial<Observation>): Observation => ({
  protocol: "s3",
  operation: "read",
  route: "cache",
  status: 206,
  responseBytes: 65536,
  headersSeconds: 0.0004,
  totalSeconds: 0.001,
  ...o
})

const series = (text: string, family: string) => text.split("\n").filter((l) => l.startsWith(`${family}{`) || l.startsWith(`${family} `))

describe("GatewayMetrics", () => {
  it("counts each combination once per request, bytes by source only when answered, latency by phase", () => {
    const m = new GatewayMetrics()
    m.observe(obs({}))
    m.observe(obs({ status: 404, responseBytes: 300 }))
    m.observe(obs({}))
    m.observe(obs({ operation: "write", route: "origin", status: 200, responseBytes: 0, headersSeconds: 2, totalSeconds: 3 }))
    m.observe(obs({ protocol: "azure", operation: "stat", route: "none", status: 403, responseBytes: 120 }))
    m.observe(obs({ route: "origin", status: 200, responseBytes: 10 }))
    const text = m.render()
    expect(series(text, "talon_gateway_requests_total")).toEqual([
      'talon_gateway_requests_total{protocol="s3",operation="read",route="cache",outcome="complete",response_class="2xx",failure="none"} 2',
      'talon_gateway_requests_total{protocol="s3",operation="read",route="cache",outcome="failed",response_class="4xx",failure="not_found"} 1',
      'talon_gateway_requests_total{protocol="s3",operation="write",route="origin",outcome="complete",response_class="2xx",failure="none"} 1',
      'talon_gateway_requests_total{protocol="azure",operation="stat",route="none",outcome="failed",response_class="4xx",failure="authentication"} 1',
      'talon_gateway_requests_total{protocol="s3",operation="read",route="origin",outcome="complete",response_class="2xx",failure="none"} 1'
    ])
    expect(series(text, "talon_gateway_bytes_total")).toEqual([
      'talon_gateway_bytes_total{protocol="s3",operation="read",source="response"} 131382',
      'talon_gateway_bytes_total{protocol="s3",operation="read",source="cache"} 131072',
      'talon_gateway_bytes_total{protocol="s3",operation="write",source="response"} 0',
      'talon_gateway_bytes_total{protocol="s3",operation="write",source="origin"} 0',
      'talon_gateway_bytes_total{protocol="azure",operation="stat",source="response"} 120',
      'talon_gateway_bytes_total{protocol="s3",operation="read",source="origin"} 10'
    ])
    const counts = series(text, "talon_gateway_request_duration_seconds_count")
    expect(counts).toEqual([
      'talon_gateway_request_duration_seconds_count{protocol="s3",operation="read",phase="headers"} 4',
      'talon_gateway_request_duration_seconds_count{protocol="s3",operation="read",phase="total"} 4',
      'talon_gateway_request_duration_seconds_count{protocol="s3",operation="write",phase="headers"} 1',
      'talon_gateway_request_duration_seconds_count{protocol="s3",operation="write",phase="total"} 1',
      'talon_gateway_request_duration_seconds_count{protocol="azure",operation="stat",phase="headers"} 1',
      'talon_gateway_request_duration_seconds_count{protocol="azure",operation="stat",phase="total"} 1'
    ])
    expect(series(text, "talon_gateway_request_duration_seconds_sum")[2]).toBe('talon_gateway_request_duration_seconds_sum{protocol="s3",operation="write",phase="headers"} 2')
  })
})

describe("response timing", () => {
  it("times the head (implicit or explicit) and counts the body, with and without TimedResponse", async () => {
    const seen: Array<{ timed: boolean; headersMs: number; totalMs: number; bytes: number }> = []
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
      const w = startWatch(res)
      // As the gateway stamps every response first (so the head's headers are kept where getHeader finds them).
      res.setHeader("Server", "test")
      res.once("close", () => measure(w, (headersMs, totalMs, bytes) => seen.push({ timed: res instanceof TimedResponse, headersMs, totalMs, bytes })))
      // Explicit head for /explicit, node's implicit one (through writeHead all the same) otherwise.
      setTimeout(() => {
        if (req.url === "/explicit") res.writeHead(200, { "Content-Length": "5" })
        else res.setHeader("Content-Length", "5")
        setTimeout(() => res.end("hello"), 20)
      }, 5)
    }
    for (const options of [{ ServerResponse: TimedResponse }, {}]) {
      const server = http.createServer(options, handler)
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
      const port = (server.address() as AddressInfo).port
      try {
        for (const path of ["/explicit", "/implicit"]) {
          const body = await fetch(`http://127.0.0.1:${port}${path}`).then((r) => r.text())
          expect(body).toBe("hello")
        }
        await new Promise<void>((r) => setImmediate(r))
      } finally {
        server.closeAllConnections()
        await new Promise<void>((r) => server.close(() => r()))
      }
    }
    expect(seen.map((s) => s.timed)).toEqual([true, true, false, false])
    for (const s of seen) {
      expect(s.bytes).toBe(5)
      // The head went out before the body's 20 ms wait: its time is below the total's.
      expect(s.headersMs).toBeGreaterThan(0)
      expect(s.headersMs).toBeLessThan(s.totalMs)
    }
  })
})
