/** The pure rules under the store: ordering, record JSON, health, epoch, settings, token. */
import { ConfigProvider, Effect, Either, Redacted } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { NodeRole, type NodeInfo } from "../../../src/core/index.js"
import { resolveStateStoreSettings } from "../../../src/coordinator/state/config.js"
import { canonicalMembership, epochForWire, membershipEpoch, xxh3_64 } from "../../../src/coordinator/state/epoch.js"
import { decodeStoredNode, effectiveHealth, encodeStoredNode, rejectReason } from "../../../src/coordinator/state/record.js"
import { tokenProblem } from "../../../src/coordinator/state/token.js"
import type { NodeStatus } from "../../../src/protocol/index.js"
import { nodeStatusArb } from "../../protocol/arbitraries.js"
import { worker } from "./support.js"

const run = <A, E>(e: Effect.Effect<A, E>) => Effect.runPromise(e)

describe("ordering rule", () => {
  it("any arrival order of heartbeats from successive incarnations commits a strictly advancing history ending at the newest (property)", () => {
    const writes = fc
      .array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 4 })
      .map((lengths) =>
        lengths.flatMap((n, inc) =>
          Array.from({ length: n }, (_, seq) =>
            worker("c", "w", `inc-${inc}`, seq, { startedAtUnixMs: 1_000 * (inc + 1), reportedAtUnixMs: 1_000 * (inc + 1) + seq })
          )
        )
      )
    fc.assert(
      fc.property(writes.chain((ws) => fc.shuffledSubarray(ws, { minLength: ws.length, maxLength: ws.length })), (order) => {
        let current: NodeStatus | undefined
        const committed: Array<NodeStatus> = []
        for (const w of order) {
          if (rejectReason(current, w) === null) {
            committed.push(w)
            current = w
          }
        }
        const key = (s: NodeStatus) => s.startedAtUnixMs * 1_000 + s.heartbeatSeq
        for (let i = 1; i < committed.length; i++) expect(key(committed[i]!)).toBeGreaterThan(key(committed[i - 1]!))
        expect(key(current!)).toBe(Math.max(...order.map(key)))
      }),
      { numRuns: 500 }
    )
  })

  it("names duplicates and stale writes", () => {
    const base = worker("c", "w", "a", 5)
    expect(rejectReason(undefined, base)).toBeNull()
    expect(rejectReason(base, worker("c", "w", "a", 5))).toBe("duplicate")
    expect(rejectReason(base, worker("c", "w", "a", 4))).toBe("stale")
    expect(rejectReason(base, worker("c", "w", "a", 6))).toBeNull()
    expect(rejectReason(base, worker("c", "w", "b", 0, { startedAtUnixMs: 999, reportedAtUnixMs: 999 }))).toBe("stale")
    expect(rejectReason(base, worker("c", "w", "b", 0, { reportedAtUnixMs: base.reportedAtUnixMs }))).toBe("stale")
    expect(rejectReason(base, worker("c", "w", "b", 0, { reportedAtUnixMs: base.reportedAtUnixMs + 1 }))).toBeNull()
  })
})

describe("stored record", () => {
  it("round trips through Talon's JSON form (property)", () => {
    fc.assert(
      fc.property(nodeStatusArb, fc.maxSafeNat(), (status, at) => {
        expect(decodeStoredNode(encodeStoredNode({ status, updatedAtUnixMs: at }))).toEqual(Either.right({ status, updatedAtUnixMs: at }))
      }),
      { numRuns: 300 }
    )
  })

  it("never throws on arbitrary or damaged values, and says what is wrong (property)", () => {
    fc.assert(fc.property(fc.string(), (s) => void decodeStoredNode(s)), { numRuns: 500 })
    fc.assert(
      fc.property(fc.json(), (s) => void decodeStoredNode(s)),
      { numRuns: 300 }
    )
    const good = JSON.parse(encodeStoredNode({ status: worker("c", "w", "i", 1), updatedAtUnixMs: 5 }))
    const bad = (patch: object) => Either.getLeft(decodeStoredNode(JSON.stringify({ ...good, ...patch })))._tag === "Some"
    expect(bad({ heartbeat_seq: 2 ** 60 })).toBe(true)
    expect(bad({ health: "sick" })).toBe(true)
    expect(bad({ cluster_id: "" })).toBe(true)
    expect(bad({ metrics: {} })).toBe(true)
    expect(Either.getLeft(decodeStoredNode("{")).pipe((o) => o._tag)).toBe("Some")
  })

  it("derives unhealthy from silence longer than unhealthy-after", () => {
    const n = { status: worker("c", "w", "i", 1, { health: "degraded" }), updatedAtUnixMs: 10_000 }
    expect(effectiveHealth(n, 25_000, 15_000)).toBe("degraded")
    expect(effectiveHealth(n, 25_001, 15_000)).toBe("unhealthy")
  })
})

