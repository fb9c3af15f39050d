/**
 * Legacy Register/Heartbeat (control tags 0 and 1) as store records. Talon's
 * coordinators no longer keep membership for these, but this build's older
 * workers and clients still send them, so a Register is stored as a status
 * of the node's fixed legacy incarnation: started at 0, so any real
 * incarnation (NodeStatusHeartbeat) of the same id replaces it, and its
 * sequence is the accepting coordinator's clock, so two coordinators
 * refreshing it keep it moving forward.
 */
import type { NodeInfo } from "../../core/ids.js"
import { NODE_STATUS_SCHEMA_VERSION, emptyMetrics, type NodeStatus } from "../../protocol/status.js"
import { parseHostPort } from "../../transport/address.js"

export const LEGACY_INCARNATION = "legacy-register"

/** Longest node id or address a Register may carry (ids and addresses end up in every membership reply). */
export const MAX_NODE_FIELD = 256

export const isLegacy = (s: NodeStatus): boolean => s.incarnationId === LEGACY_INCARNATION

/** Why a Register cannot be accepted, or undefined: only dialable members may reach clients' placement. */
export const invalidRegistration = (node: NodeInfo): string | undefined => {
  if (node.id.length === 0 || Buffer.byteLength(node.id, "utf8") > MAX_NODE_FIELD) {
    return `Register refused: the node id must be 1 to ${MAX_NODE_FIELD} bytes (got ${Buffer.byteLength(node.id, "utf8")})`
  }
  if (Buffer.byteLength(node.address, "utf8") > MAX_NODE_FIELD || parseHostPort(node.address) === undefined) {
    return `Register refused: address ${JSON.stringify(node.address.slice(0, 80))} is not a dialable host:port (port 1-65535)`
  }
  return undefined
}

/** The status a legacy Register or Heartbeat stores; `previous` is the legacy record it refreshes, if any. */
export const legacyStatus = (
  clusterId: string,
  node: NodeInfo,
  blockCount: number,
  now: number,
  previous: NodeStatus | undefined
): NodeStatus => ({
  schemaVersion: NODE_STATUS_SCHEMA_VERSION,
  clusterId,
  node: { id: node.id, address: node.address, role: node.role },
  incarnationId: LEGACY_INCARNATION,
  adminAddress: null,
  buildVersion: "legacy-register",
  startedAtUnixMs: 0,
  reportedAtUnixMs: now,
  heartbeatSeq: Math.max(now, (previous?.heartbeatSeq ?? 0) + 1),
  health: "healthy",
  ready: true,
  metrics: { ...emptyMetrics, blockCount },
  labels: []
})
