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


/**
 * The local reads of `paths` (the workers of this process, all of one block size), or why there
 * are none (the addon or epoll is unavailable: the gateway then keeps its portable path).
 */
export const makeLocalReads = (paths: ReadonlyArray<ReadPathImpl>, addonPath?: string): LocalReads | string => {
  if (paths.length === 0) return "no worker runs in this process"
  const sender = makeSocketSendfile(addonPath)
  if (typeof sender === "string") return sender
  const blockSize = paths[0]!.geometry.blockSize
  let pinned = 0
  const pieceOf = (path: ReadPathImpl, outcome: ReadOutcome): LocalPiece | undefined => {
    if (outcome._tag !== "RangeReply") return undefined
    const reply: RangeReply = outcome
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
      const path = paths[i]!
      const outcome = path.readCached(object, version, offset, length)
      if (outcome instanceof Promise) {
        const next = i + 1
        return outcome.then((o) => pieceOf(path, o) ?? from(next, object, version, offset, length))
      }
      const piece = pieceOf(path, outcome)
      if (piece !== undefined) return piece
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