describe("membership epoch", () => {
  const node = (id: string, address: string, role: NodeInfo["role"] = NodeRole.Worker): NodeInfo => ({ id, address, role })

  it("hashes Talon's canonical encoding with xxh3-64", async () => {
    // xxh3-64 of no bytes, seed 0 (the xxHash reference value)
    expect(await run(xxh3_64(new Uint8Array(0)))).toBe(0x2d06800538d394c2n)
    const bytes = canonicalMembership([node("w2", "b:2"), node("w1", "a:1", NodeRole.Coordinator)])
    expect(Buffer.from(bytes).toString("hex")).toBe(
      "0200000000000000" + "7731" + "0300000000000000" + "613a31" + "00" + "0200000000000000" + "7732" + "0300000000000000" + "623a32" + "01"
    )
    expect(await run(membershipEpoch([]))).toBe(0n)
    expect(await run(membershipEpoch([node("w1", "a:1")]))).toBe(await run(xxh3_64(canonicalMembership([node("w1", "a:1")]))))
  })

  it("depends on content only: order-free, field boundaries count, never 0 for members (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(fc.record({ id: fc.string({ minLength: 1 }), address: fc.string(), role: fc.constantFrom(NodeRole.Worker, NodeRole.Coordinator) }), {
          minLength: 1,
          maxLength: 6,
          selector: (n) => n.id
        }),
        async (nodes) => {
          const e = await run(membershipEpoch(nodes))
          expect(e).not.toBe(0n)
          expect(await run(membershipEpoch([...nodes].reverse()))).toBe(e)
          const moved = nodes.map((n, i) => (i === 0 ? { ...n, address: n.address + "x" } : n))
          expect(await run(membershipEpoch(moved))).not.toBe(e)
          expect(epochForWire(e)).toBeGreaterThan(0)
          expect(Number.isSafeInteger(epochForWire(e))).toBe(true)
        }
      ),
      { numRuns: 200 }
    )
    expect(await run(membershipEpoch([node("ab", "c")]))).not.toBe(await run(membershipEpoch([node("a", "bc")])))
    expect(epochForWire(0n)).toBe(0)
    expect(epochForWire(1n << 53n)).toBe(1)
  })
})

describe("settings", () => {
  const resolve = (env: Record<string, string>, explicit = {}) =>
    Effect.runPromise(
      Effect.either(resolveStateStoreSettings(explicit)).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
    )

  it("defaults to Talon's timings on the memory backend; endpoints select etcd", async () => {
    expect(await resolve({})).toMatchObject({ right: { backend: "memory", heartbeatIntervalMs: 5_000, unhealthyAfterMs: 15_000, leaseTtlMs: 30_000 } })
    const etcd = await resolve({ TALON_ETCD_ENDPOINTS: "127.0.0.1:2379, http://10.0.0.2:2379", TALON_STATE_LEASE_TTL_MS: "60000" })
    expect(etcd).toMatchObject({ right: { backend: "etcd", etcdEndpoints: ["127.0.0.1:2379", "http://10.0.0.2:2379"], leaseTtlMs: 60_000 } })
    expect(await resolve({ TALON_STATE_LEASE_TTL_MS: "60000" }, { leaseTtlMs: 20_000 })).toMatchObject({ right: { leaseTtlMs: 20_000 } })
  })

  it("refuses timings out of order, an etcd backend without endpoints, and a short token, naming the variable", async () => {
    const message = (r: Either.Either<unknown, unknown>) => (Either.isLeft(r) ? String(r.left) : "accepted")
    expect(message(await resolve({ TALON_STATE_UNHEALTHY_AFTER_MS: "40000" }))).toMatch(/TALON_STATE_UNHEALTHY_AFTER_MS.*heartbeat interval < unhealthy-after < lease TTL; got 5000 < 40000 < 30000/s)
    expect(message(await resolve({ TALON_STATE_HEARTBEAT_INTERVAL_MS: "15000" }))).toContain("got 15000 < 15000 < 30000")
    expect(message(await resolve({ TALON_STATE_HEARTBEAT_INTERVAL_MS: "0" }))).toContain("positive")
    expect(message(await resolve({ TALON_STATE_BACKEND: "etcd" }))).toMatch(/TALON_ETCD_ENDPOINTS.*at least one endpoint/s)
    expect(message(await resolve({ TALON_CLUSTER_TOKEN: "short" }))).toMatch(/TALON_CLUSTER_TOKEN.*at least 16/s)
    expect(message(await resolve({ TALON_STATE_BACKEND: "consul" }))).toContain("TALON_STATE_BACKEND")
  })
})

describe("cluster token rule", () => {
  const token = Redacted.make("s3cret-s3cret-s3cret")

  it("applies the put-path rule to what the status proved", () => {
    const held = worker("c", "w", "a", 1)
    const other = worker("c", "w", "b", 0, { startedAtUnixMs: 5_000, reportedAtUnixMs: 5_000 })
    expect(tokenProblem(undefined, "every-write", "missing", held, other)).toBeNull()
    expect(tokenProblem(undefined, "every-write", "wrong", held, other)).toBeNull()
    expect(tokenProblem(token, "every-write", "missing", undefined, held)?._tag).toBe("TokenRejected")
    expect(tokenProblem(token, "every-write", "verified", held, other)).toBeNull()
    expect(tokenProblem(token, "takeover-only", "missing", undefined, held)).toBeNull()
    expect(tokenProblem(token, "takeover-only", "missing", held, worker("c", "w", "a", 2))).toBeNull()
    expect(tokenProblem(token, "takeover-only", "missing", held, other)?._tag).toBe("TakeoverRefused")
    expect(tokenProblem(token, "takeover-only", "wrong", undefined, held)?._tag).toBe("TokenRejected")
    expect(tokenProblem(token, "takeover-only", "verified", held, other)).toBeNull()
  })
})
