/**
 * Typed failures of the wire codec. Decoders return these instead of
 * throwing, so a hostile or broken peer can never crash a serve loop.
 */
import { Data } from "effect"

const hex16 = (n: number): string => `0x${n.toString(16).padStart(4, "0")}`

export class BadMagic extends Data.TaggedError("BadMagic")<{ readonly got: number }> {
  override get message(): string {
    return `bad frame magic ${hex16(this.got)} (expected 0x544c "TL"): the peer is not speaking the Talon protocol`
  }
}

export class BadVersion extends Data.TaggedError("BadVersion")<{ readonly got: number }> {
  override get message(): string {
    return `unsupported protocol version ${this.got} (this build speaks version 1)`
  }
}

export class OverCap extends Data.TaggedError("OverCap")<{
  readonly type: number
  readonly length: number
  readonly cap: number
  /** The refused frame's request id, so a server can address its error reply. */
  readonly requestId?: number | undefined
}> {
  override get message(): string {
    return `frame of type ${this.type} advertises ${this.length} payload bytes, over the ${this.cap}-byte cap for that type; the connection must be dropped`
  }
}

export class UnknownType extends Data.TaggedError("UnknownType")<{ readonly type: number }> {
  override get message(): string {
    return `unknown frame message type ${this.type} (known: 0 Control … 9 GetCachedRangeTenant, and this project's 10 GetPinnedRange, 11 GetPinnedRangeTenant)`
  }
}

export class Truncated extends Data.TaggedError("Truncated")<{ readonly needed: number; readonly have: number }> {
  override get message(): string {
    return `truncated frame: needed ${this.needed} bytes, have ${this.have} (the peer closed mid-frame)`
  }
}

export class DecodeError extends Data.TaggedError("DecodeError")<{ readonly what: string; readonly reason: string }> {
  override get message(): string {
    return `cannot decode ${this.what}: ${this.reason}`
  }
}

export type FrameError = BadMagic | BadVersion | OverCap | UnknownType | Truncated | DecodeError

const FRAME_ERROR_TAGS: ReadonlySet<string> = new Set([
  "BadMagic",
  "BadVersion",
  "OverCap",
  "UnknownType",
  "Truncated",
  "DecodeError"
])

export const isFrameError = (u: unknown): u is FrameError =>
  typeof u === "object" && u !== null && FRAME_ERROR_TAGS.has((u as { _tag?: unknown })._tag as string)
