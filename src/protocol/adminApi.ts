/**
 * Talon's management API (`/api/v1`, `talon-coordinator`'s api.rs and the worker's
 * `/api/v1/status`) as Effect Schemas with Talon's field names, and the HttpApi
 * declarations the OpenAPI documents are generated from. The servers encode every body
 * with these schemas, so what is documented is what is served.
 *
 * `/api/v1/cluster` is Talon's `ClusterSummary` plus this coordinator's own cluster view
 * (camelCase, clusterStatus.ts) in one object: Talon's names and ours do not collide, and
 * `talon cluster`, prefetch and the mount keep reading the fields they always read.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, HttpApiSecurity, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { ClusterStatus } from "./clusterStatus.js"
import { OBJECT_LISTING_PATH, ObjectListingPage } from "./objectListing.js"
import type { NodeStatus } from "./status.js"
import { NodeRole } from "../core/ids.js"

/** Talon's API_VERSION, in every envelope. */
export const ADMIN_API_VERSION = "v1"
/** Talon's page bounds for `/api/v1/nodes`. */
export const NODES_DEFAULT_LIMIT = 100
export const NODES_MAX_LIMIT = 500
/** Paths served without the admin token: orchestrator probes and Prometheus scrapes (Talon's public class). */
export const PUBLIC_ADMIN_PATHS: ReadonlySet<string> = new Set(["/healthz", "/readyz", "/metrics"])

const Count = Schema.NonNegativeInt
export const NodeHealthName = Schema.Literal("healthy", "degraded", "unhealthy", "unknown")
export const NodeRoleName = Schema.Literal("coordinator", "worker")

/** Freshness metadata on every coordinator response (Talon's `ResponseMeta`). */
export const ResponseMeta = Schema.Struct({
  api_version: Schema.String,
  generated_at_unix_ms: Count,
  /** Opaque store revision; compare for equality only. */
  snapshot_revision: Schema.String,
  snapshot_age_ms: Count,
  backend: Schema.Literal("memory", "etcd", "kubernetes")
}).annotations({ identifier: "ResponseMeta" })
export type ResponseMeta = typeof ResponseMeta.Type

/** Talon's `ClusterSummary`. */
export const ClusterSummary = Schema.Struct({
  cluster_id: Schema.String,
  node_count: Count,
  coordinator_count: Count,
  worker_count: Count,
  healthy_worker_count: Count,
  total_capacity_bytes: Count,
  total_resident_bytes: Count,
  total_block_count: Count,
  meta: ResponseMeta
})
export type ClusterSummary = typeof ClusterSummary.Type

/** What `/api/v1/cluster` serves: Talon's summary and this coordinator's view side by side. */
export const ClusterView = Schema.extend(ClusterSummary, ClusterStatus).annotations({ identifier: "ClusterView" })
export type ClusterView = typeof ClusterView.Type

/** Talon's `NodeView`: one node's bounded management view. */
export const NodeView = Schema.Struct({
  node_id: Schema.String,
  role: NodeRoleName,
  address: Schema.String,
  admin_address: Schema.NullOr(Schema.String),
  health: NodeHealthName,
  ready: Schema.Boolean,
  build_version: Schema.String,
  started_at_unix_ms: Count,
  reported_at_unix_ms: Count,
  requests_total: Count,
  errors_total: Count,
  bytes_served_total: Count,
  cache_hits_total: Count,
  cache_misses_total: Count,
  block_count: Count,
  resident_bytes: Count,
  capacity_bytes: Count,
  labels: Schema.Record({ key: Schema.String, value: Schema.String })
}).annotations({ identifier: "NodeView" })
export type NodeView = typeof NodeView.Type

export const NodeList = Schema.Struct({
  /** Ordered by node id. */
  nodes: Schema.Array(NodeView),
  /** Nodes matching the filter, before paging. */
  total: Count,
  offset: Count,
  limit: Count,
  meta: ResponseMeta
}).annotations({ identifier: "NodeList" })
export type NodeList = typeof NodeList.Type

export const BackendStatus = Schema.Struct({
  backend: Schema.Literal("memory", "etcd", "kubernetes"),
  ready: Schema.Boolean,
  revision: Schema.String,
  snapshot_age_ms: Count,
  meta: ResponseMeta
}).annotations({ identifier: "BackendStatus" })
export type BackendStatus = typeof BackendStatus.Type

