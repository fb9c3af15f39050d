/**
 * A serving loop's side of the IPC channel to its index owner: requests with
 * ids (stat, fill), one-way reports (releases, touches, counters), and what
 * the owner pushes (revokes, readiness). Also the loop's MissPath: a version
 * lookup or a fill is a request to the owner, which alone talks to the
 * origin and writes the cache dir, so two loops can never fill one page twice.
 */
import type { ObjectStat } from "../../backend/BackendStore.js"
import type { BlockId, ObjectId } from "../../core/ids.js"
import type { DataErrorCode } from "../../protocol/dataError.js"
import { ReadFailed } from "../errors.js"
import type { ReadyState } from "../membership/Readiness.js"
import type { WorkerStats } from "../metrics.js"
import type { MissPathShape } from "../miss/MissPath.js"
import { objectKey, VersionCache } from "../miss/VersionCache.js"
import type { LeaseStore } from "./LeaseStore.js"
import { type CounterDelta, isToLoop, LOOP_COUNTERS, type ToLoop, type ToOwner } from "./protocol.js"

type Reply = Extract<ToLoop, { id: number }>
type Request = Extract<ToOwner, { id: number }>
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

/** The owner process is gone (or the channel closed): nothing can be filled any more. */
const ownerGone = () => new ReadFailed({ reason: "the worker's index owner (its primary process) is gone; the loop is shutting down" })

export interface IpcPort {
  readonly send: (message: unknown) => boolean
  readonly on: (event: "message" | "disconnect", listener: (message?: unknown) => void) => void
  readonly off: (event: "message" | "disconnect", listener: (message?: unknown) => void) => void
}

export class OwnerChannel {
  readonly #port: IpcPort
  readonly #pending = new Map<number, { resolve: (r: Reply) => void; reject: (e: ReadFailed) => void }>()
  #nextId = 1
  #closed = false
  readonly #onMessage = (m?: unknown) => this.#receive(m)
  readonly #onDisconnect = () => this.close()
  store: LeaseStore | undefined
  ready: ReadyState | undefined
  #sawReady!: () => void
  /** Resolves at the owner's first readiness message (a loop listens only after it, so it never answers "not ready" by mistake). */
  readonly firstReady = new Promise<void>((resolve) => (this.#sawReady = resolve))

  constructor(port: IpcPort) {
    this.#port = port
    port.on("message", this.#onMessage)
    port.on("disconnect", this.#onDisconnect)
  }

  send(message: ToOwner): void {
    if (this.#closed) return
    try {
      this.#port.send(message)
    } catch {
      this.close()
    }
  }

  request(message: DistributiveOmit<Request, "id" | "talon">): Promise<Reply> {
    if (this.#closed) return Promise.reject(ownerGone())
    const id = this.#nextId++
    return new Promise<Reply>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject })
      this.send({ ...message, id, talon: 1 } as ToOwner)
    })
  }

  close(): void {
    if (this.#closed) return
    this.#closed = true
    this.#port.off("message", this.#onMessage)
    this.#port.off("disconnect", this.#onDisconnect)
    const pending = [...this.#pending.values()]
    this.#pending.clear()
    for (const p of pending) p.reject(ownerGone())
  }

  #receive(m: unknown): void {
    if (!isToLoop(m)) return
    switch (m.t) {
      case "revoke":
        this.store?.revoke(m.leases)
        return
      case "ready":
        if (this.ready !== undefined) {
          this.ready.unsafeUpdate({ ready: m.ready, registered: m.registered, detail: m.detail })
        }
        this.#sawReady()
        return
      default: {
        const p = this.#pending.get(m.id)
        if (p === undefined) return
        this.#pending.delete(m.id)
        p.resolve(m)
      }
    }
  }
}

const failure = (r: { readonly reason: string; readonly staleVersion?: boolean; readonly code?: number }) =>
  new ReadFailed({
    reason: r.reason,
    ...(r.staleVersion === true ? { staleVersion: true } : {}),
    ...(r.code !== undefined && r.code >= 0 && r.code <= 9 ? { code: r.code as DataErrorCode } : {})
  })

/**
 * The loop's MissPath: versions are the owner's (cached here exactly as long
 * as the owner caches them), fills are the owner's, and a fill's answer is a
 * grant of leases on the units it made present.
 */
export const makeLoopMissPath = (channel: OwnerChannel, store: LeaseStore, ttlMs: number): MissPathShape => {
  const versions = new VersionCache(ttlMs)
  const inflight = new Map<string, Promise<ObjectStat>>()

  const ask = (object: ObjectId, key: string, fresh: boolean): Promise<ObjectStat> =>
    channel.request({ t: "stat", object, ...(fresh ? { fresh } : {}) }).then((r) => {
      if (r.t !== "stat") throw new ReadFailed({ reason: `internal error: the owner answered a stat with ${r.t}` })
      if (!r.ok) throw failure(r)
      const st: ObjectStat = { size: r.size, version: r.version }
      versions.seed(key, st, r.expiresAt)
      return st
    })

  const stat = (object: ObjectId, key: string): ObjectStat | Promise<ObjectStat> => {
    const fresh = versions.fresh(key)
    if (fresh !== undefined) return fresh
    const pending = inflight.get(key)
    if (pending !== undefined) return pending
    const p = ask(object, key, false).finally(() => inflight.delete(key))
    inflight.set(key, p)
    return p
  }

  const fill = (id: BlockId, blockLength: number, objectSize: number, first: number, end: number): Promise<void> =>
    channel.request({ t: "fill", block: id, blockLength, objectSize, first, end }).then((r) => {
      if (r.t !== "fill") throw new ReadFailed({ reason: `internal error: the owner answered a fill with ${r.t}` })
      if (!r.ok) {
        if (r.staleVersion === true) versions.invalidate(objectKey(id.object), id.version)
        throw failure(r)
      }
      return r.grant === null ? undefined : store.admit(r.grant)
    })

  return { versions, stat, revalidate: (object, key) => ask(object, key, true), fill }
}

/** Deltas of the loop-side counters since the previous call (undefined when nothing moved). */
export const counterDeltas = (stats: WorkerStats): (() => CounterDelta | undefined) => {
  const last: Record<string, number> = {}
  for (const k of LOOP_COUNTERS) last[k] = 0
  return () => {
    let delta: Record<string, number> | undefined
    for (const k of LOOP_COUNTERS) {
      const v = stats[k]
      if (v !== last[k]) {
        ;(delta ??= {})[k] = v - last[k]!
        last[k] = v
      }
    }
    return delta
  }
}
