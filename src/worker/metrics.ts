/**
 * Worker counters. Plain numbers bumped from the serve loop and the miss path
 * (no Effect Metric on the hot path); the admin endpoint renders them in the
 * Prometheus text format.
 */
import { Context, Layer } from "effect"
import { Exposition, Histogram as LatencyHistogram } from "../core/exposition.js"
import { VERSION } from "../core/version.js"
import { CORRUPT_REASONS, type StoreHealth } from "./store/health.js"
import { renderTenantMetrics, type TenantLimiter } from "./tenants/TenantLimiter.js"

/** Origin fetch latency buckets, in seconds. */
export const ORIGIN_LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const

export class Histogram {
  readonly counts: Array<number>
  sum = 0
  count = 0
  constructor(readonly bounds: ReadonlyArray<number>) {
    this.counts = new Array<number>(bounds.length).fill(0)
  }
  observe(v: number): void {
    this.sum += v
    this.count++
    const b = this.bounds
    for (let i = 0; i < b.length; i++) if (v <= b[i]!) this.counts[i]!++
  }
}

export class WorkerStats {
  #hits = 0
  #bytesServed = 0
  /** [replies, payload bytes] answered by the data plane's hit table (counted there, without JS). */
  offloaded: Float64Array | undefined = undefined

  /** Range requests answered entirely from resident blocks. */
  get hits(): number {
    return this.#hits + (this.offloaded?.[0] ?? 0)
  }
  set hits(value: number) {
    this.#hits = value - (this.offloaded?.[0] ?? 0)
  }
  /** Payload bytes of successful replies. */
  get bytesServed(): number {
    return this.#bytesServed + (this.offloaded?.[1] ?? 0)
  }
  set bytesServed(value: number) {
    this.#bytesServed = value - (this.offloaded?.[1] ?? 0)
  }
  /** Range requests that needed at least one fill from the origin. */
  misses = 0
  /** Requests answered with an ERROR frame. */
  errors = 0
  pings = 0
  /** Origin range fetches started (one per run of missing pages or per block). */
  originFetches = 0
  originFetchFailures = 0
  originBytes = 0
  /** Of originBytes, those received by the native receive (--origin-receive native), off the JS thread. */
  originNativeBytes = 0
  /** Bytes read-ahead asked the origin for (missing pages ahead of sequential readers). */
  readAheadBytes = 0
  /** Read-ahead fills started (each at most the origin fetch size). */
  readAheadFills = 0
  /** Read-ahead bytes whose reader went elsewhere (random access, gone) before reaching them. */
  readAheadUnusedBytes = 0
  /** Origin HEADs (version lookups). */
  originStats = 0
  /** Origin range fetches that ended, either way (started minus these = in flight). */
  originFetchesSettled = 0
  /**
   * Data-plane requests answered by JS, from the request's arrival to its reply being ready;
   * the native hit table times its own (in `offloaded`, from the read to the send).
   */
  readonly requestLatency = new LatencyHistogram()
  /** Status heartbeats a coordinator accepted, and rounds none did. */
  heartbeatsAccepted = 0
  heartbeatsFailed = 0
  readonly originLatency = new Histogram(ORIGIN_LATENCY_BUCKETS)
  evictions = 0
  evictedBytes = 0
  connectionsOpen = 0
  connectionsTotal = 0
  /** Connections dropped for a protocol violation (bad magic/version, over-cap, idle partial frame). */
  connectionsDropped = 0
  /** The block store's integrity and disk-full counters (set by the store that owns the cache dirs). */
  store: StoreHealth | undefined = undefined
  /** Cache dirs that failed their last write probe (membership/health.ts; 0 when standalone). */
  cacheDirsFailingProbe = 0
  /** Per-tenant rate limits and their counters, when on (tenants/TenantLimiter.ts). */
  tenants: TenantLimiter | undefined = undefined
}

export class WorkerMetrics extends Context.Tag("talon/worker/WorkerMetrics")<WorkerMetrics, WorkerStats>() {
  static readonly layer = Layer.sync(WorkerMetrics, () => new WorkerStats())
}

export interface Gauges {
  readonly residentBytes: number
  readonly capacityBytes: number
  readonly blocks: number
  /** Units on disk (pages, or whole blocks when unpaged). */
  readonly units?: number
  readonly openFiles: number
  readonly dataPlane: string
  readonly serveMode: string
  readonly ready: boolean
  readonly registered: boolean
}

