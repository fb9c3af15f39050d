/**
 * Talon's metric contract against a live cluster (`talon up`'s: origin stub, coordinator, one
 * worker, gateway): each component's /metrics under a little load carries Talon's names, they
 * move, histograms have buckets; every metric Talon's dashboard and rules (deploy/observability)
 * name is exposed; the rule files pass `promtool check rules` where Debian's prometheus is installed.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Exit, Scope } from "effect"
import YAML from "yaml"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { LocalCluster, type LocalClusterShape } from "../../src/cluster/LocalCluster.js"
import { SAMPLE_KEY, SEED_BUCKET } from "../../src/origin/seed.js"
import { eventuallyAsync } from "../support/eventually.js"

const root = path.resolve(__dirname, "../..")
const deploy = path.join(root, "deploy/observability")
const RULE_FILES = ["talon/prometheus/talon.rules.yml", "talon/prometheus/talon.alerts.yml", "prometheus/talon-ts.alerts.yml"]
const FIXTURES = [...RULE_FILES, "talon/grafana/talon-cluster-overview.json"]

interface Sample {
  readonly labels: Record<string, string>
  readonly value: number
}
type Scrape = Map<string, Array<Sample>>

const parse = (text: string): Scrape => {
  const out: Scrape = new Map()
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (m === null) throw new Error(`not a sample line: ${line}`)
    const labels: Record<string, string> = {}
    for (const [, k, v] of (m[2] ?? "").matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g)) labels[k!] = v!
    const list = out.get(m[1]!) ?? []
    list.push({ labels, value: Number(m[3]) })
    out.set(m[1]!, list)
  }
  return out
}

/** Sum of the samples of `name` whose labels include `match`. */
const total = (s: Scrape, name: string, match: Record<string, string> = {}): number =>
  (s.get(name) ?? []).filter((x) => Object.entries(match).every(([k, v]) => x.labels[k] === v)).reduce((n, x) => n + x.value, 0)

const scrape = async (url: string): Promise<Scrape> => {
  const res = await fetch(`${url}/metrics`)
  expect(res.status).toBe(200)
  expect(res.headers.get("content-type")).toContain("text/plain; version=0.0.4")
  return parse(await res.text())
}

/** Every bucket series of a histogram is cumulative and ends in +Inf equal to its _count. */
const expectHistogram = (s: Scrape, name: string, match: Record<string, string> = {}) => {
  const buckets = (s.get(`${name}_bucket`) ?? []).filter((x) => Object.entries(match).every(([k, v]) => x.labels[k] === v))
  expect(buckets.length, `${name} has buckets`).toBeGreaterThan(1)
  const inf = buckets.filter((b) => b.labels.le === "+Inf").reduce((n, b) => n + b.value, 0)
  expect(inf).toBe(total(s, `${name}_count`, match))
  expect(inf).toBeGreaterThan(0)
  expect(s.has(`${name}_sum`)).toBe(true)
}

let scope: Scope.CloseableScope
let cluster: LocalClusterShape
const urls = { worker: "", coordinator: "", gateway: "" }
const before: Partial<Record<keyof typeof urls, Scrape>> = {}
const after: Partial<Record<keyof typeof urls, Scrape>> = {}

beforeAll(async () => {
  scope = await Effect.runPromise(Scope.make())
  // The gateway's reads through its cluster client, which asks the coordinator (stats, membership)
  // under load; the splice relay places pieces with the membership in hand and asks it nothing.
  process.env.TALON_GATEWAY_REMOTE_SPLICE = "off"
  // Not co-located: the worker's request families must see the gateway's hits on its data port.
  cluster = await Effect.runPromise(Scope.extend(LocalCluster.make({ ephemeral: true, workers: 1, colocate: false }), scope))
  urls.worker = `http://${cluster.workers[0]!.adminAddress}`
  urls.coordinator = `http://${cluster.coordinator.adminAddress}`
  urls.gateway = cluster.gateway!.adminUrl!
  // The worker counts as a member once the coordinator has its status: wait for the gateway to see it.
  await eventuallyAsync(async () => expect((await fetch(`${urls.gateway}/readyz`)).status).toBe(200), {
    what: "the gateway is ready",
    every: "100 millis"
  })
  for (const k of Object.keys(urls) as Array<keyof typeof urls>) before[k] = await scrape(urls[k])
  // A miss, then hits of the same range, a stat, a listing and a 404, all through the gateway.
  const object = `${cluster.gateway!.url}/${SEED_BUCKET}/${SAMPLE_KEY}`
  for (let i = 0; i < 4; i++) {
    const res = await fetch(object, { headers: { Range: "bytes=0-65535" } })
    expect(res.status).toBe(206)
    expect((await res.arrayBuffer()).byteLength).toBe(65536)
  }
  expect((await fetch(object, { method: "HEAD" })).status).toBe(200)
  expect((await fetch(`${cluster.gateway!.url}/${SEED_BUCKET}?list-type=2&prefix=datasets/`)).status).toBe(200)
  const missing = await fetch(`${cluster.gateway!.url}/${SEED_BUCKET}/no-such-object`)
  await missing.arrayBuffer()
  expect(missing.status).toBe(404)
  for (const k of Object.keys(urls) as Array<keyof typeof urls>) after[k] = await scrape(urls[k])
}, 60_000)

