/**
 * Single-flight fills as actors. One actor per block with units in flight owns those units'
 * pending fills: a miss for a unit already being fetched joins that fetch, a run of adjacent
 * missing units becomes origin GETs of at most `fetchUnits` units each, cut at multiples of
 * `fetchUnits` (fetchRun.ts). One long GET would stream at one origin connection's rate (an S3
 * connection gives ~100 MB/s); bounded pieces run concurrently, each paying the first-byte
 * latency once, and aligned cuts give every reader of a region the same pieces to join. A
 * registry actor owns the map from block to block actor, creates a block actor on its first
 * miss and retires it once nothing of it is in flight. Every change to either map is a message handled in order, so a retiring
 * block actor can never be handed a new miss.
 *
 * Callers are answered with what to wait on: one promise per unit, settled by the fetch as soon
 * as that unit is committed or has failed, so the waiting happens on the caller's side and never
 * holds a mailbox. Promises rather than Deferreds because a fill awaits every unit it needs and
 * an Effect await per unit costs several times a promise's (docs/decisions/measured-in-code.md).
 * Only the actors change their maps; the count of blocks in flight is a message too. The bound
 * on concurrent origin fetches is the RangeFetch's (MissPath's semaphore over
 * `originConcurrency`). A handler that dies restarts on the supervision schedule below: a
 * block actor with no units in flight (fills already started still settle their promises),
 * the registry with its map.
 */
import { Effect, Exit, Runtime, Schedule, Schema, Scope } from "effect"
import { Actor, type ActorRef, Supervision } from "../../actor/index.js"
import type { BlockId } from "../../core/ids.js"
import { BlockIdSchema } from "../../protocol/identity.js"
import { blockKey } from "../store/layout.js"
import { fetchRun, type RunTarget } from "./fetchRun.js"
import { StagePool, stageSize } from "./stagePool.js"

/**
 * Idle staging buffers a worker keeps: a few fetches' pages between bursts, a few MiB of memory.
 * 16 (16 MiB at 1 MiB pages) was a quarter of an idle worker's RSS after its first fill; a burst
 * past these 4 allocates the rest again (~12 MiB of fresh pages, a few ms against a burst's fill).
 */
const STAGES_KEPT = 4

/**
 * Buffers kept while fills stream, at most: never more than the fills had in use at once (a buffer
 * is only kept after being given back), this only caps it.
 */
const STAGE_BYTES_BUSY = 256 * 1024 * 1024

const fillStages = (pageSize: number): StagePool => {
  const size = stageSize(pageSize > 0 ? pageSize : Infinity)
  return new StagePool(size, STAGES_KEPT, Math.max(STAGES_KEPT, Math.floor(STAGE_BYTES_BUSY / size)))
}

/** A unit's pending fill: settled once, by the fetch that owns it. */
interface Pending {
  readonly promise: Promise<void>
  settled: boolean
  settle: (error?: unknown) => void
}

const pending = (): Pending => {
  let resolve!: () => void
  let reject!: (e: unknown) => void
  const promise = new Promise<void>((res, rej) => {
    resolve = res
    reject = rej
  })
  // A fill nobody awaits any more must not surface as an unhandled rejection.
  promise.catch(() => {})
  const p: Pending = {
    promise,
    settled: false,
    settle: (error) => {
      if (p.settled) return
      p.settled = true
      if (error === undefined) resolve()
      else reject(error)
    }
  }
  return p
}

/** What a miss waits on: one promise per unit it needs that is not on disk. */
const Waits = Schema.Array(
  Schema.declare((u: unknown): u is Promise<void> => u instanceof Promise, { identifier: "Promise<void>" })
)

/** A crashed fill actor restarts a few times, quickly: fills queued behind the crash still get handled. */
const supervision = Supervision.restart(Schedule.exponential("10 millis").pipe(Schedule.intersect(Schedule.recurs(5))))

const Units = {
  first: Schema.Int,
  end: Schema.Int,
  blockLength: Schema.Int,
  objectSize: Schema.Int,
  /** Read-ahead: fetched under the read-ahead share of origin permits (a demand miss may join it). */
  ahead: Schema.Boolean
}