/** Talon's `CapabilitiesView`; there is no metadata store here, so the set is empty and always serviceable. */
export const CapabilitiesView = Schema.Struct({
  advertised: Schema.Array(Schema.String),
  revision: Count,
  store_reachable: Schema.Boolean,
  meta: ResponseMeta
}).annotations({ identifier: "CapabilitiesView" })
export type CapabilitiesView = typeof CapabilitiesView.Type

/** Talon's stable error body for every non-2xx API answer. */
export const ApiError = Schema.Struct({
  /** Machine-readable code: `unauthorized`, `node_not_found`, `backend_unavailable`, `bad_request`, `starting`. */
  error: Schema.String,
  message: Schema.String
}).annotations({ identifier: "ApiError" })
export type ApiError = typeof ApiError.Type

/** Talon's `NodeStatus` JSON (serde's spelling: `NodeInfo.role` is the variant name). */
export const WorkerStatus = Schema.Struct({
  schema_version: Count,
  cluster_id: Schema.String,
  node: Schema.Struct({ id: Schema.String, address: Schema.String, role: Schema.Literal("Coordinator", "Worker") }),
  incarnation_id: Schema.String,
  admin_address: Schema.NullOr(Schema.String),
  build_version: Schema.String,
  started_at_unix_ms: Count,
  reported_at_unix_ms: Count,
  heartbeat_seq: Count,
  health: NodeHealthName,
  ready: Schema.Boolean,
  metrics: Schema.Struct({
    requests_total: Count,
    errors_total: Count,
    bytes_served_total: Count,
    cache_hits_total: Count,
    cache_misses_total: Count,
    backend_errors_total: Count,
    evictions_total: Count,
    inflight_loads: Count,
    block_count: Count,
    page_count: Count,
    resident_bytes: Count,
    capacity_bytes: Count,
    state_snapshot_age_ms: Count
  }),
  labels: Schema.Record({ key: Schema.String, value: Schema.String })
}).annotations({ identifier: "WorkerStatus" })
export type WorkerStatus = typeof WorkerStatus.Type

const failure = (status: number, description: string) =>
  ApiError.annotations({ identifier: `ApiError${status}`, description, [HttpApiSchema.AnnotationStatus]: status })

/** The object listing's error body (it predates Talon's envelope and keeps its shape for the mount). */
const listingFailure = (status: number, description: string) =>
  Schema.Struct({ error: Schema.String }).annotations({ identifier: `ListingError${status}`, description, [HttpApiSchema.AnnotationStatus]: status })

const Unauthorized = failure(401, "No valid `Authorization: Bearer <token>` while an admin token is set.")
const Unavailable = failure(503, "The state store gave no snapshot in time; no stale data is served.")

/** The admin token, as a bearer credential (documentation only: the servers check it, see src/http/adminToken.ts). */
export class AdminToken extends HttpApiMiddleware.Tag<AdminToken>()("AdminToken", {
  failure: Unauthorized,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

const openapi = HttpApiEndpoint.get("openapi", "/api/v1/openapi.json").addSuccess(Schema.Unknown).annotate(OpenApi.Summary, "This OpenAPI document")

export const NodesUrlParams = Schema.Struct({
  role: Schema.optional(NodeRoleName),
  health: Schema.optional(NodeHealthName),
  offset: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.nonNegative())),
  limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.positive()))
})

const ObjectsQuery = Schema.Struct({
  prefix: Schema.optional(Schema.String),
  delimiter: Schema.optional(Schema.String),
  cursor: Schema.optional(Schema.String),
  limit: Schema.optional(Schema.String)
})

