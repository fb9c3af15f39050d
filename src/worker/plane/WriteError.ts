import { Data } from "effect"

/**
 * A connection writer failed: the peer went away (EPIPE, ECONNRESET), the socket was
 * destroyed under it, or a file was shorter than the range promised in the header.
 * The connection has been destroyed; every write queued behind the failed one rejects too.
 */
export class ConnectionWriteError extends Data.TaggedError("ConnectionWriteError")<{
  readonly plane: "native" | "portable"
  /** errno name when the kernel refused the write ("EPIPE", "ECONNRESET", ...). */
  readonly code?: string | undefined
  readonly detail: string
}> {
  override get message() {
    return `${this.plane} data plane: write failed${this.code === undefined ? "" : ` (${this.code})`}: ${this.detail}`
  }
}
