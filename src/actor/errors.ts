/**
 * What can go wrong between a caller and an actor, apart from the message's own failure.
 * Schema classes, so a remote peer receives the same typed error a local caller would.
 */
import { Schema } from "effect"

/** The mailbox already holds `capacity` messages; the caller decides whether to retry, shed or slow down. */
export class MailboxFull extends Schema.TaggedError<MailboxFull>()("MailboxFull", {
  actor: Schema.String,
  capacity: Schema.Number
}) {
  override get message(): string {
    return `actor ${this.actor}: mailbox full (${this.capacity} messages waiting); retry later, or give the actor a larger capacity`
  }
}

/** The actor no longer runs (stopped, its scope closed, or supervision gave up); `reason` says which. */
export class ActorStopped extends Schema.TaggedError<ActorStopped>()("ActorStopped", {
  actor: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `actor ${this.actor} is stopped (${this.reason}); obtain a new reference once it runs again`
  }
}

/** The handler for this message died (a defect, not a declared failure); the actor restarts if supervised. */
export class ActorCrashed extends Schema.TaggedError<ActorCrashed>()("ActorCrashed", {
  actor: Schema.String,
  request: Schema.String,
  defect: Schema.String
}) {
  override get message(): string {
    return `actor ${this.actor} crashed handling ${this.request}: ${this.defect}`
  }
}

/** The channel to a remote actor closed (peer exited, port closed) before the reply came. */
export class RemoteUnavailable extends Schema.TaggedError<RemoteUnavailable>()("RemoteUnavailable", {
  actor: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `remote actor ${this.actor} is unreachable (${this.reason}); check that its process or thread is still running`
  }
}

/** A message or reply did not encode or decode with the actor's protocol schema (mismatched versions, bad data). */
export class RemoteProtocolError extends Schema.TaggedError<RemoteProtocolError>()("RemoteProtocolError", {
  actor: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `remote actor ${this.actor}: ${this.detail}; both sides must use the same protocol schema`
  }
}

/** Errors a local actor reference can fail with. */
export type LocalActorError = MailboxFull | ActorStopped | ActorCrashed
/** Errors a remote actor reference can fail with: the local ones (reported by the serving side) and the channel's. */
export type ActorError = LocalActorError | RemoteUnavailable | RemoteProtocolError

