/**
 * Worker counters. Plain numbers bumped from the serve loop and the miss path
 * (no Effect Metric on the hot path); the admin endpoint renders them in the
 * Prometheus text format.
 */
import { Context, Layer } from "effect"
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
  /** Bytes read-ahead asked the origin for (missing pages ahead of sequential readers). */
  readAheadBytes = 0
  /** Read-ahead fills started (each at most the origin fetch size). */
  readAheadFills = 0
  /** Read-ahead bytes whose reader went elsewhere (random access, gone) before reaching them. */
  readAheadUnusedBytes = 0
  /** Origin HEADs (version lookups). */
  originStats = 0
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
  line(out, "talon_worker_disk_full_errors_total", "counter", "Cache writes that failed with ENOSPC (then evicted and retried).", h.diskFullErrors)
  line(out, "talon_worker_disk_full_episodes_total", "counter", "Times a cache dir ran out of space after having room.", h.diskFullEpisodes)
  line(out, "talon_worker_disk_full_evicted_bytes_total", "counter", "Bytes evicted to make room after ENOSPC.", h.diskFullEvictedBytes)
  line(out, "talon_worker_fill_fsyncs_total", "counter", "Filled units fdatasynced before their rename.", h.fsyncs)
  line(out, "talon_worker_fill_fsync_seconds_total", "counter", "Time spent in those fdatasyncs.", h.fsyncSeconds)
}