const line = (out: Array<string>, name: string, type: string, help: string, value: number | string, labels = "") => {
  out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name}${labels} ${value}`)
}

const escapeLabel = (v: string): string => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")

export const renderPrometheus = (s: WorkerStats, g: Gauges): string => {
  const out: Array<string> = []
  out.push(renderTalonFamilies(s, g).slice(0, -1))
  line(out, "talon_worker_hits_total", "counter", "Range requests served entirely from the cache.", s.hits)
  line(out, "talon_worker_misses_total", "counter", "Range requests that needed an origin fill.", s.misses)
  line(out, "talon_worker_request_errors_total", "counter", "Requests answered with an ERROR frame.", s.errors)
  line(out, "talon_worker_bytes_served_total", "counter", "Payload bytes of successful replies.", s.bytesServed)
  line(out, "talon_worker_pings_total", "counter", "Ping requests answered.", s.pings)
  line(
    out,
    "talon_worker_hit_table_hits_total",
    "counter",
    "Range requests answered by the native plane's hit table, without JS (counted in hits_total too).",
    s.offloaded?.[0] ?? 0
  )
  line(out, "talon_worker_origin_fetches_total", "counter", "Origin range fetches.", s.originFetches)
  line(out, "talon_worker_origin_fetch_failures_total", "counter", "Origin range fetches that failed.", s.originFetchFailures)
  line(out, "talon_worker_origin_bytes_total", "counter", "Bytes fetched from the origin.", s.originBytes)
  line(out, "talon_worker_origin_native_bytes_total", "counter", "Of the bytes fetched from the origin, those received off the JS thread (--origin-receive native).", s.originNativeBytes)
  line(out, "talon_worker_read_ahead_bytes_total", "counter", "Bytes fetched from the origin ahead of sequential readers.", s.readAheadBytes)
  line(out, "talon_worker_read_ahead_fills_total", "counter", "Read-ahead fills started.", s.readAheadFills)
  line(
    out,
    "talon_worker_read_ahead_unused_bytes_total",
    "counter",
    "Read-ahead bytes the reader never reached (it went elsewhere or was dropped from the read-ahead table).",
    s.readAheadUnusedBytes
  )
  line(out, "talon_worker_origin_stats_total", "counter", "Origin HEAD requests (version lookups).", s.originStats)
  const h = s.originLatency
  out.push(
    "# HELP talon_worker_origin_fetch_seconds Duration of origin range fetches.",
    "# TYPE talon_worker_origin_fetch_seconds histogram"
  )
  for (let i = 0; i < h.bounds.length; i++) out.push(`talon_worker_origin_fetch_seconds_bucket{le="${h.bounds[i]}"} ${h.counts[i]}`)
  out.push(
    `talon_worker_origin_fetch_seconds_bucket{le="+Inf"} ${h.count}`,
    `talon_worker_origin_fetch_seconds_sum ${h.sum}`,
    `talon_worker_origin_fetch_seconds_count ${h.count}`
  )
  line(out, "talon_worker_evictions_total", "counter", "Units (pages or blocks) evicted.", s.evictions)
  line(out, "talon_worker_evicted_bytes_total", "counter", "Bytes evicted.", s.evictedBytes)
  renderStoreHealth(out, s.store)
  renderTenantMetrics(out, s.tenants)
  line(out, "talon_worker_resident_bytes", "gauge", "Bytes of blocks on disk.", g.residentBytes)
  line(
    out,
    "talon_worker_capacity_bytes",
    "gauge",
    "Total cache capacity over all cache dirs (a dir that hit ENOSPC counts what fitted).",
    g.capacityBytes
  )
  line(out, "talon_worker_blocks", "gauge", "Blocks with at least one page on disk.", g.blocks)
  line(out, "talon_worker_open_files", "gauge", "Block files held open for serving.", g.openFiles)
  line(out, "talon_worker_connections", "gauge", "Open data-plane connections.", s.connectionsOpen)
  line(out, "talon_worker_connections_total", "counter", "Data-plane connections accepted.", s.connectionsTotal)
  line(out, "talon_worker_connections_dropped_total", "counter", "Connections dropped for a protocol violation.", s.connectionsDropped)
  line(out, "talon_worker_ready", "gauge", "1 when the worker is registered (or standalone) and serving.", g.ready ? 1 : 0)
  line(
    out,
    "talon_worker_cache_dirs_failing_probe",
    "gauge",
    "Cache dirs that failed their last write probe (any keeps the worker out of placement).",
    s.cacheDirsFailingProbe
  )
  line(
    out,
    "talon_worker_data_plane_info",
    "gauge",
    "The data plane and serve mode in use.",
    1,
    `{plane="${escapeLabel(g.dataPlane)}",mode="${escapeLabel(g.serveMode)}"}`
  )
  return out.join("\n") + "\n"
}

const renderStoreHealth = (out: Array<string>, h: StoreHealth | undefined): void => {
  if (h === undefined) return
  out.push(
    "# HELP talon_worker_store_corrupt_units_total Units dropped instead of served (file removed, refetched on the next read), by what was wrong.",
    "# TYPE talon_worker_store_corrupt_units_total counter"
  )
  for (const r of CORRUPT_REASONS) out.push(`talon_worker_store_corrupt_units_total{reason="${r}"} ${h.corrupt[r]}`)
  line(out, "talon_worker_store_verified_units_total", "counter", "Units hashed and found to match their recorded checksum.", h.verifiedUnits)
  line(out, "talon_worker_store_scrubbed_bytes_total", "counter", "Bytes re-hashed by the background scrub.", h.scrubbedBytes)
  line(out, "talon_worker_store_scrub_deferred_seconds_total", "counter", "Seconds the scrub waited for origin fills to finish before re-hashing.", h.scrubDeferredSeconds)
  line(out, "talon_worker_disk_full_errors_total", "counter", "Cache writes that failed with ENOSPC (then evicted and retried).", h.diskFullErrors)
  line(out, "talon_worker_disk_full_episodes_total", "counter", "Times a cache dir ran out of space after having room.", h.diskFullEpisodes)
  line(out, "talon_worker_disk_full_evicted_bytes_total", "counter", "Bytes evicted to make room after ENOSPC.", h.diskFullEvictedBytes)
  line(out, "talon_worker_fill_fsyncs_total", "counter", "Filled units fdatasynced before their rename.", h.fsyncs)
  line(out, "talon_worker_fill_fsync_seconds_total", "counter", "Time spent in those fdatasyncs.", h.fsyncSeconds)
}

/** The native table's latency histogram, when it keeps one: [sum, counts…] after its two hit counters. */
const nativeLatency = (s: WorkerStats) => {
  const o = s.offloaded
  if (o === undefined || o.length < 3 + s.requestLatency.counts.length) return undefined
  return { sum: o[2]!, counts: o.subarray(3, 3 + s.requestLatency.counts.length) }
}

/**
 * Talon's worker families (crates/talon-worker/src/observability.rs): its names, types, labels
 * and units, from the same counters as ours. Talon labels backend families with its configured
 * backend; this worker reads every origin through one router, so its label says "origin".
 */
export const renderTalonFamilies = (s: WorkerStats, g: Gauges): string => {
  const none = [] as const
  const backend = [["backend", "origin"]] as const
  const o = s.originLatency
  const e = new Exposition()
    .gauge("talon_worker_build_info", "Worker build information.", [[[["version", VERSION]], 1]])
    .counter("talon_worker_requests_total", "Data-plane requests completed by the worker.", [[none, s.hits + s.misses + s.errors]])
    .counter("talon_worker_cache_hits_total", "Worker cache hits.", [[[["form", "whole"]], s.hits]])
    .counter("talon_worker_cache_misses_total", "Worker cache misses.", [[[["form", "whole"]], s.misses]])
    .histogram("talon_worker_request_duration_seconds", "Data-plane request latency in seconds.", [
      [none, s.requestLatency, nativeLatency(s)]
    ])
    .counter("talon_worker_backend_fetch_bytes_total", "Bytes fetched from the origin backend.", [[backend, s.originBytes]])
    .counter("talon_worker_backend_fetch_errors_total", "Origin backend range fetch failures.", [[backend, s.originFetchFailures]])
    .gauge("talon_worker_inflight_loads", "Backend loads currently in flight.", [[none, Math.max(0, s.originFetches - s.originFetchesSettled)]])
    .gauge("talon_worker_active_connections", "Data-plane connections currently open.", [[none, s.connectionsOpen]])
    .gauge("talon_worker_pages", "Materialized pages currently indexed by the worker.", [[none, g.units ?? g.blocks]])
    .gauge("talon_worker_process_uptime_seconds", "Worker process uptime in seconds.", [[none, process.uptime()]])
    .counter("talon_worker_control_heartbeat_total", "Control-plane heartbeat attempts by result.", [
      [[["result", "success"]], s.heartbeatsAccepted],
      [[["result", "failure"]], s.heartbeatsFailed]
    ])
    .raw(
      [
        "# HELP talon_worker_backend_fetch_duration_seconds Origin backend range fetch latency in seconds.",
        "# TYPE talon_worker_backend_fetch_duration_seconds histogram",
        ...o.bounds.map((b, i) => `talon_worker_backend_fetch_duration_seconds_bucket{backend="origin",le="${b}"} ${o.counts[i]}`),
        `talon_worker_backend_fetch_duration_seconds_bucket{backend="origin",le="+Inf"} ${o.count}`,
        `talon_worker_backend_fetch_duration_seconds_sum{backend="origin"} ${o.sum}`,
        `talon_worker_backend_fetch_duration_seconds_count{backend="origin"} ${o.count}`
      ].join("\n")
    )
  return e.text()
}
