/**
 * The client's membership while the coordinator restarts: a scripted coordinator
 * over a real socket that first lists a worker, then (as a restarted one would,
 * before its workers re-register) lists none. The empty list must not replace
 * the held membership — but only within the stale limit, after which it is taken.
 * With the coordinator gone and no worker answering StatObject, the last stat is
 * used, within the same limit.
 */
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import { NodeRole } from "../../src/core/ids.js"
import { encodeControlFrame, type ControlMessage } from "../../src/protocol/index.js"
import type { MemoryObject } from "../coordinator/fixtures/memoryBackend.js"
import { scopedFakeWorker } from "./fixtures/registeredWorker.js"
import { scriptedControl } from "./fixtures/scriptedControl.js"

const BLOCK = 64 * 1024
const data = randomBytes(3 * BLOCK + 99)
const store = new Map<string, MemoryObject>([["/s3/bucket/big.bin", { bytes: data, version: "v1" }]])
const URI = "s3://bucket/big.bin"

/** A coordinator answering MembershipQuery with `members()` and StatObject from `store`; counts queries; `stop` kills it. */
const scriptedCoordinator = (members: () => ControlMessage) =>
  Effect.gen(function* () {
    const queries = { n: 0 }
    const control = yield* scriptedControl((message, requestId, socket) => {
      if (message._tag === "MembershipQuery") queries.n++
      const reply: ControlMessage =
        message._tag === "MembershipQuery" ? members() : { _tag: "ObjectStat", size: data.length, version: "v1" }
      socket.write(encodeControlFrame(requestId, reply))
    })
    return { ...control, queries }
  })

describe("TalonClient while the coordinator restarts or is gone", () => {
  it.live("an empty list does not replace the held membership within the stale limit; past it, it does", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const worker = yield* scopedFakeWorker(store)
        let restarted = false
        const coordinator = yield* scriptedCoordinator(() => ({
          _tag: "MembershipList",
          nodes: restarted ? [] : [{ id: "only", address: worker.address, role: NodeRole.Worker }]
        }))
        const client = yield* makeTalonClient({
          coordinator: coordinator.address,
          blockSize: BLOCK,
          membershipTtlMs: 100,
          statTtlMs: 60_000,
          staleLimitMs: 3000
        })
        expect(Buffer.from(yield* client.read(URI, 0, data.length)).equals(data)).toBe(true)
        const confirmedAt = Date.now()

        restarted = true
        const queriesBefore = coordinator.queries.n
        // Well past the TTL: the client has asked again and been told "no workers" several times.
        while (coordinator.queries.n < queriesBefore + 3) {
          expect(Buffer.from(yield* client.read(URI, BLOCK - 7, BLOCK)).equals(data.subarray(BLOCK - 7, 2 * BLOCK - 7))).toBe(true)
          yield* Effect.sleep("20 millis")
        }
        expect((yield* client.members()).map((n) => n.id)).toEqual(["only"])
        const cp = client.controlPlane()
        expect(cp.emptyMembershipsIgnored).toBeGreaterThanOrEqual(3)
        expect(cp.coordinatorReachable).toBe(true)
        expect(cp.membershipWorkers).toBe(1)

        // Past the stale limit the empty list is believed: the read names the lack of workers.
        yield* Effect.sleep(`${Math.max(0, confirmedAt + 3000 - Date.now()) + 200} millis`)
        const err = yield* Effect.flip(
          Effect.gen(function* () {
            yield* client.members()
            yield* Effect.sleep("150 millis")
            return yield* client.read(URI, 0, 10)
          })
        )
        expect(err._tag).toBe("NoWorkers")
      })
    )
  )

  it.live("with the coordinator gone and no worker able to stat, the last stat serves within the stale limit; past it, the error says so", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const worker = yield* scopedFakeWorker(store)
        const coordinator = yield* scriptedCoordinator(() => ({
          _tag: "MembershipList",
          nodes: [{ id: "only", address: worker.address, role: NodeRole.Worker }]
        }))
        const client = yield* makeTalonClient({
          coordinator: coordinator.address,
          blockSize: BLOCK,
          membershipTtlMs: 100,
          statTtlMs: 100,
          staleLimitMs: 2000,
          connectTimeoutMs: 500
        })
        expect(Buffer.from(yield* client.read(URI, 0, data.length)).equals(data)).toBe(true)
        const statAt = Date.now()
        yield* Effect.promise(coordinator.stop)
        yield* Effect.sleep("300 millis")

        // Both TTLs are long past: the fake worker refuses StatObject, so the last stat is all there is.
        expect(Buffer.from(yield* client.read(URI, 5, 2 * BLOCK)).equals(data.subarray(5, 5 + 2 * BLOCK))).toBe(true)
        const cp = client.controlPlane()
        expect(cp.coordinatorReachable).toBe(false)
        expect(cp.staleStats).toBeGreaterThan(0)
        expect(cp.staleMembershipUses).toBeGreaterThan(0)

        yield* Effect.sleep(`${Math.max(0, statAt + 2000 - Date.now()) + 200} millis`)
        const err = yield* Effect.flip(client.stat(URI))
        expect(err._tag).toBe("CoordinatorUnavailable")
        expect(err.message).toContain("no worker of the last membership answered the stat")
        expect(err.message).toContain("2000 ms")
      })
    )
  )
})
