/**
 * The cluster token end to end, over real processes and sockets: a worker
 * process with TALON_CLUSTER_TOKEN joins a coordinator process with the same
 * token (its statuses carry the talon.auth HMAC, seen here through an on-path
 * proxy) and a client reads through it, every byte checked. Forged statuses on
 * a raw control connection — no proof, a garbage proof, a proof made with
 * another token, a takeover of the live worker's id, a legacy Register — are
 * refused with a message saying what to do, and never reach membership; a
 * captured valid status replayed (or altered) changes nothing. With
 * takeover-only, a new id needs no proof but a live one still cannot be taken.
 */
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Redacted } from "effect"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import { NodeRole } from "../../src/core/ids.js"
import type { ClusterStatus } from "../../src/protocol/clusterStatus.js"
import type { ControlMessage, NodeStatus } from "../../src/protocol/index.js"
import { STATUS_PROOF_LABEL, signStatus } from "../../src/protocol/statusProof.js"
import { ControlChannel } from "../../src/transport/ControlChannel.js"
import { freePort, kill9, originEnv, originWith, outputs, pollUntil, spawnTalon, startWorker, tempDir } from "../faults/fixtures/talon.js"
import { capturingProxy } from "./fixtures/capturingProxy.js"
import { testCoordinator } from "./fixtures/harness.js"
import { freshWorkerStatus } from "../../bench/kit/nodeStatus.js"

const T = 300_000
const START_MS = 180_000
const HEARTBEAT_MS = 200
const TOKEN = randomBytes(32).toString("hex")
const OTHER_TOKEN = randomBytes(32).toString("hex")

const forged = (id: string, overrides: Partial<NodeStatus> = {}): NodeStatus => freshWorkerStatus(id, { buildVersion: "forged", ...overrides })
const signedWith = (token: string, s: NodeStatus) => Either.getOrThrow(signStatus(s, Redacted.make(token)))
const withLabel = (s: NodeStatus, value: string): NodeStatus => ({ ...s, labels: [[STATUS_PROOF_LABEL, value]] })

const send = (address: string, message: ControlMessage) =>
  Effect.scoped(Effect.flatMap(ControlChannel.make(address), (ch) => ch.request(message)))
const report = (address: string, status: NodeStatus) => send(address, { _tag: "NodeStatusHeartbeat", status })

const getText = (address: string, path: string) =>
  Effect.tryPromise(async () => (await fetch(`http://${address}${path}`, { signal: AbortSignal.timeout(5000) })).text())
const cluster = (admin: string) => Effect.map(getText(admin, "/api/v1/cluster"), (t) => JSON.parse(t) as ClusterStatus)
const refusals = (admin: string, reason: string) =>
  Effect.map(getText(admin, "/metrics"), (body) => {
    const line = body.split("\n").find((l) => l.startsWith(`talon_coordinator_token_refusals_total{reason="${reason}"} `))
    return line === undefined ? Number.NaN : Number(line.slice(line.lastIndexOf(" ") + 1))
  })