afterAll(() => {
  delete process.env.TALON_GATEWAY_REMOTE_SPLICE
  return scope === undefined ? undefined : Effect.runPromise(Scope.close(scope, Exit.void))
})

describe("worker /metrics", () => {
  it("has Talon's families, and they move under load", () => {
    const b = before.worker!
    const a = after.worker!
    expect(total(a, "talon_worker_build_info")).toBe(1)
    expect(total(a, "talon_worker_ready")).toBe(1)
    expect(total(a, "talon_worker_capacity_bytes")).toBeGreaterThan(0)
    expect(total(a, "talon_worker_cache_misses_total", { form: "whole" })).toBeGreaterThan(total(b, "talon_worker_cache_misses_total"))
    expect(total(a, "talon_worker_cache_hits_total", { form: "whole" })).toBeGreaterThan(total(b, "talon_worker_cache_hits_total"))
    expect(total(a, "talon_worker_requests_total")).toBeGreaterThanOrEqual(total(b, "talon_worker_requests_total") + 2)
    expect(total(a, "talon_worker_bytes_served_total")).toBeGreaterThanOrEqual(total(b, "talon_worker_bytes_served_total") + 65536)
    expect(total(a, "talon_worker_backend_fetch_bytes_total", { backend: "origin" })).toBeGreaterThan(0)
    expect(total(a, "talon_worker_control_heartbeat_total", { result: "success" })).toBeGreaterThan(0)
    expect(total(a, "talon_worker_resident_bytes")).toBeGreaterThan(0)
    expect(total(a, "talon_worker_blocks")).toBeGreaterThan(0)
    expect(total(a, "talon_worker_process_uptime_seconds")).toBeGreaterThan(0)
    expect(a.has("talon_worker_inflight_loads")).toBe(true)
    expect(a.has("talon_worker_active_connections")).toBe(true)
    expectHistogram(a, "talon_worker_request_duration_seconds")
    expect(total(a, "talon_worker_request_duration_seconds_count")).toBeGreaterThan(total(b, "talon_worker_request_duration_seconds_count"))
    // Every request is timed, those the native hit table answered without JS included.
    expect(total(a, "talon_worker_request_duration_seconds_count")).toBeGreaterThanOrEqual(total(a, "talon_worker_requests_total"))
    expectHistogram(a, "talon_worker_backend_fetch_duration_seconds", { backend: "origin" })
    // Our own names stay.
    expect(total(a, "talon_worker_hits_total")).toBe(total(a, "talon_worker_cache_hits_total"))
  })
})

