/**
 * A co-located front end's view of this process's workers: resident bytes of exactly one
 * version as pinned file segments (Talon's cache-only read: never a fill, never the origin),
 * and the sender that puts them on an HTTP socket by sendfile. The gateway takes it as its
 * `LocalBlocks` service (`talon up`, `talon gateway --colocate`); the shapes match by structure.
 */
import type * as net from "node:net"
import type { ObjectId } from "../core/ids.js"
import type { FileSegment } from "./plane/DataPlane.js"
import { makeSocketSendfile } from "./plane/HttpSendfile.js"
import type { RangeReply, ReadOutcome, ReadPathImpl } from "./ReadPath.js"
import type { TenantLimiter } from "./tenants/TenantLimiter.js"

export interface LocalPiece {
  readonly segments: ReadonlyArray<FileSegment>
  /** Unpins the blocks; call once the bytes are sent or the send failed. */
  readonly release: () => void
}

export interface LocalReads {
  /** Largest range one piece may cover without crossing a block (pieces are asked for block by block). */
  readonly blockSize: number
  readonly resident: (object: ObjectId, version: string, offset: number, length: number) => LocalPiece | undefined | Promise<LocalPiece | undefined>
  readonly fdOf: (socket: net.Socket) => number
  readonly send: (socket: net.Socket, fd: number, segments: ReadonlyArray<FileSegment>, head?: Uint8Array) => true | Promise<boolean>
  /** Pieces handed out and not released yet (each holds its blocks pinned). */
  readonly pinned: () => number
}


export interface LocalReadOptions {
  readonly addonPath?: string | undefined
  /**
   * Each worker's tenant limiter (its `stats.tenants`), by position in `paths`: a local hit is
   * charged to `tenant` as the data port would charge the same read, and a refused one is left to
   * the route (whose data-port read the worker refuses in turn), so sendfile cannot bypass a limit.
   */
  readonly limiters?: ReadonlyArray<TenantLimiter | undefined> | undefined
  /** The front end's tenant (the client's `tenant` setting); empty or absent = unattributed. */
  readonly tenant?: string | undefined
}

/**
 * The local reads of `paths` (the workers of this process, all of one block size), or why there
 * are none (the addon or epoll is unavailable: the gateway then keeps its portable path).
 */
export const makeLocalReads = (paths: ReadonlyArray<ReadPathImpl>, options: LocalReadOptions = {}): LocalReads | string => {
  if (paths.length === 0) return "no worker runs in this process"
  const sender = makeSocketSendfile(options.addonPath)
  const tenant = options.tenant === "" ? undefined : options.tenant
  const limiters = options.limiters ?? []
  if (typeof sender === "string") return sender
  const blockSize = paths[0]!.geometry.blockSize
  let pinned = 0
  /** A hit pinned and charged to the tenant; "refused" (released again) when the tenant is over its limit. */
  const pieceOf = (i: number, outcome: ReadOutcome): LocalPiece | undefined | "refused" => {
    if (outcome._tag !== "RangeReply") return undefined
    const path = paths[i]!
    const reply: RangeReply = outcome
    // Charged as the data port charges the same read; over the limit, the route's read meets the
    // same limiter there and is refused (so sendfile is no way around a limit).
    const limiter = limiters[i]
    if (limiter !== undefined && limiter.admit(tenant, reply.length) > 0) {
      path.release(reply)
      return "refused"
    }
    pinned++
    let held = true
    return {
      segments: reply.segments,
      release: () => {
        if (!held) return
        held = false
        pinned--
        path.release(reply)
      }
    }
  }
  if (paths.some((p) => p.geometry.blockSize !== blockSize)) return "the workers of this process differ in block size"
  const from = (i: number, object: ObjectId, version: string, offset: number, length: number): LocalPiece | undefined | Promise<LocalPiece | undefined> => {
    for (; i < paths.length; i++) {
      const outcome = paths[i]!.readCached(object, version, offset, length)
      if (outcome instanceof Promise) {
        const at = i
        return outcome.then((o) => {
          const piece = pieceOf(at, o)
          return piece === "refused" ? undefined : (piece ?? from(at + 1, object, version, offset, length))
        })
      }
      const piece = pieceOf(i, outcome)
      if (piece !== undefined) return piece === "refused" ? undefined : piece
    }
    return undefined
  }
  return {
    blockSize,
    resident: (object, version, offset, length) => from(0, object, version, offset, length),
    fdOf: sender.fdOf,
    send: sender.send,
    pinned: () => pinned
  }
}
