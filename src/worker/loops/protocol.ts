/**
 * The actors of `--loops N` and their messages (Schema classes, carried by src/actor/Remote.ts over
 * the cluster IPC channel): the index owner (the cluster primary) is the actor `OWNER_ACTOR`,
 * each serving loop (a cluster child) is a `LOOP_ACTOR` on its own channel. A loop names itself
 * in every message by its cluster worker id.
 *
 * A *lease* is one pin the owner holds on a committed unit (page or whole
 * block) on behalf of one loop. Every grant is a new lease with a new id and
 * is matched by exactly one release of that id; leases are never merged, so
 * a release racing a new grant of the same unit can never drop a pin that is
 * still needed.
 */
import { Schema } from "effect"

export const OWNER_ACTOR = "talon.worker/lease-owner"
export const LOOP_ACTOR = "talon.worker/loop"

/** Child-side counters a loop reports to the owner as deltas (the owner's /metrics shows the sums). */
export const LOOP_COUNTERS = [
  "hits",
  "misses",
  "errors",
  "bytesServed",
  "pings",
  "connectionsOpen",
  "connectionsTotal",
  "connectionsDropped"
] as const
export type LoopCounter = (typeof LOOP_COUNTERS)[number]

// Integers throughout: the IPC channel is JSON, which has no NaN, Infinity or -0.
const CounterDelta = Schema.partial(
  Schema.Struct({
    ...(Object.fromEntries(LOOP_COUNTERS.map((k) => [k, Schema.Int])) as Record<LoopCounter, typeof Schema.Int>),
    /** Of `hits` and `bytesServed`, those the loop's native hit table answered (WorkerStats.offloaded). */
    tableHits: Schema.Int,
    tableBytes: Schema.Int
  })
)
export type CounterDelta = typeof CounterDelta.Type

const ObjectIdSchema = Schema.Struct({ backend: Schema.Literal(0, 1, 2), bucket: Schema.String, objectPath: Schema.String })
const Bytes = Schema.NonNegativeInt
const BlockIdSchema = Schema.Struct({ object: ObjectIdSchema, offset: Bytes, blockSize: Bytes, version: Schema.String })
const Leases = Schema.Array(Schema.Int)

/** What a loop may hold: the block's directory and meta, and one lease per granted unit. */
export const Grant = Schema.Struct({
  key: Schema.String,
  meta: Schema.Struct({ id: BlockIdSchema, length: Bytes, pageSize: Bytes, objectSize: Bytes }),
  /** The block directory (unit files are `meta`-derived names inside it). */
  path: Schema.String,
  /** `[unit index, lease id]` for every unit pinned for the loop. */
  units: Schema.Array(Schema.Tuple(Schema.Int, Schema.Int))
})
export type Grant = typeof Grant.Type

/** A stat or fill the owner could not do; the loop turns it back into its ReadFailed. */
export class LoopReadFailed extends Schema.TaggedError<LoopReadFailed>()("LoopReadFailed", {
  reason: Schema.String,
  staleVersion: Schema.optional(Schema.Boolean),
  /** The typed error class (DataErrorCode), when the failure has one. */
  code: Schema.optional(Schema.Int)
}) {
  override get message(): string {
    return this.reason
  }
}

export const Readiness = Schema.Struct({ ready: Schema.Boolean, registered: Schema.Boolean, detail: Schema.String })
export type Readiness = typeof Readiness.Type

// ------------------------------------------------------------------ loop → owner

/** The version the loop should serve; `fresh`: ask the origin now (a pinned read's check). */
export class Stat extends Schema.TaggedRequest<Stat>()("Stat", {
  failure: LoopReadFailed,
  success: Schema.Struct({ size: Bytes, version: Schema.String, expiresAt: Schema.Int }),
  payload: { loop: Schema.Int, object: ObjectIdSchema, fresh: Schema.Boolean }
}) {}

/** Make units `[first, end)` of a block present and lease them to the loop (null: none left to lease). */
export class Fill extends Schema.TaggedRequest<Fill>()("Fill", {
  failure: LoopReadFailed,
  success: Schema.NullOr(Grant),
  payload: {
    loop: Schema.Int,
    block: BlockIdSchema,
    blockLength: Bytes,
    objectSize: Bytes,
    first: Schema.Int,
    end: Schema.Int
  }
}) {}