describe("coordinator /metrics", () => {
  it("has Talon's families, and they move under load", () => {
    const b = before.coordinator!
    const a = after.coordinator!
    expect(total(a, "talon_coordinator_ready")).toBe(1)
    expect(total(a, "talon_coordinator_live_nodes", { role: "worker", health: "healthy" })).toBe(1)
    expect(total(a, "talon_coordinator_live_nodes", { role: "coordinator" })).toBeGreaterThanOrEqual(1)
    expect(total(a, "talon_coordinator_control_requests_total", { operation: "status_heartbeat" })).toBeGreaterThan(0)
    // The gateway's client asked for the membership (readiness, placement) during the load.
    expect(total(a, "talon_coordinator_control_requests_total")).toBeGreaterThan(total(b, "talon_coordinator_control_requests_total"))
    expect(total(a, "talon_coordinator_heartbeat_total", { kind: "status", result: "accepted" })).toBeGreaterThan(0)
    expectHistogram(a, "talon_coordinator_control_duration_seconds", { operation: "status_heartbeat" })
    expectHistogram(a, "talon_coordinator_state_store_duration_seconds", { operation: "upsert" })
    expectHistogram(a, "talon_coordinator_state_store_duration_seconds", { operation: "snapshot" })
    expect(a.has("talon_coordinator_state_snapshot_age_seconds")).toBe(true)
    expect(a.has("talon_coordinator_placement_errors_total")).toBe(true)
    expect(a.has("talon_coordinator_control_errors_total")).toBe(true)
    expect(total(a, "talon_coordinator_build_info")).toBe(1)
    // Our own names stay.
    expect(total(a, "talon_coordinator_members")).toBe(1)
  })
})

describe("gateway admin port", () => {
  it("/metrics has Talon's families, and they move under load", () => {
    const a = after.gateway!
    const reads = { protocol: "s3", operation: "read", route: "cache", response_class: "2xx", failure: "none", outcome: "complete" }
    expect(total(a, "talon_gateway_requests_total", reads) - total(before.gateway!, "talon_gateway_requests_total", reads)).toBe(4)
    expect(total(a, "talon_gateway_requests_total", { operation: "stat", response_class: "2xx" })).toBe(1)
    expect(total(a, "talon_gateway_requests_total", { operation: "list", route: "origin", response_class: "2xx" })).toBe(1)
    expect(total(a, "talon_gateway_requests_total", { operation: "read", failure: "not_found", response_class: "4xx" })).toBe(1)
    expect(total(a, "talon_gateway_bytes_total", { operation: "read", source: "response" })).toBeGreaterThanOrEqual(4 * 65536)
    expect(total(a, "talon_gateway_bytes_total", { operation: "read", source: "cache" })).toBeGreaterThanOrEqual(4 * 65536)
    expectHistogram(a, "talon_gateway_request_duration_seconds", { operation: "read", phase: "headers" })
    expectHistogram(a, "talon_gateway_request_duration_seconds", { operation: "read", phase: "total" })
  })

  it("/healthz and /readyz answer; /readyz says why when it is not ready", async () => {
    expect(await (await fetch(`${urls.gateway}/healthz`)).text()).toBe("ok\n")
    const ready = await fetch(`${urls.gateway}/readyz`)
    expect(ready.status).toBe(200)
    expect(await ready.json()).toEqual({ ready: true, reasons: [] })
  })
})

describe("Talon's dashboard and rules", () => {
  it("name only metrics this cluster exposes", () => {
    const exposed = new Set<string>()
    for (const s of Object.values(after)) for (const name of s!.keys()) exposed.add(name)
    const named = new Set<string>()
    for (const expr of FIXTURES.flatMap(exprsOf)) {
      // Raw metric names only: a recording rule's `level:metric:op` name is not scraped.
      for (const [name] of expr.matchAll(/(?<![\w:])talon_[a-z0-9_]+(?![\w:])/g)) named.add(name)
    }
    expect(named.size).toBeGreaterThan(15)
    expect([...named].filter((n) => !exposed.has(n))).toEqual([])
  })

  it.skipIf(!hasPromtool())("pass promtool check rules", () => {
    const out = execFileSync("promtool", ["check", "rules", ...RULE_FILES.map((f) => path.join(deploy, f))], { encoding: "utf8" })
    expect(out).toMatch(/SUCCESS/)
  })
})

/** Every PromQL expression of a rule file or a dashboard. */
function exprsOf(file: string): ReadonlyArray<string> {
  const text = fs.readFileSync(path.join(deploy, file), "utf8")
  const out: Array<string> = []
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk)
    else if (typeof v === "object" && v !== null) {
      for (const [k, x] of Object.entries(v)) if (k === "expr" && typeof x === "string") out.push(x)
      else walk(x)
    }
  }
  walk(file.endsWith(".json") ? JSON.parse(text) : YAML.parse(text))
  return out
}

function hasPromtool(): boolean {
  try {
    execFileSync("promtool", ["--version"], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
}