/** To a block actor: make units `[first, end)` present; replies with what to wait on. */
class Claim extends Schema.TaggedRequest<Claim>()("Claim", { success: Waits, failure: Schema.Never, payload: Units }) {}
/** To a block actor, from a finished fetch: units `[first, end)` are no longer in flight. */
class RunDone extends Schema.TaggedRequest<RunDone>()("RunDone", {
  success: Schema.Void,
  failure: Schema.Never,
  payload: { first: Schema.Int, end: Schema.Int }
}) {}
/** To a block actor, from the registry: stop if nothing is in flight (replies whether it may). */
class Retire extends Schema.TaggedRequest<Retire>()("Retire", { success: Schema.Boolean, failure: Schema.Never, payload: {} }) {}
const BlockProtocol = Schema.Union(Claim, RunDone, Retire)
type BlockMsg = typeof BlockProtocol.Type

/** To the registry: a miss for units `[first, end)` of `block`. */
class Fill extends Schema.TaggedRequest<Fill>()("Fill", {
  success: Waits,
  failure: Schema.Never,
  payload: { block: BlockIdSchema, ...Units }
}) {}
/** To the registry, from a block actor whose units have all settled. */
class Idle extends Schema.TaggedRequest<Idle>()("Idle", { success: Schema.Void, failure: Schema.Never, payload: { key: Schema.String } }) {}
/** To the registry: how many blocks have units in flight. */
class CountBlocks extends Schema.TaggedRequest<CountBlocks>()("CountBlocks", { success: Schema.Int, failure: Schema.Never, payload: {} }) {}
const RegistryProtocol = Schema.Union(Fill, Idle, CountBlocks)

/** Far more than a block's units plus its concurrent readers: a full mailbox would be a bug. */
const MAILBOX = 1 << 16

interface BlockFill {
  readonly ref: ActorRef<BlockMsg>
  readonly scope: Scope.CloseableScope
}

export interface FillSchedulerShape {
  /** Makes units `[first, end)` of `id` present: succeeds when each has been committed once, fails with the fetch's error. */
  readonly fill: (id: BlockId, blockLength: number, objectSize: number, first: number, end: number, ahead?: boolean) => Effect.Effect<void, unknown>
  /** Blocks with units in flight (one actor each). */
  readonly blocks: Effect.Effect<number>
}

/** Effects run by fetch callbacks outside any fiber (messages to the actors; never fail for lack of room). */
type Runner = <A, E>(effect: Effect.Effect<A, E>) => void

/** Waits for every unit; fails with the first failure. */
const awaitAll = (waits: ReadonlyArray<Promise<void>>): Effect.Effect<void, unknown> =>
  waits.length === 0 ? Effect.void : Effect.tryPromise({ try: () => Promise.all(waits), catch: (e) => e }).pipe(Effect.asVoid)

