/**
 * The state-store contract against a real one-member etcd, then what only a
 * real cluster shows: readiness when etcd stops and returns, a three-member
 * cluster losing members, and the record format Talon's coordinators read.
 */
import { Effect, Either, Fiber, Redacted, Stream, SubscriptionRef } from "effect"
import { Etcd3 } from "etcd3"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ClusterStateStore } from "../../../src/coordinator/state/ClusterStateStore.js"
import { followMembership } from "../../../src/coordinator/state/MembershipView.js"
import { decodeStoredNode } from "../../../src/coordinator/state/record.js"
import { storeContract } from "./contract.js"
import { EtcdCluster, etcdAvailable } from "./etcdHarness.js"
import { FAST, failureOf, newClusterId, openStore, pollUntil, worker, type StoreHandle } from "./support.js"

const T = 120_000

describe.runIf(etcdAvailable())("ClusterStateStore.Etcd", () => {
  describe("contract, one member", () => {
    let etcd: EtcdCluster
    const handles: Array<StoreHandle> = []
    beforeAll(async () => {
      etcd = await EtcdCluster.start(1)
    }, T)
    afterAll(async () => {
      for (const h of handles) await h.close()
      await etcd?.stop()
    }, T)
    storeContract(
      { durable: true, open: (o = {}) => openStore(ClusterStateStore.Etcd({ ...FAST, etcdEndpoints: etcd.endpoints, ...o })) },
      handles
    )

    it("a watch from a compacted revision fails with WatchCompacted, and a fresh snapshot resumes", { timeout: 60_000 }, async () => {
      const h = await openStore(ClusterStateStore.Etcd({ ...FAST, etcdEndpoints: etcd.endpoints }))
      handles.push(h)
      const c = newClusterId()
      const old = await Effect.runPromise(h.store.snapshot(c))
      for (let seq = 1; seq <= 3; seq++) await Effect.runPromise(h.store.put(worker(c, "w1", "i", seq)))
      const now = await Effect.runPromise(h.store.snapshot(c))
      const raw = new Etcd3({ hosts: etcd.endpoints })
      try {
        await raw.kv.compact({ revision: now.revision.slice("etcd:".length), physical: true })
      } finally {
        raw.close()
      }
      const gone = await failureOf(Stream.runCollect(Stream.take(h.store.watch(c, old.revision), 1)))
      expect(gone).toMatchObject({ _tag: "WatchCompacted" })
      expect((gone as Error).message).toContain("take a fresh snapshot")
      const fresh = await Effect.runPromise(h.store.snapshot(c))
      expect(fresh.nodes.map((n) => n.status.heartbeatSeq)).toEqual([3])
      const next = await h.run(Effect.forkScoped(Stream.runCollect(Stream.take(h.store.watch(c, fresh.revision), 1))))
      await Effect.runPromise(h.store.put(worker(c, "w1", "i", 4)))
      const [e] = [...(await Effect.runPromise(Fiber.join(next)))]
      expect(e).toMatchObject({ kind: "upserted", nodeId: "w1" })
    })

    it("stores Talon's NodeStatus JSON under Talon's key layout", { timeout: T }, async () => {
      const h = await openStore(ClusterStateStore.Etcd({ ...FAST, etcdEndpoints: etcd.endpoints, etcdPrefix: "/talon-x/" }))
      handles.push(h)
      const c = newClusterId()
      const s = worker(c, "w/1", "inc-1", 7, { labels: [["zone", "z1"]], adminAddress: "127.0.0.1:8001" })
      await Effect.runPromise(h.store.put(s))
      const raw = new Etcd3({ hosts: etcd.endpoints })
      try {
        const value = await raw.get(`/talon-x/clusters/${c}/nodes/worker/w/1`).string()
        const json = JSON.parse(value!)
        expect(json).toMatchObject({
          schema_version: 1,
          cluster_id: c,
          node: { id: "w/1", address: s.node.address, role: "Worker" },
          incarnation_id: "inc-1",
          admin_address: "127.0.0.1:8001",
          heartbeat_seq: 7,
          health: "healthy",
          ready: true,
          labels: { zone: "z1" }
        })
        expect(Object.keys(json.metrics)).toContain("state_snapshot_age_ms")
        expect(Either.getOrThrow(decodeStoredNode(value!)).status).toEqual(s)
        // A record another Talon coordinator wrote (no observed time) reads with its report time.
        const talonWritten = { ...json, observed_at_unix_ms: undefined, reported_at_unix_ms: 1_234 }
        expect(Either.getOrThrow(decodeStoredNode(JSON.stringify(talonWritten))).updatedAtUnixMs).toBe(1_234)
        // ids with '/' survive the delete event's key parsing
        expect((await Effect.runPromise(h.store.remove(c, "w/1", "inc-1"))).disposition).toBe("applied")
      } finally {
        raw.close()
      }
    })
  })

  describe("authentication", () => {
    it("works with the right credentials and says which settings to check otherwise", { timeout: T }, async () => {
      const etcd = await EtcdCluster.start(1)
      const admin = new Etcd3({ hosts: etcd.endpoints })
      const handles: Array<StoreHandle> = []
      try {
        await admin.role("root").create().catch(() => undefined)
        await admin.user("root").create("root-password-for-tests")
        await admin.user("root").addRole("root")
        await admin.auth.authEnable({})
        const open = async (o: object) => {
          const h = await openStore(ClusterStateStore.Etcd({ ...FAST, requestTimeoutMs: 5_000, etcdEndpoints: etcd.endpoints, ...o }))
          handles.push(h)
          return h.store
        }
        const c = newClusterId()
        const good = await open({ etcdUsername: "root", etcdPassword: Redacted.make("root-password-for-tests") })
        expect((await Effect.runPromise(good.put(worker(c, "w1", "i", 1)))).disposition).toBe("applied")
        expect((await Effect.runPromise(good.snapshot(c))).nodes.length).toBe(1)
        const wrong = await failureOf((await open({ etcdUsername: "root", etcdPassword: Redacted.make("not-the-password") })).snapshot(c))
        expect(wrong).toMatchObject({ _tag: "StoreAuthFailed" })
        expect((wrong as Error).message).toContain("TALON_ETCD_PASSWORD")
        expect((wrong as Error).message).not.toContain("not-the-password")
        expect(await failureOf((await open({})).put(worker(c, "w2", "i", 1)))).toMatchObject({ _tag: "StoreAuthFailed" })
      } finally {
        for (const h of handles) await h.close()
        admin.close()
        await etcd.stop()
      }
    })
  })

  describe("readiness", () => {
    it("fails while etcd is stopped and recovers when it returns; the membership view follows", { timeout: T }, async () => {
      const etcd = await EtcdCluster.start(1)
      const h = await openStore(ClusterStateStore.Etcd({ ...FAST, requestTimeoutMs: 1_500, etcdEndpoints: etcd.endpoints }))
      try {
        const c = newClusterId()
        await Effect.runPromise(h.store.put(worker(c, "w1", "inc-1", 1)))
        expect((await Effect.runPromise(h.store.checkReady)).backend).toBe("etcd")
        const view = await h.run(followMembership(h.store, c))
        await pollUntil(() => h.run(SubscriptionRef.get(view)), (m) => m.ready && m.nodes.size === 1, 30_000, "view ready")

        await etcd.stopMember(0)
        const down = await failureOf(h.store.checkReady)
        expect(down).toMatchObject({ _tag: expect.stringMatching(/^Store(Unavailable|Timeout)$/) })
        expect((down as Error).message).toMatch(/etcd state store/)
        expect(await failureOf(h.store.snapshot(c))).toMatchObject({ _tag: expect.stringMatching(/^Store(Unavailable|Timeout)$/) })
        const lost = await pollUntil(() => h.run(SubscriptionRef.get(view)), (m) => !m.ready, 60_000, "view not ready")
        expect(lost.error).toBeDefined()

        await etcd.startMember(0)
        await pollUntil(() => failureOf(h.store.checkReady), (r) => r === "succeeded", 60_000, "ready again")
        await Effect.runPromise(h.store.put(worker(c, "w2", "inc-1", 1)))
        const back = await pollUntil(() => h.run(SubscriptionRef.get(view)), (m) => m.ready && m.nodes.size === 2, 60_000, "view back with w2")
        expect([...back.nodes.keys()].sort()).toEqual(["w1", "w2"])
      } finally {
        await h.close()
        await etcd.stop()
      }
    })
  })

  describe("three members", () => {
    let etcd: EtcdCluster
    beforeAll(async () => {
      etcd = await EtcdCluster.start(3)
    }, T)
    afterAll(() => etcd?.stop(), T)

    it("coordinators on different members agree; one member down keeps quorum, two lose it", { timeout: T }, async () => {
      // Leases long enough to outlive the member restarts on a loaded machine: this test is about
      // quorum, not expiry (the contract suite covers expiry), and the records are written once.
      const QUORUM = { ...FAST, requestTimeoutMs: 2_000, leaseTtlMs: 120_000 }
      const [a, b, all] = await Promise.all([
        openStore(ClusterStateStore.Etcd({ ...QUORUM, etcdEndpoints: [etcd.endpoints[0]!] })),
        openStore(ClusterStateStore.Etcd({ ...QUORUM, etcdEndpoints: [etcd.endpoints[2]!] })),
        openStore(ClusterStateStore.Etcd({ ...QUORUM, etcdEndpoints: etcd.endpoints }))
      ])
      try {
        const c = newClusterId()
        await Promise.all(["w1", "w2"].map((id, i) => Effect.runPromise((i === 0 ? a : b).store.put(worker(c, id, "i", 1)))))
        const [sa, sb] = await Promise.all([Effect.runPromise(a.store.snapshot(c)), Effect.runPromise(b.store.snapshot(c))])
        expect(sa.epoch).toBe(sb.epoch)
        expect(sa.nodes.map((n) => n.status.node.id)).toEqual(["w1", "w2"])
        expect(sb.revision).toBe(sa.revision)

        await etcd.stopMember(1)
        await pollUntil(() => failureOf(all.store.checkReady), (r) => r === "succeeded", 60_000, "ready with 2 of 3")
        expect((await Effect.runPromise(all.store.put(worker(c, "w3", "i", 1)))).disposition).toBe("applied")
        expect((await Effect.runPromise(b.store.snapshot(c))).nodes.length).toBe(3)

        await etcd.stopMember(2)
        // Member 0 alone has no quorum: a linearizable read cannot be served.
        await pollUntil(() => failureOf(a.store.checkReady), (r) => r !== "succeeded", 60_000, "not ready with 1 of 3")
        expect(await failureOf(a.store.put(worker(c, "w4", "i", 1)))).toMatchObject({ _tag: expect.stringMatching(/^Store(Unavailable|Timeout)$/) })

        await Promise.all([etcd.startMember(1, false), etcd.startMember(2, false)])
        await pollUntil(() => failureOf(a.store.checkReady), (r) => r === "succeeded", 90_000, "quorum back")
        expect((await Effect.runPromise(b.store.snapshot(c))).nodes.map((n) => n.status.node.id)).toEqual(["w1", "w2", "w3"])
      } finally {
        await Promise.all([a.close(), b.close(), all.close()])
      }
    })
  })
})
