/**
 * Zone affinity and admission on a local cluster: origin stub and coordinator (LocalCluster
 * with no workers of its own) and two workers in zones a and b, each in a scope of its own so
 * one can be stopped. With replicas 2 both own every block: a client in zone a is served only
 * by a's worker (bytes served per worker) while it runs, by b's once it stops, and counts those
 * reads cross-zone. An admitted block is served by readCached without the origin, also through
 * the promise facade.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Either, Exit, Layer, Scope } from "effect"
import fc from "fast-check"
import { BackendStore } from "../../src/backend/BackendStore.js"
import * as Router from "../../src/backend/Router.js"
import { createTalonClient, makeTalonClient } from "../../src/client/TalonClient.js"
import { preferZone } from "../../src/client/zones.js"
import { LocalCluster } from "../../src/cluster/LocalCluster.js"
import { NodeRole } from "../../src/core/ids.js"
import { encodeControlFrame, type ControlMessage } from "../../src/protocol/index.js"
import { Worker } from "../../src/worker/Worker.js"
import { WorkerConfig } from "../../src/worker/config.js"
import { scopedFakeWorker } from "./fixtures/registeredWorker.js"
import { scriptedControl } from "./fixtures/scriptedControl.js"
import { eventually } from "../support/eventually.js"

const KiB = 1024
const BLOCK = 256 * KiB
const SIZE = 3 * BLOCK + 1000

const bytesOf = (n: number, seed: number): Buffer => {
  const out = Buffer.alloc(n)
  for (let i = 0; i < n; i++) out[i] = (i * 31 + seed * 7 + (i >> 8)) & 0xff
  return out
}

describe("preferZone", () => {
  it("puts the zone's owners first, each group in placement order, and keeps every owner", () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.string({ minLength: 1, maxLength: 3 }), { maxLength: 6 }), fc.func(fc.constantFrom("a", "b", null)), (ranked, zoneOf) => {
        const got = preferZone(ranked, zoneOf, "a")
        expect([...got].sort()).toEqual([...ranked].sort())
        const near = ranked.filter((id) => zoneOf(id) === "a")
        expect(got.slice(0, near.length)).toEqual(near)
        expect(got.slice(near.length)).toEqual(ranked.filter((id) => zoneOf(id) !== "a"))
      })
    )
    expect(preferZone(["x", "y"], () => "b", "")).toEqual(["x", "y"])
  })
})

describe("zoned membership against a coordinator without MembershipQueryV2", () => {
  it.scopedLive("falls back to MembershipQuery, reads, and does not ask V2 again within the cooldown", () =>
    Effect.gen(function* () {
      const data = bytesOf(5000, 4)
      const worker = yield* scopedFakeWorker(new Map([["/s3/bucket/o.bin", { bytes: data, version: "v1" }]]))
      let v2Asked = 0
      // An older coordinator drops the connection on a message of a schema it does not know.
      const { address } = yield* scriptedControl((message, requestId, socket) => {
        if (message._tag === "MembershipQueryV2") {
          v2Asked++
          return socket.destroy()
        }
        const reply: ControlMessage =
          message._tag === "MembershipQuery"
            ? { _tag: "MembershipList", nodes: [{ id: "only", address: worker.address, role: NodeRole.Worker }] }
            : { _tag: "ObjectStat", size: data.length, version: "v1" }
        socket.write(encodeControlFrame(requestId, reply))
      })
      const client = yield* makeTalonClient({ coordinator: address, blockSize: BLOCK, zone: "a", membershipTtlMs: 1 })
      expect(Buffer.compare(Buffer.from(yield* client.read("s3://bucket/o.bin", 0, data.length)), data)).toBe(0)
      const asked = v2Asked
      expect(asked).toBeGreaterThan(0)
      expect(yield* client.members(true)).toHaveLength(1)
      expect(yield* client.members(true)).toHaveLength(1)
      expect(v2Asked).toBe(asked)
      // The worker reported no zone: its reads count as unknown, not cross-zone.
      expect(client.zones()).toMatchObject({ crossZoneReads: 0, sameZoneReads: 0, unknownZoneReads: 1 })
    })
  )
})

describe("zones on a local cluster", () => {
  it.scopedLive(
    "a zone-a client reads only from a's worker while it runs, from b's after, counting cross-zone reads; admit then readCached",
    () =>
      Effect.gen(function* () {
        const dir = yield* Effect.acquireRelease(
          Effect.sync(() => mkdtempSync(join(tmpdir(), "talon-zones-"))),
          (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
        )
        const want = bytesOf(SIZE, 1)
        mkdirSync(join(dir, "origin", "data"), { recursive: true })
        writeFileSync(join(dir, "origin", "data", "z.bin"), want)
        const cluster = yield* LocalCluster.make({ dir, ephemeral: true, workers: 0, gateway: false, heartbeatIntervalMs: 100 })
        const backend = yield* Router.make(Router.localOptions(cluster.origin.url))

        const startWorker = (zone: string) =>
          Effect.gen(function* () {
            const scope = yield* Scope.make()
            const settings = WorkerConfig.layer({
              id: `worker-${zone}`,
              zone,
              blockSize: BLOCK,
              pageSize: 64 * KiB,
              capacity: 16 * BLOCK,
              dataAddress: "127.0.0.1:0",
              adminAddress: "127.0.0.1:0",
              coordinator: cluster.coordinator.controlAddress,
              cacheDirs: [join(dir, `cache-${zone}`)],
              heartbeatIntervalMs: 100
            })
            const ctx = yield* Layer.buildWithScope(
              Worker.layer.pipe(Layer.provide(settings), Layer.provide(Layer.succeed(BackendStore, backend))),
              scope
            )
            yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
            return { worker: Context.get(ctx, Worker), scope }
          })
        const a = yield* startWorker("a")
        const b = yield* startWorker("b")
        // Both listed, each with its zone reported (zones ride the status heartbeat).
        yield* eventually(
          Effect.flatMap(cluster.coordinator.cluster, (status) =>
            Effect.sync(() => expect(status.members.map((m) => m.zone !== null)).toEqual([true, true]))
          ),
          { what: "both workers joined with their zones", every: "50 millis" }
        )

        const client = yield* makeTalonClient({
          coordinator: cluster.coordinator.controlAddress,
          blockSize: BLOCK,
          replicas: 2,
          zone: "a",
          readAheadBytes: 0,
          connectTimeoutMs: 500
        })
        const uri = "s3://data/z.bin"
        const served = () => [a.worker.stats.bytesServed, b.worker.stats.bytesServed] as const

        // While a's worker runs, every byte comes from it.
        expect(Buffer.compare(Buffer.from(yield* client.read(uri, 0, SIZE)), want)).toBe(0)
        expect(served()).toEqual([SIZE, 0])
        const before = client.zones()
        expect(before).toMatchObject({ zone: "a", crossZoneReads: 0, crossZoneBytes: 0, unknownZoneReads: 0 })
        expect(before.sameZoneReads).toBeGreaterThan(0)

        // Admission: a block that no origin has, then read cache-only (still in zone a).
        const admitted = bytesOf(BLOCK + 10, 2)
        const other = "s3://data/admitted.bin"
        yield* client.admit(other, 0, "v-admitted", admitted.subarray(0, BLOCK), admitted.length)
        yield* client.admit(other, 1, "v-admitted", admitted.subarray(BLOCK), admitted.length)
        yield* cluster.origin.resetStats()
        expect(Buffer.compare(Buffer.from(yield* client.readCached(other, 0, admitted.length, "v-admitted")), admitted)).toBe(0)
        expect((yield* cluster.origin.stats()).total).toBe(0)
        const short = yield* Effect.either(client.admit(other, 1, "v-admitted", admitted.subarray(BLOCK + 1), admitted.length))
        expect(Either.isLeft(short) && short.left._tag).toBe("InvalidRequest")

        // The promise facade, from zone b: admitted to b's worker (its in-zone owner), so the
        // zone-a client's cache-only read misses on a, is served by b, and counts it cross-zone.
        const zoneB = createTalonClient({ coordinator: cluster.coordinator.controlAddress, blockSize: BLOCK, replicas: 2, zone: "b" })
        yield* Effect.addFinalizer(() => Effect.promise(() => zoneB.close()))
        const third = "s3://data/admitted-b.bin"
        const small = bytesOf(100, 3)
        yield* Effect.promise(() => zoneB.admit(third, 0, "v-b", small, small.length))
        const refused = yield* Effect.promise(() => zoneB.admit(third, 1, "v-b", small, small.length).then(() => undefined, (e: unknown) => e))
        expect(refused).toMatchObject({ _tag: "InvalidRequest" })
        const bServed = b.worker.stats.bytesServed
        expect(Buffer.compare(Buffer.from(yield* client.readCached(third, 0, small.length, "v-b")), small)).toBe(0)
        expect(b.worker.stats.bytesServed).toBe(bServed + small.length)
        expect(client.zones()).toMatchObject({ crossZoneReads: 1, crossZoneBytes: small.length })

        // a's worker stops: the same reads fall back to b's, counted cross-zone.
        yield* Scope.close(a.scope, Exit.void)
        const servedA = a.worker.stats.bytesServed
        expect(Buffer.compare(Buffer.from(yield* client.read(uri, 0, SIZE)), want)).toBe(0)
        expect(b.worker.stats.bytesServed).toBe(bServed + small.length + SIZE)
        expect(a.worker.stats.bytesServed).toBe(servedA)
        const after = client.zones()
        expect(after.crossZoneReads).toBeGreaterThan(1)
        expect(after.crossZoneBytes).toBe(small.length + SIZE)
      }),
    20_000
  )
})
