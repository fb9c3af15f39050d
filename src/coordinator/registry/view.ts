/**
 * What the registry serves: the store's followed view with this
 * coordinator's own accepted writes laid over it until the store's watch
 * catches up with them, so a node that heartbeats here is visible here at
 * once. Plain functions over immutable values; the registry actor owns them.
 */
import { NodeRole, type NodeInfo } from "../../core/ids.js"
import { NODE_ZONE_LABEL, labelOf, type NodeHealth } from "../../protocol/status.js"
import type { FollowedMembership } from "../state/MembershipView.js"
import { effectiveHealth, placementNodes, rejectReason, type StoredNode } from "../state/record.js"

export interface RegistryNode extends StoredNode {
  readonly health: NodeHealth
}

export interface RegistryView {
  /** False until the first store snapshot, and while the store cannot be followed. */
  readonly ready: boolean
  /** Why the view is not ready. */
  readonly error: string | undefined
  /** Every stored record, by id. */
  readonly nodes: ReadonlyArray<RegistryNode>
  /** Healthy, ready workers, by id: what MembershipQuery lists (Talon lists workers only). */
  readonly members: ReadonlyArray<RegistryNode>
  /** Live coordinators (each keeps its own record), by id: for the cluster view, never placement. */
  readonly coordinators: ReadonlyArray<RegistryNode>
  /** Workers with a record that placement leaves out (not ready, degraded, unhealthy or silent), by id. */
  readonly outOfPlacement: ReadonlyArray<RegistryNode>
  /** Healthy, ready workers: what placement runs over. */
  readonly placement: ReadonlyArray<NodeInfo>
  /** Talon's content epoch of `placement` (same members, same epoch, on every coordinator). */
  readonly epoch: bigint
  readonly observedAtUnixMs: number
  /** The store revision the followed snapshot was at (opaque; for the admin API's freshness metadata). */
  readonly revision?: string | undefined
}

export const emptyView: RegistryView = {
  ready: false,
  error: "starting",
  nodes: [],
  members: [],
  coordinators: [],
  outOfPlacement: [],
  placement: [],
  epoch: 0n,
  observedAtUnixMs: 0
}

/** A write this coordinator applied, with the store revision it committed at. */
export interface LocalWrite {
  readonly node: StoredNode
  readonly revision: number
}

/** The number in a backend revision (`memory:12`, `etcd:345`); NaN when unreadable. */
export const revisionNumber = (revision: string | undefined): number =>
  revision === undefined ? Number.NaN : Number(revision.slice(revision.indexOf(":") + 1))

/** Local writes the followed view has not caught up with (older ones are dropped). */
export const pendingWrites = (followed: FollowedMembership, local: ReadonlyMap<string, LocalWrite>): Map<string, LocalWrite> => {
  const seen = revisionNumber(followed.revision)
  const out = new Map<string, LocalWrite>()
  for (const [id, w] of local) if (!(seen >= w.revision)) out.set(id, w)
  return out
}

const byId = (a: StoredNode, b: StoredNode) => (a.status.node.id < b.status.node.id ? -1 : a.status.node.id > b.status.node.id ? 1 : 0)

/** The merged records at `now` (health derived), without the epoch. */
export const mergeView = (
  followed: FollowedMembership,
  local: ReadonlyMap<string, LocalWrite>,
  now: number,
  unhealthyAfterMs: number
): Omit<RegistryView, "epoch"> => {
  const merged = new Map<string, StoredNode>(followed.nodes)
  for (const [id, w] of local) {
    const current = merged.get(id)
    if (current === undefined || rejectReason(current.status, w.node.status) === null) merged.set(id, w.node)
  }
  const stored = [...merged.values()].sort(byId)
  const nodes = stored.map((n) => ({ ...n, health: effectiveHealth(n, now, unhealthyAfterMs) }))
  return {
    ready: followed.ready,
    error: followed.ready ? undefined : (followed.error ?? "starting"),
    nodes,
    members: nodes.filter((n) => n.status.node.role === NodeRole.Worker && n.status.ready && n.health === "healthy"),
    outOfPlacement: nodes.filter((n) => n.status.node.role === NodeRole.Worker && !(n.status.ready && n.health === "healthy")),
    coordinators: nodes.filter((n) => n.status.node.role === NodeRole.Coordinator && n.health !== "unhealthy"),
    placement: placementNodes(stored, now, unhealthyAfterMs),
    observedAtUnixMs: now,
    revision: followed.revision
  }
}

export const zoneOf = (n: StoredNode): string | null => labelOf(n.status, NODE_ZONE_LABEL) ?? null

export const roleName = (role: NodeRole) => (role === NodeRole.Worker ? "worker" : "coordinator") as "worker" | "coordinator"
