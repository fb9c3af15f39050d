/**
 * Talon's management API on a real coordinator and a real worker registered with it, both
 * with an admin token: the token on every guarded route, Talon's field names, and the
 * OpenAPI documents against what is served.
 */
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import { Effect, Layer, ManagedRuntime, Redacted, Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Coordinator } from "../../src/coordinator/Coordinator.js"
import { ApiError, BackendStatus, CapabilitiesView, ClusterView, NodeList, NodeView, WorkerStatus } from "../../src/protocol/adminApi.js"
import { makeDirBackend, pattern } from "../worker/support/dirBackend.js"
import { makeCleanup, startWorker, tempDir, type RunningWorker } from "../worker/support/harness.js"
import { schemaProblems } from "../support/jsonSchema.js"
import { memoryBackend } from "./fixtures/memoryBackend.js"
import { clusterCapacity } from "../../src/client/prefetchCapacity.js"
import { objects } from "./fixtures/harness.js"
import { eventuallyAsync } from "../support/eventually.js"

const TOKEN = "0123456789abcdef-admin"
const cleanup = makeCleanup()
let coordinator: string
let worker: RunningWorker
let workerAdmin: string

const get = async (address: string, route: string, token?: string) => {
  const res = await fetch(`http://${address}${route}`, token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } })
  const text = await res.text()
  return { status: res.status, text, json: () => JSON.parse(text) as Record<string, unknown>, authenticate: res.headers.get("www-authenticate") }
}

beforeAll(async () => {
  const root = await tempDir(cleanup, "talon-origin-")
  await fsp.mkdir(path.join(root, "bkt"), { recursive: true })
  await fsp.writeFile(path.join(root, "bkt", "obj"), pattern(4096, 1))
  const origin = makeDirBackend(root)
  const rt = ManagedRuntime.make(
    // A 3 s liveness window: the worker (beating every 100 ms) stays healthy on a loaded machine.
    Coordinator.layer({ listen: "127.0.0.1:0", adminListen: "127.0.0.1:0", heartbeatIntervalMs: 1000, adminToken: Redacted.make(TOKEN) }).pipe(
      Layer.provide(memoryBackend(objects))
    )
  )
  cleanup.add(() => rt.dispose())
  const c = await rt.runPromise(Coordinator)
  coordinator = c.adminAddress
  worker = await startWorker(cleanup, origin.layer, {
    id: "w-api",
    zone: "zone-a",
    coordinator: c.controlAddress,
    heartbeatIntervalMs: 100,
    adminToken: Redacted.make(TOKEN),
    cacheDirs: [await tempDir(cleanup, "talon-cache-")]
  })
  workerAdmin = worker.worker.adminAddress
  // Both records (the worker's status and the coordinator's own) arrive through the store's watch.
  await eventuallyAsync(
    async () => {
      const view = await get(coordinator, "/api/v1/cluster", TOKEN)
      expect(view.status).toBe(200)
      const body = view.json()
      expect([body["healthy_worker_count"], body["coordinator_count"], Number(body["total_capacity_bytes"]) > 0]).toEqual([1, 1, true])
    },
    { what: "the worker joined", within: "20 seconds", every: "25 millis" }
  )
}, 60_000)
afterAll(() => cleanup.run())

const coordinatorRoutes = ["/api/v1/cluster", "/api/v1/nodes", "/api/v1/nodes/w-api", "/api/v1/backend", "/api/v1/capabilities", "/api/v1/openapi.json", "/api/v1/objects?prefix=/s3/bucket/data/"]
const workerRoutes = ["/api/v1/status", "/api/v1/openapi.json"]

