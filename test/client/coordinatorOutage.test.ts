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
import { Effect, Fiber, Option, TestClock } from "effect"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import { NodeRole } from "../../src/core/ids.js"
import { encodeControlFrame, type ControlMessage } from "../../src/protocol/index.js"
import type { MemoryObject } from "../coordinator/fixtures/memoryBackend.js"
import { scopedFakeWorker } from "./fixtures/registeredWorker.js"
import { scriptedControl } from "./fixtures/scriptedControl.js"
import { eventually } from "../support/eventually.js"

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

/**
 * `effect` run to its end while the test's clock moves on 50 ms per try: the client's retries
 * to a coordinator that is gone wait on its Clock.
 */
const drive = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function* () {
    const fiber = yield* Effect.fork(effect)
    yield* eventually(
      Effect.zipRight(
        TestClock.adjust("50 millis"),
        Effect.flatMap(fiber.poll, (done) => (Option.isSome(done) ? Effect.void : Effect.fail("still running")))
      ),
      { what: "the request to finish" }
    )
    return yield* Fiber.join(fiber)
  })

describe("TalonClient while the coordinator restarts or is gone", () => {
  // On TestClock: the membership's TTL and stale limit are the client's Clock; only the socket I/O is real.
  it.effect("an empty list does not replace the held membership within the stale limit; past it, it does", () =>
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
          staleLimitMs: 2000
        })
        expect(Buffer.from(yield* client.read(URI, 0, data.length)).equals(data)).toBe(true)

        restarted = true
        const queriesBefore = coordinator.queries.n
        // Well past the TTL (each try moves the client's clock 60 ms on, far from the stale limit):
        // the client has asked again and been told "no workers" several times, and reads go on.
        yield* eventually(
          Effect.gen(function* () {
            yield* TestClock.adjust("60 millis")
            expect(Buffer.from(yield* client.read(URI, BLOCK - 7, BLOCK)).equals(data.subarray(BLOCK - 7, 2 * BLOCK - 7))).toBe(true)
            expect(coordinator.queries.n).toBeGreaterThanOrEqual(queriesBefore + 3)
            expect(client.controlPlane().emptyMembershipsIgnored).toBeGreaterThanOrEqual(3)
          }),
          { what: "three empty membership lists ignored" }
        )
        expect((yield* client.members()).map((n) => n.id)).toEqual(["only"])
        const cp = client.controlPlane()
        expect(cp.emptyMembershipsIgnored).toBeGreaterThanOrEqual(3)
        expect(cp.coordinatorReachable).toBe(true)
        expect(cp.membershipWorkers).toBe(1)

        // Past the stale limit the empty list is believed: the read names the lack of workers.
        // (TestClock.adjust wakes the background refresh at each of its ticks on the way.)
        yield* TestClock.adjust("2 seconds")
        yield* client.members()
        const err = yield* Effect.flip(client.read(URI, 0, 10))
        expect(err._tag).toBe("NoWorkers")
      })
    )
  )

  it.effect("with the coordinator gone and no worker able to stat, the last stat serves within the stale limit; past it, the error says so", () =>
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
        yield* Effect.promise(coordinator.stop)
        yield* TestClock.adjust("300 millis")

        // Both TTLs are long past: the fake worker refuses StatObject, so the last stat is all there is.
        expect(Buffer.from(yield* drive(client.read(URI, 5, 2 * BLOCK))).equals(data.subarray(5, 5 + 2 * BLOCK))).toBe(true)
        const cp = client.controlPlane()
        expect(cp.coordinatorReachable).toBe(false)
        expect(cp.staleStats).toBeGreaterThan(0)
        expect(cp.staleMembershipUses).toBeGreaterThan(0)

        yield* TestClock.adjust("2 seconds")
        const err = yield* Effect.flip(drive(client.stat(URI)))
        expect(err._tag).toBe("CoordinatorUnavailable")
        expect(err.message).toContain("no worker of the last membership answered the stat")
        expect(err.message).toContain("2000 ms")
      })
    )
  )
})
