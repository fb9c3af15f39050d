/**
 * The coordinator's membership registry actor over the in-memory state store,
 * on the TestClock: Talon's write ordering, expiry by silence and by lease,
 * legacy Register/Heartbeat, and snapshots in mailbox order.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, TestClock } from "effect"
import { NodeRole } from "../../src/core/ids.js"
import { eventually } from "../support/eventually.js"
import { makeRegistry } from "../../src/coordinator/registry/Registry.js"
import { Heartbeat, Register, ReportStatus, Snapshot, Sweep } from "../../src/coordinator/registry/registryMessages.js"
import type { RegistryView } from "../../src/coordinator/registry/view.js"
import { LEGACY_INCARNATION } from "../../src/coordinator/registry/legacy.js"
import { ClusterStateStore } from "../../src/coordinator/state/ClusterStateStore.js"
import { membershipEpoch } from "../../src/coordinator/state/epoch.js"
import { StoreUnavailable } from "../../src/coordinator/state/errors.js"
import { worker } from "./state/support.js"

const TIMING = { heartbeatIntervalMs: 100, unhealthyAfterMs: 300, leaseTtlMs: 1_000, requestTimeoutMs: 1_000, clusterToken: undefined }
const CLUSTER = "c1"

/** A registry on a fresh memory store; `extra` for a second registry sharing the store. */
const setup = Effect.gen(function* () {
  const ctx = yield* Layer.build(ClusterStateStore.Memory(TIMING))
  const store = Context.get(ctx, ClusterStateStore)
  const registry = yield* makeRegistry(store, { clusterId: CLUSTER, maxMembers: 3 })
  // Let the follower take its first snapshot.
  yield* TestClock.adjust(1)
  yield* registry.actor.ask(new Sweep())
  return { store, registry }
})

/**
 * Sweeps until `done` holds of the snapshot. The store's follower hashes the
 * epoch on a real promise, so its view lands a moment of real time after the
 * TestClock moved; `eventually` waits for that on the live clock, moving the
 * TestClock on by 10 ms a round so the store's expiry fiber keeps running.
 */
const sweepUntil = (registry: Effect.Effect.Success<typeof setup>["registry"], done: (v: RegistryView) => boolean) =>
  eventually(
    Effect.gen(function* () {
      yield* registry.actor.ask(new Sweep())
      const view = yield* registry.actor.ask(new Snapshot())
      if (done(view)) return view
      yield* TestClock.adjust(10)
      return yield* Effect.fail(`not yet: ${view.nodes.length} nodes`)
    }),
    { what: "the swept snapshot", every: "10 millis" }
  )

const at = (status: ReturnType<typeof worker>, ms: number) => ({ ...status, startedAtUnixMs: ms, reportedAtUnixMs: ms + status.heartbeatSeq })