describe("admin token", () => {
  it("every guarded route: missing and wrong are 401 with a challenge, right is 200; health and metrics stay open", async () => {
    for (const [address, routes] of [[coordinator, coordinatorRoutes], [workerAdmin, workerRoutes]] as const) {
      for (const route of routes) {
        const missing = await get(address, route)
        expect([route, missing.status, missing.authenticate]).toEqual([route, 401, 'Bearer realm="talon-management"'])
        expect(Schema.decodeUnknownSync(ApiError)(missing.json()).error).toBe("unauthorized")
        expect([route, (await get(address, route, "0123456789abcdef-admiN")).status]).toEqual([route, 401])
        expect([route, (await get(address, route, TOKEN.slice(0, -1))).status]).toEqual([route, 401])
        expect([route, (await get(address, route, TOKEN)).status]).toEqual([route, 200])
      }
      for (const open of ["/healthz", "/readyz", "/metrics"]) expect([open, (await get(address, open)).status]).toEqual([open, 200])
      // An unknown path is not a way around the token.
      expect((await get(address, "/api/v1/nope")).status).toBe(401)
    }
  })
})

describe("clients", () => {
  it("prefetch's capacity check sends the token (and says 401 without it)", async () => {
    const refused = await Effect.runPromise(Effect.flip(clusterCapacity(coordinator)))
    expect(refused.message).toContain("401")
    const capacity = await Effect.runPromise(clusterCapacity(coordinator, Redacted.make(TOKEN)))
    expect(capacity.workers).toBe(1)
  })
})

/** Talon's schemas' property names (crates/talon-coordinator/src/openapi.json). */
const TALON_FIELDS = {
  ResponseMeta: ["api_version", "backend", "generated_at_unix_ms", "snapshot_age_ms", "snapshot_revision"],
  ClusterSummary: ["cluster_id", "coordinator_count", "healthy_worker_count", "meta", "node_count", "total_block_count", "total_capacity_bytes", "total_resident_bytes", "worker_count"],
  NodeView: ["address", "admin_address", "block_count", "build_version", "bytes_served_total", "cache_hits_total", "cache_misses_total", "capacity_bytes", "errors_total", "health", "labels", "node_id", "ready", "reported_at_unix_ms", "requests_total", "resident_bytes", "role", "started_at_unix_ms"],
  NodeList: ["limit", "meta", "nodes", "offset", "total"],
  BackendStatus: ["backend", "meta", "ready", "revision", "snapshot_age_ms"],
  CapabilitiesView: ["advertised", "meta", "revision", "store_reachable"]
}

describe("Talon's views", () => {
  it("serve Talon's field names and values from the live cluster", async () => {
    const cluster = Schema.decodeUnknownSync(ClusterView)((await get(coordinator, "/api/v1/cluster", TOKEN)).json())
    for (const k of TALON_FIELDS.ClusterSummary) expect(cluster).toHaveProperty(k)
    expect(Object.keys(cluster.meta).sort()).toEqual(TALON_FIELDS.ResponseMeta)
    expect(cluster).toMatchObject({ cluster_id: "default", worker_count: 1, coordinator_count: 1, node_count: 2, healthy_worker_count: 1 })
    expect(cluster.total_capacity_bytes).toBeGreaterThan(0)
    expect(cluster.meta).toMatchObject({ api_version: "v1", backend: "memory" })
    // This coordinator's own view rides along for `talon cluster`.
    expect(cluster.members.map((m) => m.id)).toEqual(["w-api"])

    const list = Schema.decodeUnknownSync(NodeList)((await get(coordinator, "/api/v1/nodes?role=worker&limit=1", TOKEN)).json())
    expect(Object.keys(list).sort()).toEqual(TALON_FIELDS.NodeList)
    expect([list.total, list.limit, list.offset, list.nodes.length]).toEqual([1, 1, 0, 1])
    const node = Schema.decodeUnknownSync(NodeView)((await get(coordinator, "/api/v1/nodes/w-api", TOKEN)).json())
    expect(Object.keys(node).sort()).toEqual(TALON_FIELDS.NodeView)
    expect(node).toMatchObject({ node_id: "w-api", role: "worker", address: worker.worker.dataAddress, admin_address: workerAdmin, labels: { zone: "zone-a" }, ready: true })
    expect(Schema.decodeUnknownSync(NodeList)((await get(coordinator, "/api/v1/nodes?role=coordinator", TOKEN)).json()).nodes.map((n) => n.role)).toEqual(["coordinator"])
    expect(Schema.decodeUnknownSync(NodeList)((await get(coordinator, "/api/v1/nodes?limit=100000", TOKEN)).json()).limit).toBe(500)

    const backend = Schema.decodeUnknownSync(BackendStatus)((await get(coordinator, "/api/v1/backend", TOKEN)).json())
    expect(Object.keys(backend).sort()).toEqual(TALON_FIELDS.BackendStatus)
    const caps = Schema.decodeUnknownSync(CapabilitiesView)((await get(coordinator, "/api/v1/capabilities", TOKEN)).json())
    expect(Object.keys(caps).sort()).toEqual(TALON_FIELDS.CapabilitiesView)
    expect(caps).toMatchObject({ advertised: [], store_reachable: true })

    const missingNode = await get(coordinator, "/api/v1/nodes/nope", TOKEN)
    expect([missingNode.status, Schema.decodeUnknownSync(ApiError)(missingNode.json()).error]).toEqual([404, "node_not_found"])
    const badQuery = await get(coordinator, "/api/v1/nodes?role=leader", TOKEN)
    expect([badQuery.status, Schema.decodeUnknownSync(ApiError)(badQuery.json()).error]).toEqual([400, "bad_request"])

    const status = Schema.decodeUnknownSync(WorkerStatus)((await get(workerAdmin, "/api/v1/status", TOKEN)).json())
    expect(status).toMatchObject({ schema_version: 1, node: { id: "w-api", address: worker.worker.dataAddress, role: "Worker" }, admin_address: workerAdmin, labels: { zone: "zone-a" } })
    expect(status.heartbeat_seq).toBeGreaterThan(0)
  })
})

