/** The coordinator's admin HTTP endpoints, over a real socket. */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import { ControlChannel } from "../../src/transport/ControlChannel.js"
import { renderClusterTable } from "../../src/client/cli.js"
import type { ClusterStatus } from "../../src/protocol/clusterStatus.js"
import { NodeRole } from "../../src/core/ids.js"
import { epochForWire, membershipEpoch } from "../../src/coordinator/state/epoch.js"
import { testCoordinator } from "./fixtures/harness.js"

const get = (address: string, path: string) =>
  Effect.promise(async () => {
    const res = await fetch(`http://${address}${path}`)
    return { status: res.status, type: res.headers.get("content-type") ?? "", body: await res.text() }
  })

describe("coordinator admin HTTP", () => {
  it.live("/healthz, /readyz, /api/v1/cluster, /metrics and a 404", () =>
    testCoordinator({ heartbeatIntervalMs: 1000 }, (c) =>
      Effect.scoped(
        Effect.gen(function* () {
          expect(yield* get(c.adminAddress, "/healthz")).toMatchObject({ status: 200, body: "ok\n" })
          expect((yield* get(c.adminAddress, "/readyz")).status).toBe(200)

          const ch = yield* ControlChannel.make(c.controlAddress)
          yield* ch.request({ _tag: "Register", node: { id: "w-2", address: "127.0.0.1:7102", role: NodeRole.Worker } })
          yield* ch.request({ _tag: "Register", node: { id: "w-1", address: "127.0.0.1:7101", role: NodeRole.Worker } })
          yield* ch.request({ _tag: "Heartbeat", node: "w-1", blockCount: 17 })

          // The coordinator's own record arrives through the store's watch.
          const listsItself = (body: string) => (JSON.parse(body) as ClusterStatus).coordinators.length === 1
          yield* Effect.repeat(get(c.adminAddress, "/api/v1/cluster"), { until: (r) => listsItself(r.body), schedule: Schedule.spaced("20 millis") }).pipe(
            Effect.timeout("30 seconds")
          )
          const cluster = yield* get(c.adminAddress, "/api/v1/cluster")
          expect(cluster.status).toBe(200)
          expect(cluster.type).toContain("application/json")
          const status = JSON.parse(cluster.body) as ClusterStatus
          const epoch = epochForWire(
            yield* membershipEpoch([
              { id: "w-1", address: "127.0.0.1:7101", role: NodeRole.Worker },
              { id: "w-2", address: "127.0.0.1:7102", role: NodeRole.Worker }
            ])
          )
          expect(status.epoch).toBe(epoch)
          expect(status.ready).toBe(true)
          expect(status.stateBackend).toBe("memory")
          expect(status.clusterId).toBe("default")
          expect(status.livenessWindowMs).toBe(3000)
          expect(status.controlAddress).toBe(c.controlAddress)
          expect(status.members.map((m) => [m.id, m.address, m.role, m.blockCount])).toEqual([
            ["w-1", "127.0.0.1:7101", "worker", 17],
            ["w-2", "127.0.0.1:7102", "worker", 0]
          ])
          // Its own record: role coordinator, its addresses; not a member, not in the epoch.
          expect(status.coordinators.map((m) => [m.id, m.address, m.role, m.health])).toEqual([[c.controlAddress, c.controlAddress, "coordinator", "healthy"]])
          expect(status.coordinators[0]!.heartbeatSeq).toBeGreaterThanOrEqual(0)
          for (const m of status.members) {
            expect(Number.isNaN(Date.parse(m.lastHeartbeatAt))).toBe(false)
            expect(m.lastHeartbeatAgeMs).toBeGreaterThanOrEqual(0)
          }
          const table = renderClusterTable(status)
          expect(table).toContain(`epoch ${epoch}`)
          expect(table.split("\n")[2]).toMatch(/^w-1\s+127\.0\.0\.1:7101\s+worker\s+\S+s ago\s+17$/)
          expect(table.split("\n").at(-1)).toBe(`coordinators: ${c.controlAddress} (healthy)`)

          const metrics = yield* get(c.adminAddress, "/metrics")
          expect(metrics.status).toBe(200)
          expect(metrics.type).toContain("text/plain")
          const lines = metrics.body.split("\n")
          expect(lines).toContain("talon_coordinator_members 2")
          expect(lines).toContain("talon_coordinator_coordinators 1")
          expect(lines).toContain("talon_coordinator_records 3")
          expect(lines).toContain(`talon_coordinator_epoch ${epoch}`)
          expect(lines).toContain("talon_coordinator_ready 1")
          expect(lines).toContain("talon_coordinator_registrations_total 2")
          expect(lines).toContain("talon_coordinator_heartbeats_total 1")
          expect(lines).toContain('talon_coordinator_worker_blocks{node="w-1"} 17')
          expect(lines).toContain('talon_coordinator_control_requests_total{message="Register",operation="register"} 2')
          expect(lines).toContain('talon_coordinator_registration_total{result="accepted"} 2')
          expect(lines).toContain("# TYPE talon_coordinator_members gauge")
          // Every sample line is `name{labels} value` with a numeric value.
          for (const line of lines.filter((l) => l.length > 0 && !l.startsWith("#"))) {
            expect(line).toMatch(/^[a-z_]+(\{[^}]*\})? -?[0-9.e+-]+$/)
          }

          const missing = yield* get(c.adminAddress, "/nope")
          expect(missing.status).toBe(404)
          expect(missing.body).toContain("/api/v1/cluster")
        })
      )
    )
  )
})