export const CoordinatorAdminApi = HttpApi.make("coordinator")
  .add(
    HttpApiGroup.make("management")
      .add(HttpApiEndpoint.get("cluster", "/api/v1/cluster").addSuccess(ClusterView).annotate(OpenApi.Summary, "Cluster summary and this coordinator's view"))
      .add(
        HttpApiEndpoint.get("nodes", "/api/v1/nodes")
          .setUrlParams(NodesUrlParams)
          .addSuccess(NodeList)
          .addError(failure(400, "A query parameter is not what the API takes."))
          .annotate(OpenApi.Summary, "A page of nodes, ordered by id (limit at most 500)")
      )
      .add(
        HttpApiEndpoint.get("node", "/api/v1/nodes/:node_id")
          .setPath(Schema.Struct({ node_id: Schema.String }))
          .addSuccess(NodeView)
          .addError(failure(404, "No such node in the current snapshot."))
          .annotate(OpenApi.Summary, "One node")
      )
      .add(HttpApiEndpoint.get("backend", "/api/v1/backend").addSuccess(BackendStatus).annotate(OpenApi.Summary, "State-store readiness and revision"))
      .add(HttpApiEndpoint.get("capabilities", "/api/v1/capabilities").addSuccess(CapabilitiesView).annotate(OpenApi.Summary, "Capabilities this cluster offers"))
      .add(
        HttpApiEndpoint.get("objects", OBJECT_LISTING_PATH)
          .setUrlParams(ObjectsQuery)
          .addSuccess(ObjectListingPage)
          .addError(listingFailure(400, "The listing query is not valid."))
          .addError(listingFailure(404, "The origin has no such bucket or container."))
          .addError(listingFailure(502, "The origin refused or failed the listing."))
          .annotate(OpenApi.Summary, "A page of the origin's objects under a prefix (what `talon mount` lists with)")
      )
      .add(openapi)
      .addError(Unavailable)
      .middleware(AdminToken)
  )
  .annotate(OpenApi.Title, "talon-ts coordinator management API")
  .annotate(OpenApi.Version, ADMIN_API_VERSION)
  .annotate(OpenApi.Description, "Talon's read-only /api/v1. With TALON_ADMIN_TOKEN set every route needs `Authorization: Bearer <token>`; /healthz, /readyz and /metrics never do.")

export const WorkerAdminApi = HttpApi.make("worker")
  .add(
    HttpApiGroup.make("management")
      .add(
        HttpApiEndpoint.get("status", "/api/v1/status")
          .addSuccess(WorkerStatus)
          .addError(failure(503, "The worker has not built its first status yet."))
          .annotate(OpenApi.Summary, "This worker's latest status (Talon's NodeStatus)")
      )
      .add(openapi)
      .middleware(AdminToken)
  )
  .annotate(OpenApi.Title, "talon-ts worker management API")
  .annotate(OpenApi.Version, ADMIN_API_VERSION)

let coordinatorDoc: OpenApi.OpenAPISpec | undefined
let workerDoc: OpenApi.OpenAPISpec | undefined
/** The OpenAPI 3.1 documents, built once on first request. */
export const coordinatorOpenApi = (): OpenApi.OpenAPISpec => (coordinatorDoc ??= OpenApi.fromApi(CoordinatorAdminApi))
export const workerOpenApi = (): OpenApi.OpenAPISpec => (workerDoc ??= OpenApi.fromApi(WorkerAdminApi))

/** A NodeStatus as Talon's serde writes it to JSON (labels a map, names snake_case). */
export const workerStatusJson = (s: NodeStatus): WorkerStatus => ({
  schema_version: s.schemaVersion,
  cluster_id: s.clusterId,
  node: { id: s.node.id, address: s.node.address, role: s.node.role === NodeRole.Worker ? "Worker" : "Coordinator" },
  incarnation_id: s.incarnationId,
  admin_address: s.adminAddress,
  build_version: s.buildVersion,
  started_at_unix_ms: s.startedAtUnixMs,
  reported_at_unix_ms: s.reportedAtUnixMs,
  heartbeat_seq: s.heartbeatSeq,
  health: s.health,
  ready: s.ready,
  metrics: {
    requests_total: s.metrics.requestsTotal,
    errors_total: s.metrics.errorsTotal,
    bytes_served_total: s.metrics.bytesServedTotal,
    cache_hits_total: s.metrics.cacheHitsTotal,
    cache_misses_total: s.metrics.cacheMissesTotal,
    backend_errors_total: s.metrics.backendErrorsTotal,
    evictions_total: s.metrics.evictionsTotal,
    inflight_loads: s.metrics.inflightLoads,
    block_count: s.metrics.blockCount,
    page_count: s.metrics.pageCount,
    resident_bytes: s.metrics.residentBytes,
    capacity_bytes: s.metrics.capacityBytes,
    state_snapshot_age_ms: s.metrics.stateSnapshotAgeMs
  },
  labels: Object.fromEntries(s.labels)
})
