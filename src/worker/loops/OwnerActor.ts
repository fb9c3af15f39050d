/**
 * The index owner of `--loops N` as an actor (src/actor): its state is the lease table
 * (LeaseOwner), its messages the loops' (protocol.ts), served to each loop over that loop's IPC
 * channel with `Remote.serve`, so a loop holds an `ActorRef` to it exactly like a local one.
 *
 * Stats and fills wait on the origin, so they reply `Actor.later`: the mailbox moves on while they
 * run, and a fill's leases are taken by a `Lease` message the actor sends itself once the data is
 * in. The primary's own bookkeeping is messages too (`Attach`, `Detach`, `EnforceCapacity`: local
 * only, never accepted from a loop's channel, see `forLoops`), so the lease table only ever
 * changes on the actor's fiber.
 */
import { Effect, Schema, type Scope } from "effect"
import { Actor, type ActorRef } from "../../actor/index.js"
import { describeUnknown, ReadFailed } from "../errors.js"
import type { MissPathShape } from "../miss/MissPath.js"
import { objectKey } from "../miss/VersionCache.js"
import type { LeaseOwner } from "./LeaseOwner.js"
import { Lease, LoopReadFailed, OWNER_ACTOR, OwnerMessage, type Readiness } from "./protocol.js"

type Revoker = (leases: ReadonlyArray<number>) => void
const RevokerSchema = Schema.declare((u: unknown): u is Revoker => typeof u === "function", { identifier: "Revoker" })

/** A loop (re)joined: `revoke` tells it to give leases back. From the primary only. */
export class Attach extends Schema.TaggedRequest<Attach>()("Attach", {
  failure: Schema.Never,
  success: Schema.Void,
  payload: { loop: Schema.Int, revoke: RevokerSchema }
}) {}

/** A loop exited: its leases go with it. From the primary only. */
export class Detach extends Schema.TaggedRequest<Detach>()("Detach", {
  failure: Schema.Never,
  success: Schema.Void,
  payload: { loop: Schema.Int }
}) {}

/** The primary's periodic check that every cache dir fits its capacity. */
export class EnforceCapacity extends Schema.TaggedRequest<EnforceCapacity>()("EnforceCapacity", {
  failure: Schema.Never,
  success: Schema.Void,
  payload: {}
}) {}

/** What the primary may send the owner: the loops' messages and its own bookkeeping. */
export const OwnerLocalMessage = Schema.Union(OwnerMessage, Attach, Detach, EnforceCapacity)
export type OwnerLocalMessage = typeof OwnerLocalMessage.Type

/** The owner as served to a loop's channel: only the loops' protocol decodes, so a loop cannot attach or detach anyone. */
export const forLoops = (ref: ActorRef<OwnerLocalMessage>): ActorRef<OwnerMessage> => ({ ...ref, protocol: OwnerMessage })

/** Messages waiting for the owner; more is a MailboxFull the asking loop reports as a failed read. */
const MAILBOX = 16384

const asFailure = (e: unknown): LoopReadFailed => {
  const f = e instanceof ReadFailed ? e : new ReadFailed({ reason: `internal error: ${describeUnknown(e)}` })
  return new LoopReadFailed({
    reason: f.reason,
    ...(f.staleVersion === true ? { staleVersion: true } : {}),
    ...(f.code !== undefined ? { code: f.code } : {})
  })
}

export interface OwnerActorOptions {
  readonly table: LeaseOwner
  readonly miss: MissPathShape
  readonly ttlMs: number
  /** The worker's readiness now (a loop's `Hello` answer). */
  readonly readiness: () => Readiness
  /** Default: the Clock of the effect that makes the actor. */
  readonly now?: () => number
}

export const makeOwnerActor = (options: OwnerActorOptions): Effect.Effect<ActorRef<OwnerLocalMessage>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { table, miss, ttlMs } = options
    const clock = yield* Effect.clock
    const now = options.now ?? (() => clock.unsafeCurrentTimeMillis())
    let self: ActorRef<OwnerLocalMessage> | undefined
    const same = <A>(reply: A) => Effect.succeed([reply, table] as const)

    const ref = yield* Actor.make({
      name: OWNER_ACTOR,
      protocol: OwnerLocalMessage,
      capacity: MAILBOX,
      initial: table,
      handlers: {
        Stat: (_, m) => {
          const key = objectKey(m.object)
          const stat = Effect.tryPromise({
            try: async () => {
              const st = m.fresh ? await miss.revalidate(m.object, key) : await miss.stat(m.object, key)
              // Whole ms (the wire carries integers); rounded down, so a loop never outlives the owner's entry.
              return { size: st.size, version: st.version, expiresAt: Math.floor(miss.versions.expiresAt(key) ?? now() + ttlMs) }
            },
            catch: asFailure
          })
          return same(Actor.later(stat))
        },
        Fill: (_, m) => {
          table.makeRoomFor(m)
          const fill = Effect.tryPromise({
            try: () => miss.fill(m.block, m.blockLength, m.objectSize, m.first, m.end),
            catch: asFailure
          }).pipe(
            Effect.zipRight(
              Effect.suspend(() => self!.ask(new Lease({ loop: m.loop, block: m.block, first: m.first, end: m.end }))).pipe(
                Effect.mapError((e) => new LoopReadFailed({ reason: e.message }))
              )
            )
          )
          return same(Actor.later(fill))
        },
        Lease: (_, m) => same(table.lease(m.loop, m.block, m.first, m.end)),
        Release: (_, m) => same(table.release(m.loop, m.leases)),
        Usage: (_, m) => same(table.usage(m.loop, m.used, m.busy)),
        Counters: (_, m) => same(table.addCounters(m.loop, m.delta)),
        Hello: () => same(options.readiness()),
        Attach: (_, m) => same(table.attach(m.loop, m.revoke)),
        Detach: (_, m) => same(table.detach(m.loop)),
        EnforceCapacity: () => same(table.enforceCapacity())
      }
    })
    self = ref
    return ref
  })
