/**
 * The membership registry's messages. Writes (ReportStatus, Register,
 * Heartbeat) go to the cluster state store; Sweep folds the store's latest
 * view in and re-derives health at the current time; Snapshot reads the view
 * in mailbox order (after every write queued before it).
 */
import { Schema } from "effect"
import type { NodeInfo } from "../../core/ids.js"
import type { NodeStatus } from "../../protocol/status.js"
import type { RegistryView } from "./view.js"

export interface RegistryAck {
  readonly ok: boolean
  readonly detail: string | null
}

const opaque = <A>(name: string) =>
  Schema.declare<A>((u): u is A => typeof u === "object" && u !== null, { identifier: name })

const AckSchema = opaque<RegistryAck>("RegistryAck")

/** Talon's status heartbeat (control tag 9): the node's full status, ordered by incarnation and sequence. */
export class ReportStatus extends Schema.TaggedRequest<ReportStatus>()("ReportStatus", {
  success: AckSchema,
  failure: Schema.Never,
  payload: { status: opaque<NodeStatus>("NodeStatus") }
}) {}

/** Legacy Register: stored as a synthesized status under the node's legacy incarnation. */
export class Register extends Schema.TaggedRequest<Register>()("Register", {
  success: AckSchema,
  failure: Schema.Never,
  payload: { node: opaque<NodeInfo>("NodeInfo") }
}) {}

/** Legacy Heartbeat: refreshes a legacy record; a node that sends status heartbeats is only counted. */
export class Heartbeat extends Schema.TaggedRequest<Heartbeat>()("Heartbeat", {
  success: AckSchema,
  failure: Schema.Never,
  payload: { node: Schema.String, blockCount: Schema.Number }
}) {}

/** Takes the store's latest view and re-derives health and expiry at the current time. */
export class Sweep extends Schema.TaggedRequest<Sweep>()("Sweep", { success: Schema.Void, failure: Schema.Never, payload: {} }) {}

/** The view after every message queued before this one. */
export class Snapshot extends Schema.TaggedRequest<Snapshot>()("Snapshot", {
  success: opaque<RegistryView>("RegistryView"),
  failure: Schema.Never,
  payload: {}
}) {}

export const RegistryProtocol = Schema.Union(ReportStatus, Register, Heartbeat, Sweep, Snapshot)
export type RegistryMessage = Schema.Schema.Type<typeof RegistryProtocol>
