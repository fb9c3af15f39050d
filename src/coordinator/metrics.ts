/**
 * Prometheus text exposition (format 0.0.4) for the coordinator. Hand-rendered:
 * a handful of gauges and counters does not justify a metrics library.
 */
import type { ControlServerStats } from "./ControlServer.js"
import { operationOf } from "./talonMetrics.js"
import { TOKEN_REFUSALS } from "./registry/auth.js"
import type { RegistryCounters } from "./registry/Registry.js"
import type { RegistryView } from "./registry/view.js"

export interface MetricsInput {
  readonly view: RegistryView
  readonly epoch: number
  readonly counters: RegistryCounters
  readonly control: ControlServerStats
  readonly uptimeSeconds: number
}

const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"')

export const renderMetrics = (m: MetricsInput): string => {
  const lines: Array<string> = []
  const metric = (name: string, type: "gauge" | "counter", help: string, samples: Array<[string, number]>) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`)
    for (const [labels, value] of samples) lines.push(`${name}${labels} ${value}`)
  }
  const members = m.view.members
  metric("talon_coordinator_ready", "gauge", "1 while the cluster state store is followed, else 0.", [["", m.view.ready ? 1 : 0]])
  metric("talon_coordinator_members", "gauge", "Healthy, ready workers (what placement runs over).", [["", members.length]])
  metric("talon_coordinator_coordinators", "gauge", "Live coordinators of the cluster (their own records).", [["", m.view.coordinators.length]])
  metric("talon_coordinator_records", "gauge", "Node records in the state store, healthy or not.", [["", m.view.nodes.length]])
  metric("talon_coordinator_epoch", "gauge", "Placement epoch (low 53 bits of the membership content hash).", [
    ["", m.epoch]
  ])
  metric("talon_coordinator_registrations_total", "counter", "Register messages accepted.", [
    ["", m.counters.registrations]
  ])
  metric("talon_coordinator_heartbeats_total", "counter", "Legacy heartbeats accepted from registered nodes.", [
    ["", m.counters.heartbeats]
  ])
  metric("talon_coordinator_status_heartbeats_total", "counter", "NodeStatusHeartbeats accepted.", [
    ["", m.counters.statusHeartbeats]
  ])
  metric("talon_coordinator_state_write_failures_total", "counter", "Writes the state store refused or did not answer.", [
    ["", m.counters.storeWriteFailures]
  ])
  metric("talon_coordinator_heartbeats_rejected_total", "counter", "Heartbeats refused (unknown node, another cluster, or full).", [
    ["", m.counters.rejectedHeartbeats]
  ])
  metric(
    "talon_coordinator_token_refusals_total",
    "counter",
    "Statuses, Registers and Heartbeats refused for the cluster token, by reason (missing, wrong, takeover, legacy, stale).",
    TOKEN_REFUSALS.map((r) => [`{reason="${r}"}`, m.counters.tokenRefusals.counts[r]])
  )
  metric("talon_coordinator_expirations_total", "counter", "Nodes that left placement (silent, expired or removed).", [
    ["", m.counters.expirations]
  ])
  metric(
    "talon_coordinator_worker_last_heartbeat_age_seconds",
    "gauge",
    "Seconds since each healthy node's last heartbeat.",
    members.map((s) => [`{node="${escapeLabel(s.status.node.id)}"}`, Math.max(0, m.view.observedAtUnixMs - s.updatedAtUnixMs) / 1000])
  )
  metric(
    "talon_coordinator_worker_blocks",
    "gauge",
    "Blocks each node reported in its last heartbeat.",
    members.map((s) => [`{node="${escapeLabel(s.status.node.id)}"}`, s.status.metrics.blockCount])
  )
  metric("talon_coordinator_control_connections", "gauge", "Open control connections.", [["", m.control.connections]])
  metric("talon_coordinator_control_connections_total", "counter", "Control connections accepted.", [
    ["", m.control.connectionsTotal]
  ])
  metric(
    "talon_coordinator_control_requests_total",
    "counter",
    "Control-listener frames received, by message and by Talon's operation label.",
    Object.entries(m.control.requests)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([type, n]) => [`{message="${escapeLabel(type)}",operation="${operationOf(type)}"}`, n])
  )
  metric("talon_coordinator_control_error_frames_total", "counter", "Error frames sent.", [["", m.control.errorFrames]])
  metric(
    "talon_coordinator_control_dropped_connections_total",
    "counter",
    "Connections closed for a framing error, an idle partial frame or replies left unread.",
    [["", m.control.droppedConnections]]
  )
  metric(
    "talon_coordinator_control_backpressure_pauses_total",
    "counter",
    "Times a connection stopped being read because its replies were not read or too many requests were pending.",
    [["", m.control.backpressurePauses]]
  )
  metric("talon_coordinator_uptime_seconds", "gauge", "Seconds since the coordinator started.", [
    ["", m.uptimeSeconds]
  ])
  return lines.join("\n") + "\n"
}
