/**
 * The mount's counters: plain numbers bumped from the FUSE handlers (the read path stays
 * free of Effect), rendered in the Prometheus text format on the admin port.
 */

/** Kernel read latency buckets, in seconds. */
const READ_LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5] as const

export class LatencyHistogram {
  readonly counts: Array<number>
  sum = 0
  count = 0
  constructor(readonly bounds: ReadonlyArray<number>) {
    this.counts = new Array<number>(bounds.length).fill(0)
  }
  observe(seconds: number): void {
    this.sum += seconds
    this.count++
    for (let i = 0; i < this.bounds.length; i++) if (seconds <= this.bounds[i]!) this.counts[i]!++
  }
}

export class MountMetrics {
  reads = 0
  readBytes = 0
  readErrors = 0
  readonly readLatency = new LatencyHistogram(READ_LATENCY_BUCKETS)
  lookups = 0
  opens = 0
  /** Coordinator stats asked (lookups, opens and attribute revalidations). */
  stats = 0
  listings = 0
  /** Errors answered to the kernel by errno (ENOENT included). */
  readonly errors = new Map<string, number>()
  /** Objects seen with a new version (kernel pages dropped). */
  versionChanges = 0
  /** Reads refused on a handle whose version was replaced or is gone at the origin. */
  staleReads = 0

  error(name: string): void {
    this.errors.set(name, (this.errors.get(name) ?? 0) + 1)
  }
}

export interface MountGauges {
  readonly inodes: number
  readonly openHandles: number
  readonly evictedInodes: number
}

export const renderMountMetrics = (m: MountMetrics, g: MountGauges): string => {
  const lines: Array<string> = []
  const counter = (name: string, help: string, value: number) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`, `${name} ${value}`)
  }
  const gauge = (name: string, help: string, value: number) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`, `${name} ${value}`)
  }
  counter("talon_mount_reads_total", "Kernel read requests answered with data.", m.reads)
  counter("talon_mount_read_bytes_total", "Bytes returned to the kernel.", m.readBytes)
  counter("talon_mount_read_errors_total", "Kernel read requests answered with an error.", m.readErrors)
  counter("talon_mount_lookups_total", "Name lookups.", m.lookups)
  counter("talon_mount_opens_total", "Files opened.", m.opens)
  counter("talon_mount_stats_total", "Object stats asked of the cluster.", m.stats)
  counter("talon_mount_listings_total", "Directory listings asked of the cluster.", m.listings)
  counter("talon_mount_version_changes_total", "Objects seen with a new version at the origin.", m.versionChanges)
  counter("talon_mount_stale_reads_total", "Reads refused (EIO) on a handle whose version was replaced at the origin.", m.staleReads)
  lines.push("# HELP talon_mount_errors_total Requests answered with an errno, by errno.", "# TYPE talon_mount_errors_total counter")
  for (const [name, n] of m.errors) lines.push(`talon_mount_errors_total{errno="${name}"} ${n}`)
  const h = m.readLatency
  lines.push("# HELP talon_mount_read_seconds Kernel read latency through the cluster.", "# TYPE talon_mount_read_seconds histogram")
  for (let i = 0; i < h.bounds.length; i++) lines.push(`talon_mount_read_seconds_bucket{le="${h.bounds[i]}"} ${h.counts[i]}`)
  lines.push(`talon_mount_read_seconds_bucket{le="+Inf"} ${h.count}`, `talon_mount_read_seconds_sum ${h.sum}`, `talon_mount_read_seconds_count ${h.count}`)
  gauge("talon_mount_inodes", "Inodes in the table.", g.inodes)
  gauge("talon_mount_open_handles", "Open file handles.", g.openHandles)
  counter("talon_mount_inodes_evicted_total", "Unreferenced inodes dropped to stay within --max-inodes.", g.evictedInodes)
  return `${lines.join("\n")}\n`
}
