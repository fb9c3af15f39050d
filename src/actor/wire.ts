/**
 * The envelopes a remote actor exchanges over a channel. Tags carry a prefix so a channel
 * shared with other traffic (a child's IPC) can tell them apart; `actor` picks the served actor
 * and `client` the reference a reply belongs to, so several of each can share one channel.
 */
import { Schema } from "effect"
import { ActorCrashed, ActorStopped, MailboxFull, RemoteProtocolError, RemoteUnavailable } from "./errors.js"

export const PREFIX = "talon.actor/"

const address = { actor: Schema.String, client: Schema.String, id: Schema.Number }

export const Ask = Schema.TaggedStruct(`${PREFIX}Ask`, { ...address, msg: Schema.Unknown })
export const Tell = Schema.TaggedStruct(`${PREFIX}Tell`, { ...address, msg: Schema.Unknown })
export const Stop = Schema.TaggedStruct(`${PREFIX}Stop`, address)
export const ToServer = Schema.Union(Ask, Tell, Stop)
export type ToServer = typeof ToServer.Type

/** The handler's outcome, as the request's `exitSchema` encodes it. */
export const Outcome = Schema.TaggedStruct(`${PREFIX}Exit`, { ...address, exit: Schema.Unknown })
/** A tell was enqueued, or a stop completed. */
export const Accepted = Schema.TaggedStruct(`${PREFIX}Accepted`, address)
/** No outcome: the actor (or the serving side) refused or lost the message. */
export const Refused = Schema.TaggedStruct(`${PREFIX}Refused`, { ...address, error: Schema.Unknown })
export const ToClient = Schema.Union(Outcome, Accepted, Refused)
export type ToClient = typeof ToClient.Type

export const Refusal = Schema.Union(MailboxFull, ActorStopped, ActorCrashed, RemoteUnavailable, RemoteProtocolError)
export type Refusal = typeof Refusal.Type

/** The address of a message that claims to be for `actor`, even if the rest of it is malformed. */
export const addressOf = (raw: unknown): { readonly client: string; readonly id: number; readonly actor: string } | undefined => {
  if (raw === null || typeof raw !== "object") return undefined
  const r = raw as Record<string, unknown>
  if (typeof r["_tag"] !== "string" || !r["_tag"].startsWith(PREFIX)) return undefined
  if (typeof r["actor"] !== "string" || typeof r["client"] !== "string" || typeof r["id"] !== "number") return undefined
  return { actor: r["actor"], client: r["client"], id: r["id"] }
}
