/**
 * Coordinators' own records on a real etcd: two `talon coordinator` processes
 * sharing a keyspace (and a cluster token) each keep a leased record of role
 * coordinator, so each lists both; a worker is the only member and the epoch
 * is the worker set's alone; a coordinator killed -9 leaves the other's list
 * and its record expires with its lease, the epoch unchanged. Skipped, loudly,
 * where etcd is not installed.
 */
import { randomBytes, randomUUID } from "node:crypto"
import { Effect } from "effect"
import { describe, expect, it } from "@effect/vitest"
import { NodeRole } from "../../src/core/ids.js"
import { membershipEpoch } from "../../src/coordinator/state/epoch.js"
import type { ClusterStatus } from "../../src/protocol/clusterStatus.js"
import { emptyMetrics, NODE_STATUS_SCHEMA_VERSION } from "../../src/protocol/status.js"
import { ControlChannel } from "../../src/transport/ControlChannel.js"
import { freePort, kill9, originEnv, originWith, outputs, pollUntil, spawnTalon, startWorker, tempDir } from "../faults/fixtures/talon.js"
import type { Child } from "../cluster/fixtures/processes.js"
import { EtcdCluster, etcdAvailable } from "./state/etcdHarness.js"

const T = 480_000
const START_MS = 180_000
const HEARTBEAT_MS = 200
const TOKEN = randomBytes(24).toString("hex")

const getJson = <A>(address: string, path: string) =>
  Effect.tryPromise(async () => (await (await fetch(`http://${address}${path}`, { signal: AbortSignal.timeout(5000) })).json()) as A)
const gauge = (address: string, name: string) =>
  Effect.tryPromise(async () => {
    const body = await (await fetch(`http://${address}/metrics`, { signal: AbortSignal.timeout(5000) })).text()
    const line = body.split("\n").find((l) => l.startsWith(`${name} `))
    return line === undefined ? Number.NaN : Number(line.slice(name.length + 1))
  })
const coordinatorIds = (s: ClusterStatus) => s.coordinators.map((c) => c.id).join(",")

describe.runIf(etcdAvailable())("coordinators' own records on etcd", () => {
  it.live("each lists every live coordinator; a killed one drops out after its lease; the epoch is the workers' alone", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const etcd = yield* Effect.acquireRelease(Effect.promise(() => EtcdCluster.start(1)), (e) => Effect.promise(() => e.stop()))
        const dir = yield* tempDir
        const origin = yield* originWith(dir, { "a.bin": 1024 })
        const prefix = `/talon-self-${randomUUID().slice(0, 8)}`
        const env = { ...originEnv(origin), TALON_CLUSTER_TOKEN: TOKEN }
        const start = Effect.gen(function* () {
          const address = `127.0.0.1:${yield* freePort}`
          const admin = `127.0.0.1:${yield* freePort}`
          const child = yield* spawnTalon(
            ["coordinator", "--listen", address, "--admin-listen", admin, "--heartbeat-interval-ms", String(HEARTBEAT_MS), "--missed-heartbeats", "3",
              "--state", "etcd", "--etcd-endpoints", etcd.endpoints.join(","), "--etcd-prefix", prefix],
            env
          )
          return { address, admin, child }
        })
        const a = yield* start
        const b = yield* start
        const children: Array<readonly [string, Child]> = [["a", a.child], ["b", b.child]]
        const why = () => outputs(children)
        const w = yield* startWorker(dir, origin, { id: "w1", coordinator: a.address, blockSize: 4096, heartbeatMs: HEARTBEAT_MS, env: { TALON_CLUSTER_TOKEN: TOKEN } })
        children.push(["w1", w.child])

        const both = [a.address, b.address].sort().join(",")
        const workerEpoch = (yield* membershipEpoch([{ id: "w1", address: w.address, role: NodeRole.Worker }])).toString(16).padStart(16, "0")
        const whole = (s: ClusterStatus) => coordinatorIds(s) === both && s.members.map((m) => m.id).join(",") === "w1"
        for (const c of [a, b]) {
          const s = yield* pollUntil(getJson<ClusterStatus>(c.admin, "/api/v1/cluster"), whole, START_MS, () => `${c.address} never listed both coordinators and w1\n${why()}`)
          expect(s.coordinators.every((x) => x.role === "coordinator" && x.health === "healthy")).toBe(true)
          // Coordinator records are never placement members: the epoch is w1's alone.
          expect(s.epochHex).toBe(workerEpoch)
          expect(yield* gauge(c.admin, "talon_coordinator_records")).toBe(3)
        }
        // Only coordinators write coordinator records: a status claiming the role is refused.
        const forge = (id: string, role: NodeRole) =>
          Effect.scoped(
            Effect.flatMap(ControlChannel.make(a.address), (ch) =>
              ch.request({
                _tag: "NodeStatusHeartbeat",
                status: {
                  schemaVersion: NODE_STATUS_SCHEMA_VERSION, clusterId: "default", node: { id, address: "127.0.0.1:9", role },
                  incarnationId: randomUUID(), adminAddress: null, buildVersion: "forged", startedAtUnixMs: Date.now() + 60_000, reportedAtUnixMs: Date.now() + 60_000,
                  heartbeatSeq: 1, health: "healthy", ready: true, metrics: emptyMetrics, labels: []
                }
              })
            )
          )
        expect(yield* forge("fake-coordinator", NodeRole.Coordinator)).toMatchObject({ _tag: "Ack", ok: false, detail: expect.stringContaining("only workers send statuses") })
        // Nor can a status without the token's proof take over w1's id in the shared store: b still sees w1 where it is.
        expect(yield* forge("w1", NodeRole.Worker)).toMatchObject({ _tag: "Ack", ok: false, detail: expect.stringContaining("sent no cluster-token proof") })
        expect((yield* getJson<ClusterStatus>(b.admin, "/api/v1/cluster")).members.map((m) => [m.id, m.address])).toEqual([["w1", w.address]])

        // b dies hard: a stops listing it once it is silent, and its record goes when its lease runs out.
        const killedAt = Date.now()
        yield* kill9(b.child)
        const alone = yield* pollUntil(getJson<ClusterStatus>(a.admin, "/api/v1/cluster"), (s) => coordinatorIds(s) === a.address, 60_000, () => `a kept listing b\n${why()}`)
        const droppedMs = Date.now() - killedAt
        yield* pollUntil(gauge(a.admin, "talon_coordinator_records"), (n) => n === 2, 60_000, () => `b's record never expired\n${why()}`)
        const expiredMs = Date.now() - killedAt
        expect(alone.epochHex).toBe(workerEpoch)
        expect((yield* getJson<ClusterStatus>(a.admin, "/api/v1/cluster")).epochHex).toBe(workerEpoch)
        console.log(`[coordinator records] b left a's list ${droppedMs} ms after kill -9, its record expired after ${expiredMs} ms (unhealthy-after ${3 * HEARTBEAT_MS} ms, lease ${6 * HEARTBEAT_MS} ms rounded up to whole seconds by etcd)`)
      })
    ),
    T
  )
})
