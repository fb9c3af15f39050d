/**
 * The ClusterStateStore contract, run against every backend: Talon's
 * ordering rule, racing writers, lease refresh and expiry, derived health,
 * watch-driven membership on two instances, epoch equality, removal, the
 * cluster-token rules.
 */
import { Effect, Exit, Fiber, Redacted, Scope, Stream, SubscriptionRef } from "effect"
import { expect, it } from "vitest"
import { NodeRole } from "../../../src/core/index.js"
import type { NodeEvent } from "../../../src/coordinator/state/ClusterStateStore.js"
import type { StateStoreSettings } from "../../../src/coordinator/state/config.js"
import { membershipEpoch } from "../../../src/coordinator/state/epoch.js"
import { keepOwnRecord } from "../../../src/coordinator/state/heartbeat.js"
import { followMembership } from "../../../src/coordinator/state/MembershipView.js"
import { eventuallyAsync } from "../../support/eventually.js"
import { failureOf, newClusterId, pollUntil, worker, type StoreHandle } from "./support.js"

export interface BackendUnderTest {
  /** Another coordinator's handle on the same shared state. */
  readonly open: (overrides?: Partial<StateStoreSettings>) => Promise<StoreHandle>
  /** Whether records outlive the coordinator that wrote them. */
  readonly durable: boolean
}

const T = 90_000
const TOKEN = "0123456789abcdef-test-token"

const shuffle = <A>(xs: Array<A>): Array<A> => {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[xs[i], xs[j]] = [xs[j]!, xs[i]!]
  }
  return xs
}

/** Collects a cluster's watch events in the background, from the given revision. */
const collect = async (h: StoreHandle, clusterId: string, after: string) => {
  const events: Array<NodeEvent> = []
  await h.run(Effect.forkScoped(Stream.runForEach(h.store.watch(clusterId, after), (e) => Effect.sync(() => events.push(e)))))
  return events
}

const seqOf = (e: NodeEvent): string => (e.kind === "upserted" ? `${e.node.status.incarnationId}#${e.node.status.heartbeatSeq}` : "removed")

