/** What the fill's origin client (receiveInto.ts) and its connections (receiveConnection.ts) share. */
import type { IncomingHttpHeaders } from "node:http"

/** Returned by a body sink that has every byte it needs: the rest of the message is not read. */
export const STOP = Symbol("stop")

/**
 * Takes the next body bytes (a view into the socket's buffer). A promise holds the socket
 * paused until it settles (a rejection aborts the exchange with its error); a throw aborts it.
 */
export type BodySink = {
  (chunk: Uint8Array): Promise<void> | typeof STOP | undefined | void
  /** Offered when the sink can take a content-length body straight into its own memory (nativeReceive.ts). */
  readonly direct?: DirectSink | undefined
}

/** Where the next body bytes are received: `bytes[from, to)`, by the native receive, off the JS thread. */
export interface DirectTarget {
  readonly bytes: Uint8Array
  readonly from: number
  readonly to: number
  /** `bytes[0, to)` is a whole unit once filled: it is hashed (XXH64) where it lies. */
  readonly unit: boolean
}

/**
 * A sink's memory lent to the native receive: the receive asks for a target, fills what the
 * origin sends of it, and reports. The sink owns the target's bytes again once `filled` is called.
 */
export interface DirectSink {
  /** Where the next at most `max` (> 0) bytes go; a throw aborts the exchange. */
  readonly target: (max: number) => DirectTarget
  /**
   * `n` (> 0) bytes arrived at the last target's `from`; `sum` is its unit's XXH64 when the
   * target was a whole unit and every byte of it came. Returns as a BodySink does.
   */
  readonly filled: (n: number, sum: bigint | undefined) => Promise<void> | typeof STOP | undefined | void
}

/** After the head: a sink for the body, or undefined to buffer it whole (an error document). */
export type OnHead = (status: number, headers: IncomingHttpHeaders) => BodySink | undefined

export interface Exchanged {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  /** The body, when `onHead` chose to buffer it. */
  readonly body: Buffer | undefined
}

/** A transport failure, with a node-style code so callers can tell transient ones apart. */
export class ReceiveError extends Error {
  constructor(
    message: string,
    readonly code: string
  ) {
    super(message)
  }
}