describe("cluster token (TALON_CLUSTER_TOKEN) on the control plane", () => {
  it.live(
    "a worker with the token joins and serves; forged, takeover, legacy and replayed statuses are refused or ignored",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const dir = yield* tempDir
          const origin = yield* originWith(dir, { "a.bin": 300_000 })
          const address = `127.0.0.1:${yield* freePort}`
          const admin = `127.0.0.1:${yield* freePort}`
          // A long liveness window, so the killed worker's record outlives the replays below.
          const coordinator = yield* spawnTalon(
            ["coordinator", "--listen", address, "--admin-listen", admin, "--heartbeat-interval-ms", String(HEARTBEAT_MS), "--missed-heartbeats", "100"],
            { ...originEnv(origin), TALON_CLUSTER_TOKEN: TOKEN }
          )
          const proxy = yield* capturingProxy(address)
          const worker = yield* startWorker(dir, origin, {
            id: "w1",
            coordinator: proxy.address,
            blockSize: 64 * 1024,
            heartbeatMs: HEARTBEAT_MS,
            env: { TALON_CLUSTER_TOKEN: TOKEN }
          })
          const why = () => outputs([["coordinator", coordinator], ["w1", worker.child]])
          const listed = (s: ClusterStatus) => s.members.map((m) => m.id).join(",") === "w1"
          yield* pollUntil(cluster(admin), listed, START_MS, () => `w1 never joined\n${why()}`)

          // Statuses carry the proof (never the token); the stored record and /cluster do not.
          const seen = proxy.statuses
          expect(seen.length).toBeGreaterThan(0)
          expect(seen.every((s) => /^[0-9a-f]{64}$/.test(s.labels.find(([k]) => k === STATUS_PROOF_LABEL)?.[1] ?? ""))).toBe(true)
          expect(JSON.stringify(seen)).not.toContain(TOKEN)
          const text = yield* getText(admin, "/api/v1/cluster")
          expect(text).not.toContain(STATUS_PROOF_LABEL)

          // Reads through a client, every byte checked.
          const client = yield* makeTalonClient({ coordinator: address, blockSize: 64 * 1024, requestTimeoutMs: 30_000 })
          const bytes = origin.objects.get("s3://faults/a.bin")!
          expect(Buffer.from(yield* client.read("s3://faults/a.bin", 0, bytes.length)).equals(bytes)).toBe(true)
          expect(Buffer.from(yield* client.read("s3://faults/a.bin", 70_001, 100_000)).equals(bytes.subarray(70_001, 170_001))).toBe(true)

          // A new node id: no proof, a garbage proof, a proof made with another token — all refused.
          const intruder = forged("intruder")
          const refusedWith = (pattern: RegExp) => ({ _tag: "Ack", ok: false, detail: expect.stringMatching(pattern) })
          expect(yield* report(address, intruder)).toMatchObject(refusedWith(/sent no cluster-token proof.*set it on the node/))
          expect(yield* report(address, withLabel(intruder, "00".repeat(32)))).toMatchObject(refusedWith(/does not match this cluster's TALON_CLUSTER_TOKEN/))
          expect(yield* report(address, withLabel(intruder, "not hex at all"))).toMatchObject(refusedWith(/does not match/))
          expect(yield* report(address, signedWith(OTHER_TOKEN, intruder))).toMatchObject(refusedWith(/does not match/))
          // Legacy Register cannot carry the proof: refused, saying so.
          expect(yield* send(address, { _tag: "Register", node: { id: "legacy", address: "127.0.0.1:9", role: NodeRole.Worker } })).toMatchObject(
            refusedWith(/requires TALON_CLUSTER_TOKEN; legacy Register cannot carry it/)
          )

          // Takeover of the live worker's id by another incarnation, without or with a wrong proof.
          const hijack = forged("w1")
          expect(yield* report(address, hijack)).toMatchObject({ ok: false })
          expect(yield* report(address, signedWith(OTHER_TOKEN, hijack))).toMatchObject(refusedWith(/does not match/))
          const after = yield* cluster(admin)
          expect(after.members.map((m) => [m.id, m.address])).toEqual([["w1", worker.address]])
          expect(after.outOfPlacement).toEqual([])
          expect(yield* refusals(admin, "missing")).toBeGreaterThanOrEqual(2)
          expect(yield* refusals(admin, "wrong")).toBeGreaterThanOrEqual(4)
          expect(yield* refusals(admin, "legacy")).toBe(1)
          // Logged once per node id, not per refusal.
          yield* pollUntil(Effect.sync(() => coordinator.output()), (o) => o.includes(`refused node "intruder"`), 30_000, why)
          expect(coordinator.output().split(`refused node "intruder"`).length - 1).toBe(1)

          // A worker process configured with another token never joins, and its log says why.
          const stranger = yield* startWorker(dir, origin, { id: "w-other", coordinator: address, blockSize: 64 * 1024, heartbeatMs: HEARTBEAT_MS, env: { TALON_CLUSTER_TOKEN: OTHER_TOKEN } })
          yield* pollUntil(Effect.sync(() => stranger.child.output()), (o) => o.includes("does not match this cluster's TALON_CLUSTER_TOKEN"), START_MS, () => `w-other never said why\n${stranger.child.output()}`)
          expect(stranger.child.output()).not.toContain(OTHER_TOKEN)
          const withStranger = yield* cluster(admin)
          expect([...withStranger.members, ...withStranger.outOfPlacement].map((m) => m.id)).toEqual(["w1"])
          yield* kill9(stranger.child)

          // Replay: the worker is gone; every status it sent, replayed, leaves its record as it was.
          yield* kill9(worker.child)
          // Settled: the last status it sent (complete frames only reached the proxy's list) is applied.
          const lastSent = Math.max(...seen.map((s) => s.heartbeatSeq))
          const w1Of = (s: ClusterStatus) => s.members.find((m) => m.id === "w1")
          const settled = yield* pollUntil(cluster(admin), (s) => w1Of(s)?.heartbeatSeq === lastSent, 30_000, () => `w1's record never reached seq ${lastSent}\n${why()}`)
          const frozen = w1Of(settled)!
          const captured = seen.filter((s) => s.heartbeatSeq <= frozen.heartbeatSeq)
          expect(captured.length).toBeGreaterThan(1)
          for (const s of captured) expect(yield* report(address, s)).toMatchObject({ _tag: "Ack" })
          // Altered (a new address, a later sequence) under the captured proof: refused.
          const last = captured[captured.length - 1]!
          const moved = { ...last, node: { ...last.node, address: "127.0.0.1:9" }, heartbeatSeq: last.heartbeatSeq + 1000 }
          expect(yield* report(address, moved)).toMatchObject(refusedWith(/does not match/))
          // A proven status from long ago (an old capture) is refused as stale: it could otherwise
          // bring back an expired record or displace a newer incarnation.
          const oldCapture = signedWith(TOKEN, forged("w1", { startedAtUnixMs: Date.now() - 11 * 60_000, reportedAtUnixMs: Date.now() - 10 * 60_000 }))
          expect(yield* report(address, oldCapture)).toMatchObject(refusedWith(/reported \d+ ms ago .* more than the lease TTL/))
          expect(yield* refusals(admin, "stale")).toBe(1)
          const still = (yield* cluster(admin)).members.find((m) => m.id === "w1")!
          expect(still).toMatchObject({
            address: worker.address,
            incarnationId: frozen.incarnationId,
            heartbeatSeq: frozen.heartbeatSeq,
            lastHeartbeatAt: frozen.lastHeartbeatAt
          })
        })
      ),
    T
  )

  it.live("takeover-only: a new id needs no proof; a live id cannot be taken without one; legacy Register is accepted for a new id", () =>
    testCoordinator({ state: { clusterToken: Redacted.make(TOKEN), tokenCheck: "takeover-only" } }, (c) =>
      Effect.gen(function* () {
        const held = forged("w-open")
        expect(yield* report(c.controlAddress, held)).toMatchObject({ _tag: "Ack", ok: true })
        expect(yield* report(c.controlAddress, { ...held, heartbeatSeq: 2 })).toMatchObject({ ok: true })
        const hijack = forged("w-open", { startedAtUnixMs: held.startedAtUnixMs + 1, reportedAtUnixMs: held.startedAtUnixMs + 1, node: { id: "w-open", address: "127.0.0.1:10", role: NodeRole.Worker } })
        expect(yield* report(c.controlAddress, hijack)).toMatchObject({ ok: false, detail: expect.stringContaining("is held by live incarnation") })
        expect(yield* report(c.controlAddress, signedWith(OTHER_TOKEN, hijack))).toMatchObject({ ok: false, detail: expect.stringContaining("does not match") })
        expect((yield* c.cluster).members.map((m) => [m.id, m.address, m.heartbeatSeq])).toEqual([["w-open", "127.0.0.1:9", 2]])
        // With the proof, the new incarnation takes over.
        expect(yield* report(c.controlAddress, signedWith(TOKEN, hijack))).toMatchObject({ ok: true })
        expect((yield* c.cluster).members.map((m) => [m.id, m.address])).toEqual([["w-open", "127.0.0.1:10"]])
        expect(yield* send(c.controlAddress, { _tag: "Register", node: { id: "legacy", address: "127.0.0.1:11", role: NodeRole.Worker } })).toMatchObject({ ok: true })
        expect((yield* c.cluster).members.map((m) => m.id)).toEqual(["legacy", "w-open"])
        // ...refreshes its own registration, but cannot move the id to another address.
        expect(yield* send(c.controlAddress, { _tag: "Register", node: { id: "legacy", address: "127.0.0.1:11", role: NodeRole.Worker } })).toMatchObject({ ok: true })
        expect(yield* send(c.controlAddress, { _tag: "Register", node: { id: "legacy", address: "127.0.0.1:12", role: NodeRole.Worker } })).toMatchObject({
          ok: false,
          detail: expect.stringContaining("moving it to 127.0.0.1:12 needs the cluster token")
        })
        expect((yield* c.cluster).members.find((m) => m.id === "legacy")?.address).toBe("127.0.0.1:11")
      })
    )
  )
})