describe("membership registry actor", () => {
  it.scoped("applies Talon's ordering: later sequence wins, an older sequence or an older incarnation never displaces", () =>
    Effect.gen(function* () {
      const { registry } = yield* setup
      const ask = registry.actor.ask
      expect(yield* ask(new ReportStatus({ status: worker(CLUSTER, "w1", "inc-a", 5) }))).toEqual({ ok: true, detail: null })
      const moved = { ...worker(CLUSTER, "w1", "inc-a", 6), node: { id: "w1", address: "127.0.0.1:9999", role: NodeRole.Worker } }
      yield* ask(new ReportStatus({ status: moved }))
      // A delayed, older heartbeat of the same incarnation: acknowledged (as Talon does), not applied.
      expect((yield* ask(new ReportStatus({ status: worker(CLUSTER, "w1", "inc-a", 4) }))).ok).toBe(true)
      // A heartbeat from an incarnation that started earlier (a process since restarted) is stale too.
      yield* ask(new ReportStatus({ status: at(worker(CLUSTER, "w1", "inc-old", 99), 500) }))
      let view = yield* ask(new Snapshot())
      expect(view.nodes.map((n) => [n.status.incarnationId, n.status.heartbeatSeq, n.status.node.address])).toEqual([
        ["inc-a", 6, "127.0.0.1:9999"]
      ])
      // A later incarnation (the node restarted) replaces the record whatever its sequence.
      yield* ask(new ReportStatus({ status: at(worker(CLUSTER, "w1", "inc-new", 1), 2_000) }))
      view = yield* ask(new Snapshot())
      expect(view.nodes.map((n) => [n.status.incarnationId, n.status.heartbeatSeq])).toEqual([["inc-new", 1]])
      expect(view.ready).toBe(true)
      expect(view.epoch).toBe(yield* membershipEpoch(view.placement))
    })
  )

  it.scoped("a silent node leaves placement after unhealthy-after and its record goes at lease expiry; the epoch follows", () =>
    Effect.gen(function* () {
      const { registry } = yield* setup
      const ask = registry.actor.ask
      yield* ask(new ReportStatus({ status: worker(CLUSTER, "w1", "i1", 1) }))
      yield* ask(new ReportStatus({ status: worker(CLUSTER, "w2", "i2", 1) }))
      const two = yield* ask(new Snapshot())
      expect(two.members.map((m) => m.status.node.id)).toEqual(["w1", "w2"])
      // w1 keeps reporting, w2 goes silent.
      for (let seq = 2; seq <= 5; seq++) {
        yield* TestClock.adjust(100)
        yield* ask(new ReportStatus({ status: worker(CLUSTER, "w1", "i1", seq) }))
      }
      yield* ask(new Sweep())
      const one = yield* ask(new Snapshot())
      expect(one.members.map((m) => m.status.node.id)).toEqual(["w1"])
      expect(one.nodes.find((n) => n.status.node.id === "w2")?.health).toBe("unhealthy")
      expect(one.epoch).not.toBe(two.epoch)
      expect(one.epoch).toBe(yield* membershipEpoch([worker(CLUSTER, "w1", "i1", 1).node]))
      expect(registry.counters.expirations).toBe(1)
      // Past the lease the record itself is gone.
      yield* TestClock.adjust(1_000)
      const gone = yield* sweepUntil(registry, (v) => v.nodes.length === 0)
      expect(gone.nodes.map((n) => n.status.node.id)).toEqual([])
      expect(gone.epoch).toBe(0n)
    })
  )

  it.scoped("a snapshot sees every write queued before it; the published view matches", () =>
    Effect.gen(function* () {
      const { registry } = yield* setup
      const waits = []
      for (const id of ["w3", "w1", "w2"]) waits.push(yield* registry.actor.post(new ReportStatus({ status: worker(CLUSTER, id, `i-${id}`, 1) })))
      const view = yield* registry.actor.ask(new Snapshot())
      expect(view.members.map((m) => m.status.node.id)).toEqual(["w1", "w2", "w3"])
      for (const w of waits) expect(yield* w).toMatchObject({ _tag: "Success" })
    })
  )

  it.scoped("refuses another cluster's status and more nodes than the bound, saying why", () =>
    Effect.gen(function* () {
      const { registry } = yield* setup
      const ask = registry.actor.ask
      const foreign = yield* ask(new ReportStatus({ status: worker("other", "w1", "i", 1) }))
      expect(foreign.ok).toBe(false)
      expect(foreign.detail).toContain('cluster "other"')
      for (const id of ["a", "b", "c"]) expect((yield* ask(new ReportStatus({ status: worker(CLUSTER, id, "i", 1) }))).ok).toBe(true)
      const full = yield* ask(new ReportStatus({ status: worker(CLUSTER, "d", "i", 1) }))
      expect(full).toEqual({ ok: false, detail: expect.stringContaining("already has 3 nodes") })
      expect(registry.counters.rejectedHeartbeats).toBe(2)
    })
  )

  it.scoped("legacy Register/Heartbeat keep a record alive; a status heartbeat of the same id replaces it and a later Register does not displace it", () =>
    Effect.gen(function* () {
      const { registry } = yield* setup
      const ask = registry.actor.ask
      const node = { id: "w1", address: "127.0.0.1:7101", role: NodeRole.Worker }
      expect((yield* ask(new Heartbeat({ node: "w1", blockCount: 1 }))).detail).toContain("register again")
      expect(yield* ask(new Register({ node }))).toEqual({ ok: true, detail: null })
      for (let i = 0; i < 5; i++) {
        yield* TestClock.adjust(200)
        expect((yield* ask(new Heartbeat({ node: "w1", blockCount: 7 }))).ok).toBe(true)
      }
      let view = yield* ask(new Snapshot())
      expect(view.members.map((m) => [m.status.incarnationId, m.status.metrics.blockCount])).toEqual([[LEGACY_INCARNATION, 7]])
      yield* ask(new ReportStatus({ status: at(worker(CLUSTER, "w1", "real", 1), 1) }))
      yield* ask(new Register({ node: { ...node, address: "127.0.0.1:1" } }))
      view = yield* ask(new Snapshot())
      expect(view.members.map((m) => [m.status.incarnationId, m.status.node.address])).toEqual([["real", "127.0.0.1:7002"]])
      expect((yield* ask(new Register({ node: { ...node, address: "not an address" } }))).detail).toContain("not a dialable host:port")
    })
  )

  it.scoped("while the store cannot be followed, writes are refused at once and nothing is written", () =>
    Effect.gen(function* () {
      const ctx = yield* Layer.build(ClusterStateStore.Memory(TIMING))
      const real = Context.get(ctx, ClusterStateStore)
      const down = new StoreUnavailable({ backend: "memory", operation: "snapshot", detail: "partitioned" })
      const cutOff = { ...real, snapshot: () => Effect.fail(down), checkReady: Effect.fail(down) }
      const registry = yield* makeRegistry(cutOff, { clusterId: CLUSTER })
      yield* TestClock.adjust(1)
      const reply = yield* registry.actor.ask(new ReportStatus({ status: worker(CLUSTER, "w1", "i", 1) }))
      expect(reply.ok).toBe(false)
      expect(reply.detail).toContain("coordinator not ready")
      expect(reply.detail).toContain("partitioned")
      expect((yield* registry.actor.ask(new Register({ node: worker(CLUSTER, "w2", "i", 1).node }))).ok).toBe(false)
      expect((yield* real.snapshot(CLUSTER)).nodes).toEqual([])
      expect((yield* registry.actor.ask(new Snapshot())).ready).toBe(false)
    })
  )
})
