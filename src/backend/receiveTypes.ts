/** What the fill's origin client (receiveInto.ts) and its connections (receiveConnection.ts) share. */
import type { IncomingHttpHeaders } from "node:http"

/** Returned by a body sink that has every byte it needs: the rest of the message is not read. */
export const STOP = Symbol("stop")

/**
 * Takes the next body bytes (a view into the socket's buffer). A promise holds the socket
 * paused until it settles (a rejection aborts the exchange with its error); a throw aborts it.
 */
export type BodySink = (chunk: Uint8Array) => Promise<void> | typeof STOP | undefined | void

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