describe("OpenAPI documents", () => {
  it("are OpenAPI 3.x, every $ref resolves, and every served body matches the schema documented for its status", async () => {
    const cases: Array<[string, ReadonlyArray<string>, string]> = [
      [coordinator, ["/api/v1/cluster", "/api/v1/nodes", "/api/v1/nodes?role=worker&offset=1", "/api/v1/nodes/w-api", "/api/v1/nodes/nope", "/api/v1/nodes?limit=x", "/api/v1/backend", "/api/v1/capabilities", "/api/v1/objects?prefix=/s3/bucket/data/"], "coordinator"],
      [workerAdmin, ["/api/v1/status"], "worker"]
    ]
    for (const [address, routes, title] of cases) {
      const doc = (await get(address, "/api/v1/openapi.json", TOKEN)).json() as {
        openapi: string
        info: { title: string; version: string }
        paths: Record<string, { get: { responses: Record<string, { content?: { "application/json"?: { schema: Record<string, unknown> } } }>; security: unknown } }>
        components: { schemas: Record<string, unknown>; securitySchemes: Record<string, { type: string; scheme: string }> }
      }
      expect(doc.openapi).toMatch(/^3\.\d+\.\d+$/)
      expect(doc.info).toMatchObject({ title: expect.stringContaining(title), version: "v1" })
      expect(doc.components.securitySchemes["bearer"]).toMatchObject({ type: "http", scheme: "bearer" })
      const refs = JSON.stringify(doc).match(/#\/components\/schemas\/[A-Za-z0-9]+/g) ?? []
      for (const ref of refs) expect(doc.components.schemas).toHaveProperty(ref.slice("#/components/schemas/".length))
      for (const route of routes) {
        const served = await get(address, route, TOKEN)
        const template = route.split("?")[0]!.replace(/\/nodes\/[^/]+$/, "/nodes/{node_id}")
        const documented = doc.paths[template]?.get.responses[String(served.status)]?.content?.["application/json"]?.schema
        expect(documented, `${route} → ${served.status} is documented`).toBeDefined()
        expect(doc.paths[template]!.get.security).toEqual([{ bearer: [] }])
        expect(schemaProblems(doc, documented!, served.json()), route).toEqual([])
      }
      // Every coordinator schema Talon defines is there under its name, with Talon's properties.
      if (title === "coordinator") {
        for (const [name, fields] of Object.entries(TALON_FIELDS)) {
          if (name === "ClusterSummary") continue
          const schema = doc.components.schemas[name] as { properties: Record<string, unknown> }
          expect(Object.keys(schema.properties).sort(), name).toEqual(fields)
        }
      }
    }
  })
})