export const storeContract = (b: BackendUnderTest, handles: Array<StoreHandle>) => {
  const open = async (o?: Partial<StateStoreSettings>) => {
    const h = await b.open(o)
    handles.push(h)
    return h
  }

  it("applies Talon's ordering rule: new, higher sequence, restart; refuses duplicate, older, and an older incarnation", { timeout: T }, async () => {
    const { store } = await open()
    const c = newClusterId()
    const put = (s: Parameters<typeof store.put>[0]) => Effect.runPromise(store.put(s)).then((r) => r.disposition)
    expect(await put(worker(c, "w1", "inc-1", 1))).toBe("applied")
    expect(await put(worker(c, "w1", "inc-1", 1))).toBe("duplicate")
    expect(await put(worker(c, "w1", "inc-1", 0))).toBe("stale")
    expect(await put(worker(c, "w1", "inc-1", 5))).toBe("applied")
    // a restarted process: new incarnation, later start, sequence from zero
    expect(await put(worker(c, "w1", "inc-2", 0, { startedAtUnixMs: 2_000, reportedAtUnixMs: 2_000 }))).toBe("applied")
    // a delayed heartbeat from the process before the restart
    expect(await put(worker(c, "w1", "inc-1", 99))).toBe("stale")
    const snap = await Effect.runPromise(store.snapshot(c))
    expect(snap.nodes.map((n) => [n.status.node.id, n.status.incarnationId, n.status.heartbeatSeq, n.health])).toEqual([["w1", "inc-2", 0, "healthy"]])
    expect(snap.revision).toMatch(/^(memory|etcd):\d+$/)
  })

  it("two instances racing the same heartbeats and a restart never move a record backwards", { timeout: T }, async () => {
    const [a, bb] = [await open(), await open()]
    const c = newClusterId()
    const start = await Effect.runPromise(a.store.snapshot(c))
    const events = await collect(a, c, start.revision)
    const N = 25
    const writes = shuffle([
      ...Array.from({ length: N }, (_, i) => worker(c, "w1", "inc-1", i + 1)),
      ...Array.from({ length: N }, (_, i) => worker(c, "w1", "inc-1", i + 1)),
      ...Array.from({ length: N }, (_, i) => worker(c, "w1", "inc-2", i + 1, { startedAtUnixMs: 5_000, reportedAtUnixMs: 5_000 + i }))
    ])
    const results = await Promise.all(writes.map((s, i) => Effect.runPromise((i % 2 === 0 ? a : bb).store.put(s))))
    const final = await Effect.runPromise(bb.store.snapshot(c))
    expect(final.nodes.map((n) => [n.status.incarnationId, n.status.heartbeatSeq])).toEqual([["inc-2", N]])
    const applied = results.filter((r) => r.disposition === "applied").length
    await pollUntil(async () => events.length, (n) => n >= applied, 30_000, "every applied write to reach the watch")
    expect(events.length).toBe(applied)
    // The committed history only moves forward: inc-1 ascending, then inc-2 ascending, never back.
    const order = events.map((e) => (e.kind === "upserted" ? [e.node.status.incarnationId === "inc-2" ? 1 : 0, e.node.status.heartbeatSeq] : [-1, -1]))
    for (let i = 1; i < order.length; i++) {
      const [pi, ps] = order[i - 1]!
      const [ci, cs] = order[i]!
      expect(ci! > pi! || (ci === pi && cs! > ps!), `event ${i} (${seqOf(events[i]!)}) after ${seqOf(events[i - 1]!)}`).toBe(true)
    }
    expect(seqOf(events[events.length - 1]!)).toBe(`inc-2#${N}`)
  })

  it("accepted heartbeats keep a record alive; silence turns it unhealthy, then the lease expires it", { timeout: T }, async () => {
    const h = await open()
    const c = newClusterId()
    const { leaseTtlMs, unhealthyAfterMs, heartbeatIntervalMs } = h.store.settings
    const events = await collect(h, c, (await Effect.runPromise(h.store.snapshot(c))).revision)
    const began = await h.now()
    let seq = 0
    let lastPut = 0
    while ((await h.now()) - began < leaseTtlMs + 1_500) {
      lastPut = await h.now()
      expect((await Effect.runPromise(h.store.put(worker(c, "w1", "inc-1", ++seq)))).disposition).toBe("applied")
      await h.passTime(heartbeatIntervalMs)
    }
    const alive = await Effect.runPromise(h.store.snapshot(c))
    expect(alive.nodes.map((n) => n.health)).toEqual(["healthy"])
    expect(alive.placement.map((n) => n.id)).toEqual(["w1"])
    // Now silent: unhealthy once unhealthy-after has passed, while the record is still there.
    const silentSince = lastPut
    // On a TestClock each poll moves the store's time on a step; on real time, the poll's pause does.
    const step = h.testClock ? 250 : 0
    const later = <A>(read: () => Promise<A>) => async () => (step > 0 ? await h.passTime(step) : undefined, await read())
    const sick = await pollUntil(later(() => Effect.runPromise(h.store.snapshot(c))), (s) => s.nodes[0]?.health !== "healthy", 30_000, "unhealthy")
    expect((await h.now()) - silentSince).toBeGreaterThanOrEqual(unhealthyAfterMs - 100)
    expect(sick.nodes.map((n) => n.health)).toEqual(["unhealthy"])
    expect(sick.placement).toEqual([])
    await pollUntil(later(() => Effect.runPromise(h.store.snapshot(c))), (s) => s.nodes.length === 0, 30_000, "lease expiry")
    expect((await h.now()) - silentSince).toBeGreaterThanOrEqual(leaseTtlMs - 200)
    await pollUntil(async () => events.at(-1)?.kind, (k) => k === "removed", 30_000, "a removal event")
    expect(events.at(-1)).toMatchObject({ kind: "removed", clusterId: c, nodeId: "w1" })
  })

  it("two instances follow the same membership through the watch and report the same epoch", { timeout: T }, async () => {
    const [a, bb] = [await open(), await open()]
    const c = newClusterId()
    const va = await a.run(followMembership(a.store, c))
    const vb = await bb.run(followMembership(bb.store, c))
    const view = (h: StoreHandle, v: typeof va) => h.run(SubscriptionRef.get(v))
    const put = (h: StoreHandle, s: ReturnType<typeof worker>) => Effect.runPromise(h.store.put(s))
    await put(a, worker(c, "w2", "i", 1))
    await put(a, worker(c, "w1", "i", 1))
    await put(bb, worker(c, "w3", "i", 1, { ready: false }))
    await put(bb, worker(c, "coord", "i", 1, { node: { id: "coord", address: "127.0.0.1:7000", role: NodeRole.Coordinator } }))
    const expected = await Effect.runPromise(membershipEpoch([worker(c, "w1", "i", 1).node, worker(c, "w2", "i", 1).node]))
    for (const [h, v] of [[a, va], [bb, vb]] as const) {
      const m = await pollUntil(() => view(h, v), (m) => m.ready && m.nodes.size === 4, 30_000, "four members in the view")
      expect(m.placement.map((n) => n.id).sort()).toEqual(["w1", "w2"])
      expect(m.epoch).toBe(expected)
    }
    expect((await Effect.runPromise(bb.store.remove(c, "w1", "i"))).disposition).toBe("applied")
    const after = await Effect.runPromise(membershipEpoch([worker(c, "w2", "i", 1).node]))
    expect(after).not.toBe(expected)
    for (const [h, v] of [[a, va], [bb, vb]] as const) {
      const m = await pollUntil(() => view(h, v), (m) => m.nodes.size === 3, 30_000, "the removal in the view")
      expect(m.placement.map((n) => n.id)).toEqual(["w2"])
      expect(m.epoch).toBe(after)
    }
    expect((await Effect.runPromise(a.store.snapshot(c))).epoch).toBe(after)
    expect((await Effect.runPromise(bb.store.snapshot(c))).epoch).toBe(after)
  })

  it.runIf(b.durable)("a restarted coordinator reports the same members and epoch", { timeout: T }, async () => {
    const a = await open()
    const c = newClusterId()
    for (const id of ["w1", "w2", "w3"]) await Effect.runPromise(a.store.put(worker(c, id, `inc-${id}`, 1)))
    const before = await Effect.runPromise(a.store.snapshot(c))
    await a.close()
    handles.splice(handles.indexOf(a), 1)
    const restarted = await open()
    const after = await Effect.runPromise(restarted.store.snapshot(c))
    expect(after.epoch).toBe(before.epoch)
    expect(after.epoch).not.toBe(0n)
    expect(after.nodes.map((n) => n.status)).toEqual(before.nodes.map((n) => n.status))
  })

  it("removes only for the incarnation holding the record, and rejects invalid records", { timeout: T }, async () => {
    const { store } = await open()
    const c = newClusterId()
    expect((await Effect.runPromise(store.remove(c, "w1", "inc-1"))).disposition).toBe("not-found")
    await Effect.runPromise(store.put(worker(c, "w1", "inc-1", 1)))
    expect((await Effect.runPromise(store.remove(c, "w1", "inc-0"))).disposition).toBe("stale")
    expect((await Effect.runPromise(store.snapshot(c))).nodes.length).toBe(1)
    expect((await Effect.runPromise(store.remove(c, "w1", "inc-1"))).disposition).toBe("applied")
    expect((await Effect.runPromise(store.snapshot(c))).nodes).toEqual([])
    const bad = await failureOf(store.put(worker(c, "w1", "inc-1", 1, { reportedAtUnixMs: 10 })))
    expect(bad).toMatchObject({ _tag: "InvalidRecord" })
    expect(String((bad as Error).message)).toContain("reported_at_unix_ms 10 is before started_at_unix_ms 1000")
  })

  it("with a cluster token: every-write refuses a missing or wrong proof", { timeout: T }, async () => {
    const { store } = await open({ clusterToken: Redacted.make(TOKEN), tokenCheck: "every-write" })
    const c = newClusterId()
    const s = worker(c, "w1", "inc-1", 1)
    expect(await failureOf(store.put(s))).toMatchObject({ _tag: "TokenRejected", presented: false })
    const wrong = await failureOf(store.put(s, { proof: "wrong" }))
    expect(wrong).toMatchObject({ _tag: "TokenRejected", presented: true })
    expect((wrong as Error).message).not.toContain(TOKEN)
    expect((await Effect.runPromise(store.snapshot(c))).nodes.length).toBe(0)
    expect((await Effect.runPromise(store.put(s, { proof: "verified" }))).disposition).toBe("applied")
    expect((await Effect.runPromise(store.snapshot(c))).nodes.length).toBe(1)
  })

  it("with a cluster token: takeover-only lets no other incarnation take a live node id without it", { timeout: T }, async () => {
    const { store } = await open({ clusterToken: Redacted.make(TOKEN), tokenCheck: "takeover-only" })
    const c = newClusterId()
    const later = { startedAtUnixMs: 9_000, reportedAtUnixMs: 9_000 }
    expect((await Effect.runPromise(store.put(worker(c, "w1", "inc-1", 1)))).disposition).toBe("applied")
    expect((await Effect.runPromise(store.put(worker(c, "w1", "inc-1", 2)))).disposition).toBe("applied")
    const hijack = await failureOf(store.put(worker(c, "w1", "evil", 1, { node: { id: "w1", address: "10.6.6.6:1", role: NodeRole.Worker }, ...later })))
    expect(hijack).toMatchObject({ _tag: "TakeoverRefused", nodeId: "w1", heldBy: "inc-1", incoming: "evil" })
    expect((await Effect.runPromise(store.snapshot(c))).nodes.map((n) => n.status.node.address)).toEqual([worker(c, "w1", "", 0).node.address])
    expect(await failureOf(store.put(worker(c, "w1", "inc-2", 1, later), { proof: "wrong" }))).toMatchObject({ _tag: "TokenRejected" })
    expect((await Effect.runPromise(store.put(worker(c, "w1", "inc-2", 1, later), { proof: "verified" }))).disposition).toBe("applied")
    expect((await Effect.runPromise(store.snapshot(c))).nodes.map((n) => n.status.incarnationId)).toEqual(["inc-2"])
  })

  it("watching from a snapshot's revision misses nothing written after it", { timeout: T }, async () => {
    const a = await open()
    const c = newClusterId()
    await Effect.runPromise(a.store.put(worker(c, "w1", "i", 1)))
    const snap = await Effect.runPromise(a.store.snapshot(c))
    await Effect.runPromise(a.store.put(worker(c, "w1", "i", 2)))
    await Effect.runPromise(a.store.put(worker(c, "w2", "i", 1)))
    const events = await collect(a, c, snap.revision)
    await pollUntil(async () => events.length, (n) => n >= 2, 30_000, "two events")
    expect(events.map(seqOf)).toEqual(["i#2", "i#1"])
    expect(events.map((e) => e.nodeId)).toEqual(["w1", "w2"])
    const fiber = await a.run(Effect.forkScoped(Stream.runCollect(Stream.take(a.store.watch(c), 1))))
    // A live watch has no "subscribed" event to await: write until it has seen a write.
    let seq = 0
    await eventuallyAsync(
      async () => {
        await Effect.runPromise(a.store.put(worker(c, "w3", "i", ++seq)))
        expect((await Effect.runPromise(Fiber.poll(fiber)))._tag).toBe("Some")
      },
      { what: "the live watch sees a write", within: T, every: "50 millis" }
    )
    const live = await Effect.runPromise(Fiber.join(fiber))
    expect([...live].map((e) => e.nodeId)).toEqual(["w3"])
  })

  it("a process's own record stays alive past the lease TTL while it beats, and leaves at once when it stops", { timeout: T }, async () => {
    const h = await open()
    const c = newClusterId()
    const events = await collect(h, c, (await Effect.runPromise(h.store.snapshot(c))).revision)
    const scope = Effect.runSync(Scope.make())
    const me = (seq: number) => Effect.succeed(worker(c, "self", "inc-self", seq, { reportedAtUnixMs: 1_000 + seq }))
    await Effect.runPromise(h.clocked(Scope.extend(keepOwnRecord(h.store, me), scope)))
    await h.passTime(h.store.settings.leaseTtlMs + 1_000)
    const alive = await Effect.runPromise(h.store.snapshot(c))
    expect(alive.nodes.map((n) => [n.status.node.id, n.health])).toEqual([["self", "healthy"]])
    expect(alive.nodes[0]!.status.heartbeatSeq).toBeGreaterThan(2)
    // Removed by the leave itself: the lease was renewed a beat ago and cannot have run out yet.
    await Effect.runPromise(Scope.close(scope, Exit.void))
    expect((await Effect.runPromise(h.store.snapshot(c))).nodes).toEqual([])
    await pollUntil(async () => events.at(-1)?.kind, (k) => k === "removed", 30_000, "the leave event")
    const seqs = events.flatMap((e) => (e.kind === "upserted" ? [e.node.status.heartbeatSeq] : []))
    expect(seqs).toEqual(seqs.map((_, i) => i))
  })
}
