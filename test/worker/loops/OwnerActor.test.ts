/**
 * The primary's own changes to the lease table (a loop joining or leaving, the capacity check)
 * are messages to the owner actor, handled in mailbox order with the loops' messages; and a
 * loop's channel cannot send them.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import type { MissPathShape } from "../../../src/worker/miss/MissPath.js"
import { LeaseOwner } from "../../../src/worker/loops/LeaseOwner.js"
import { Attach, Detach, EnforceCapacity, forLoops, makeOwnerActor } from "../../../src/worker/loops/OwnerActor.js"
import { Counters, Lease, OwnerMessage } from "../../../src/worker/loops/protocol.js"
import { WorkerStats } from "../../../src/worker/metrics.js"
import type { DiskStore } from "../../../src/worker/store/DiskStore.js"

const block = { object: { backend: 0, bucket: "b", objectPath: "o" }, offset: 0, blockSize: 1024, version: "v1" } as const

/** A store with nothing in it that counts capacity checks (each reads the dirs' stats once). */
const countingStore = () => {
  const seen = { checks: 0 }
  const store = {
    lookup: () => undefined,
    stats: () => {
      seen.checks++
      return { perDir: [] }
    }
  } as unknown as DiskStore
  return { store, seen }
}

const owner = (store: DiskStore, stats: WorkerStats) =>
  makeOwnerActor({
    table: new LeaseOwner(store, stats, () => 0),
    // Stat and Fill are not sent here.
    miss: undefined as unknown as MissPathShape,
    ttlMs: 1000,
    readiness: () => ({ ready: true, registered: true, detail: "" })
  })

describe("owner actor: the primary's bookkeeping", () => {
  it.scoped("Attach, Detach and EnforceCapacity change the table through the mailbox", () =>
    Effect.gen(function* () {
      const { store, seen } = countingStore()
      const stats = new WorkerStats()
      const actor = yield* owner(store, stats)
      const lease = new Lease({ loop: 7, block, first: 0, end: 1 })

      // Not attached: a lease is refused before the table looks at the store.
      expect(yield* actor.ask(lease)).toBeNull()
      expect(seen.checks).toBe(0)

      const revoked: Array<ReadonlyArray<number>> = []
      yield* actor.ask(new Attach({ loop: 7, revoke: (ids) => void revoked.push(ids) }))
      expect(yield* actor.ask(lease)).toBeNull() // nothing is stored, but the loop may lease now
      expect(seen.checks).toBe(1)
      yield* actor.ask(new Counters({ loop: 7, delta: { connectionsOpen: 2 } }))
      expect(stats.connectionsOpen).toBe(2)

      yield* actor.ask(new EnforceCapacity())
      expect(seen.checks).toBe(2)

      // Told, not asked: the Lease behind it in the mailbox already sees the loop gone.
      yield* actor.tell(new Detach({ loop: 7 }))
      expect(yield* actor.ask(lease)).toBeNull()
      expect(seen.checks).toBe(2)
      expect(stats.connectionsOpen).toBe(0)
      expect(revoked).toEqual([])
    })
  )

  it.scoped("a loop's channel decodes only the loops' protocol", () =>
    Effect.gen(function* () {
      const { store } = countingStore()
      const actor = yield* owner(store, new WorkerStats())
      const served = forLoops(actor)
      expect(served.protocol).toBe(OwnerMessage)
      const decode = Schema.decodeUnknownEither(served.protocol)
      expect(Either.isLeft(decode({ _tag: "Detach", loop: 7 }))).toBe(true)
      expect(Either.isLeft(decode({ _tag: "EnforceCapacity" }))).toBe(true)
      expect(Either.isRight(decode({ _tag: "Release", loop: 7, leases: [1] }))).toBe(true)
    })
  )
})
