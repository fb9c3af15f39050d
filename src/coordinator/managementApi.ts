/**
 * Talon's read-only management views (`/api/v1/cluster`, `/nodes`, `/nodes/{id}`, `/backend`,
 * `/capabilities`) built from the registry's merged view. Pure: the admin server encodes what
 * these return with the schemas in src/protocol/adminApi.ts.
 */
import { NodeRole } from "../core/ids.js"
import {
  ADMIN_API_VERSION,
  type ApiError,
  type BackendStatus,
  type CapabilitiesView,
  type ClusterSummary,
  NODES_DEFAULT_LIMIT,
  NODES_MAX_LIMIT,
  type NodeList,
  type NodeView,
  type ResponseMeta
} from "../protocol/adminApi.js"
import type { RegistryNode, RegistryView } from "./registry/view.js"
import { roleName } from "./registry/view.js"

export interface ManagementContext {
  readonly clusterId: string
  readonly backend: "memory" | "etcd"
  readonly view: RegistryView
  readonly nowMs: number
}

export const responseMeta = (c: ManagementContext): ResponseMeta => ({
  api_version: ADMIN_API_VERSION,
  generated_at_unix_ms: c.nowMs,
  snapshot_revision: c.view.revision ?? "none",
  snapshot_age_ms: Math.max(0, c.nowMs - c.view.observedAtUnixMs),
  backend: c.backend
})

export const nodeView = (n: RegistryNode): NodeView => {
  const s = n.status
  return {
    node_id: s.node.id,
    role: roleName(s.node.role),
    address: s.node.address,
    admin_address: s.adminAddress,
    health: n.health,
    ready: s.ready,
    build_version: s.buildVersion,
    started_at_unix_ms: s.startedAtUnixMs,
    reported_at_unix_ms: s.reportedAtUnixMs,
    requests_total: s.metrics.requestsTotal,
    errors_total: s.metrics.errorsTotal,
    bytes_served_total: s.metrics.bytesServedTotal,
    cache_hits_total: s.metrics.cacheHitsTotal,
    cache_misses_total: s.metrics.cacheMissesTotal,
    block_count: s.metrics.blockCount,
    resident_bytes: s.metrics.residentBytes,
    capacity_bytes: s.metrics.capacityBytes,
    labels: Object.fromEntries(s.labels)
  }
}

export const clusterSummary = (c: ManagementContext): ClusterSummary => {
  const workers = c.view.nodes.filter((n) => n.status.node.role === NodeRole.Worker)
  const sum = (pick: (n: RegistryNode) => number) => workers.reduce((total, n) => total + pick(n), 0)
  return {
    cluster_id: c.clusterId,
    node_count: c.view.nodes.length,
    coordinator_count: c.view.nodes.length - workers.length,
    worker_count: workers.length,
    healthy_worker_count: workers.filter((n) => n.health === "healthy").length,
    total_capacity_bytes: sum((n) => n.status.metrics.capacityBytes),
    total_resident_bytes: sum((n) => n.status.metrics.residentBytes),
    total_block_count: sum((n) => n.status.metrics.blockCount),
    meta: responseMeta(c)
  }
}

export interface NodesQuery {
  readonly role?: string | undefined
  readonly health?: string | undefined
  readonly offset?: number | undefined
  readonly limit?: number | undefined
}

/** Filtered, ordered by id (the view already is), then paged; the limit clamps to 1..500 as Talon's does. */
export const nodeList = (c: ManagementContext, q: NodesQuery): NodeList => {
  const matching = c.view.nodes.filter(
    (n) => (q.role === undefined || roleName(n.status.node.role) === q.role) && (q.health === undefined || n.health === q.health)
  )
  const offset = q.offset ?? 0
  const limit = Math.min(Math.max(q.limit ?? NODES_DEFAULT_LIMIT, 1), NODES_MAX_LIMIT)
  return {
    nodes: matching.slice(offset, offset + limit).map(nodeView),
    total: matching.length,
    offset,
    limit,
    meta: responseMeta(c)
  }
}

export const nodeById = (c: ManagementContext, id: string): NodeView | ApiError => {
  const found = c.view.nodes.find((n) => n.status.node.id === id)
  return found === undefined
    ? { error: "node_not_found", message: `no node with id ${JSON.stringify(id)} in the current snapshot; GET /api/v1/nodes lists them` }
    : nodeView(found)
}

export const backendStatus = (c: ManagementContext): BackendStatus => {
  const meta = responseMeta(c)
  return { backend: c.backend, ready: c.view.ready, revision: meta.snapshot_revision, snapshot_age_ms: meta.snapshot_age_ms, meta }
}

/** No metadata store here: Talon's "nothing configured" answer, an empty set that is always serviceable. */
export const capabilities = (c: ManagementContext): CapabilitiesView => ({
  advertised: [],
  revision: 0,
  store_reachable: true,
  meta: responseMeta(c)
})

/** Talon answers 503 rather than serve a view it cannot vouch for. */
export const unavailable = (c: ManagementContext): ApiError | undefined =>
  c.view.ready
    ? undefined
    : {
        error: "backend_unavailable",
        message: `the ${c.backend} state store gave no snapshot (${c.view.error ?? "starting"}); retry, or ask another coordinator`
      }