const blockActor = (
  target: RunTarget,
  id: BlockId,
  key: string,
  run: Runner,
  onIdle: Effect.Effect<void>
): Effect.Effect<ActorRef<BlockMsg>, never, Scope.Scope> =>
  Effect.gen(function* () {
    let self: ActorRef<BlockMsg> | undefined
    const fetchUnits = target.fetchUnits ?? Infinity
    self = yield* Actor.make<BlockMsg, Map<number, Pending>>({
      name: `fill ${key}`,
      protocol: BlockProtocol,
      capacity: MAILBOX,
      // The actor's state: the pending fill of each unit in flight, changed only by its handlers.
      initial: Effect.sync(() => new Map<number, Pending>()),
      supervision,
      handlers: {
        Claim: (state, m) =>
          Effect.sync(() => {
            const live = (unit: number) => {
              const p = state.get(unit)
              return p !== undefined && !p.settled
            }
            const waits: Array<Promise<void>> = []
            for (const [s, e] of target.store.missingRuns(key, m.first, m.end)) {
              let i = s
              while (i < e) {
                if (live(i)) {
                  waits.push(state.get(i)!.promise)
                  i++
                  continue
                }
                let j = i + 1
                // Up to the next multiple of fetchUnits: one origin GET each.
                const cut = Math.min(e, (Math.floor(i / fetchUnits) + 1) * fetchUnits)
                while (j < cut && !live(j)) j++
                const units: Array<Pending> = []
                for (let u = i; u < j; u++) {
                  const p = pending()
                  units.push(p)
                  state.set(u, p)
                  waits.push(p.promise)
                }
                const [first, end] = [i, j]
                const settle = (unit: number, error?: unknown) => units[unit - first]!.settle(error)
                fetchRun(target, id, key, m.blockLength, m.objectSize, first, end, settle, m.ahead)
                  .catch(() => {})
                  .finally(() => run(self!.tell(new RunDone({ first, end }, true))))
                i = j
              }
            }
            return [waits, state] as const
          }),
        RunDone: (state, m) =>
          Effect.suspend(() => {
            for (let u = m.first; u < m.end; u++) if (state.get(u)?.settled === true) state.delete(u)
            return Effect.as(state.size === 0 ? onIdle : Effect.void, [undefined, state] as const)
          }),
        Retire: (state) => Effect.succeed([state.size === 0, state] as const)
      }
    })
    return self
  })

/** The registry actor and its block actors, living as long as the enclosing scope. */
export const makeFillScheduler = (settings: RunTarget): Effect.Effect<FillSchedulerShape, never, Scope.Scope> =>
  Effect.gen(function* () {
    const target: RunTarget = settings.stages !== undefined ? settings : { ...settings, stages: fillStages(settings.pageSize) }
    const runtime = yield* Effect.runtime<never>()
    const run: Runner = (effect) => {
      Runtime.runFork(runtime)(Effect.ignoreLogged(effect))
    }
    let registry: ActorRef<typeof RegistryProtocol.Type> | undefined
    // The registry's state: the actor of each block with units in flight. A restart keeps it
    // (those actors and their fills are still running), so it is made once, here.
    const blocks = new Map<string, BlockFill>()
    yield* Effect.addFinalizer(() => Effect.forEach(blocks.values(), (b) => Scope.close(b.scope, Exit.void), { discard: true }))
    registry = yield* Actor.make({
      name: "fill registry",
      protocol: RegistryProtocol,
      capacity: MAILBOX,
      initial: blocks,
      supervision,
      handlers: {
        Fill: (state, m) =>
          Effect.gen(function* () {
            const key = blockKey(m.block)
            let b = state.get(key)
            if (b === undefined) {
              const scope = yield* Scope.make()
              // Told, not asked: the registry may be the one waiting on this block actor.
              const onIdle = Effect.sync(() => run(registry!.tell(new Idle({ key }, true))))
              const ref = yield* Scope.extend(blockActor(target, m.block, key, run, onIdle), scope)
              b = { ref, scope }
              state.set(key, b)
            }
            const { first, end, blockLength, objectSize, ahead } = m
            const waits = yield* Effect.orDie(b.ref.ask(new Claim({ first, end, blockLength, objectSize, ahead }, true)))
            return [waits, state] as const
          }),
        Idle: (state, m) =>
          Effect.gen(function* () {
            const b = state.get(m.key)
            // Only this handler and Fill touch the block actor, so "idle" cannot change under it.
            if (b !== undefined && (yield* Effect.orDie(b.ref.ask(new Retire({}, true))))) {
              state.delete(m.key)
              yield* Scope.close(b.scope, Exit.void)
            }
            return [undefined, state] as const
          }),
        CountBlocks: (state) => Effect.succeed([state.size, state] as const)
      }
    })
    const ref = registry
    return {
      fill: (id, blockLength, objectSize, first, end, ahead = false) =>
        Effect.flatMap(ref.ask(new Fill({ block: id, blockLength, objectSize, first, end, ahead }, true)), awaitAll),
      blocks: Effect.orDie(ref.ask(new CountBlocks({}, true)))
    }
  })