/**
 * Leases the units of `[first, end)` that are present, for the loop: what a Fill replies once its
 * data is in. The owner sends it to itself so the lease table changes on its own fiber; a loop
 * sending it only leases itself what is already there.
 */
export class Lease extends Schema.TaggedRequest<Lease>()("Lease", {
  failure: Schema.Never,
  success: Schema.NullOr(Grant),
  payload: { loop: Schema.Int, block: BlockIdSchema, first: Schema.Int, end: Schema.Int }
}) {}

export class Release extends Schema.TaggedRequest<Release>()("Release", {
  failure: Schema.Never,
  success: Schema.Void,
  payload: { loop: Schema.Int, leases: Leases }
}) {}

/** Leases served from since the last report (the owner refreshes their LRU position), and those being read now. */
export class Usage extends Schema.TaggedRequest<Usage>()("Usage", {
  failure: Schema.Never,
  success: Schema.Void,
  payload: { loop: Schema.Int, used: Leases, busy: Leases }
}) {}

export class Counters extends Schema.TaggedRequest<Counters>()("Counters", {
  failure: Schema.Never,
  success: Schema.Void,
  payload: { loop: Schema.Int, delta: CounterDelta }
}) {}

/** A loop started: the owner's readiness now (later changes come as `Ready`). */
export class Hello extends Schema.TaggedRequest<Hello>()("Hello", {
  failure: Schema.Never,
  success: Readiness,
  payload: { loop: Schema.Int }
}) {}

export const OwnerMessage = Schema.Union(Stat, Fill, Lease, Release, Usage, Counters, Hello)
export type OwnerMessage = typeof OwnerMessage.Type

// ------------------------------------------------------------------ owner → loop

/** Give these leases back as soon as no response is reading them (the owner needs the room). */
export class Revoke extends Schema.TaggedRequest<Revoke>()("Revoke", {
  failure: Schema.Never,
  success: Schema.Void,
  payload: { leases: Leases }
}) {}

export class Ready extends Schema.TaggedRequest<Ready>()("Ready", {
  failure: Schema.Never,
  success: Schema.Void,
  payload: { readiness: Readiness }
}) {}

export const LoopMessage = Schema.Union(Revoke, Ready)
export type LoopMessage = typeof LoopMessage.Type

/** The env var carrying a loop's settings (JSON) from the primary to its children. */
export const LOOP_SETTINGS_ENV = "TALON_WORKER_LOOP_SETTINGS"
/** The env var carrying a loop's index (1-based), for logs. */
export const LOOP_INDEX_ENV = "TALON_WORKER_LOOP_INDEX"

/**
 * Connection hand-off (dealt scheduling, HandOff.ts) and a loop's start: plain IPC messages beside the actors' traffic
 * (which ignores them), the one kind that carries a handle. `{ [CONNECTION_MESSAGE]: kind }`:
 * owner → loop "take" with a connected socket's handle; loop → owner "serving" once its data server
 * takes connections (whatever the scheduling), "closed" when one of its connections closed.
 */
export const CONNECTION_MESSAGE = "talon.worker/connection"
export type ConnectionMessageKind = "take" | "serving" | "closed"
export const connectionMessage = (kind: ConnectionMessageKind) => ({ [CONNECTION_MESSAGE]: kind })
export const connectionMessageKind = (m: unknown): ConnectionMessageKind | undefined => {
  if (typeof m !== "object" || m === null) return undefined
  const k = (m as Record<string, unknown>)[CONNECTION_MESSAGE]
  return k === "take" || k === "serving" || k === "closed" ? k : undefined
}
/**
 * How a loop gets its connections when not through node:cluster: "handoff" (its owner hands them
 * over, HandOff.ts) or "reuseport" (it accepts on its own SO_REUSEPORT socket, ReusePort.ts).
 */
export const LOOP_ACCEPT_ENV = "TALON_WORKER_LOOP_ACCEPT"
export type LoopAccept = "handoff" | "reuseport"
