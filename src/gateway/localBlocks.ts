/**
 * The co-located body path's service: when the gateway runs in a worker's process, resident
 * blocks of the exact version a response names are read as pinned file segments and sent to
 * the client's socket by sendfile, so a local hit's bytes never pass through JavaScript.
 * Provided by the process that runs both (`talon up`, `talon gateway --colocate`); absent, the
 * gateway serves every read through its route.
 */
import type * as net from "node:net"
import { Context, type Layer } from "effect"
import type { RouterOptions } from "../backend/Router.js"
import type { ObjectId } from "../core/ids.js"

export interface LocalSegment {
  readonly fd: number
  readonly offset: number
  readonly length: number
}

export interface LocalPiece {
  readonly segments: ReadonlyArray<LocalSegment>
  /** Unpins the blocks: once the bytes are sent or the send failed. */
  readonly release: () => void
}

export interface LocalBlocksShape {
  /** Pieces never cross a block boundary: the range is asked for block by block. */
  readonly blockSize: number
  /**
   * Exactly `length` resident bytes of `version` from `offset`, pinned, or undefined when they
   * are not all here (the route serves them). Never reaches the origin.
   */
  readonly resident: (object: ObjectId, version: string, offset: number, length: number) => LocalPiece | undefined | Promise<LocalPiece | undefined>
  /** The socket's fd when sendfile can write to it, else -1 (TLS, closed). */
  readonly fdOf: (socket: net.Socket) => number
  /**
   * Sends `head` (the response head, when given) and the segments in order: true when all went
   * out at once, else whether all did (false: the socket failed).
   */
  readonly send: (socket: net.Socket, fd: number, segments: ReadonlyArray<LocalSegment>, head?: Uint8Array) => true | Promise<boolean>
}

export class LocalBlocks extends Context.Tag("talon/gateway/LocalBlocks")<LocalBlocks, LocalBlocksShape>() {}

/**
 * Starts a cache worker in this process (settings from `TALON_WORKER_*`, its origin `router`) and
 * gives its resident blocks: what `talon gateway --colocate` runs. Supplied by the command line,
 * which may depend on the worker; the gateway itself does not.
 */
export type ColocatedWorker = (router: RouterOptions) => Layer.Layer<LocalBlocks, unknown>
