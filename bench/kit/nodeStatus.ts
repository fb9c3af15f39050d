/**
 * Talon's sample NodeStatus: a healthy, ready worker with one label. Its schema-2
 * heartbeat envelope is 293 bytes; test/protocol/status.test.ts holds the wire bytes,
 * derived by hand, and bench/protocol.bench.ts times encoding and decoding it.
 */
import { randomUUID } from "node:crypto"
import { NodeRole } from "../../src/core/ids.js"
import { emptyMetrics, NODE_STATUS_SCHEMA_VERSION, type NodeStatus } from "../../src/protocol/status.js"

export const talonSampleStatus: NodeStatus = {
  schemaVersion: 1,
  clusterId: "cluster-a",
  node: { id: "worker-1", address: "10.0.0.1:7001", role: NodeRole.Worker },
  incarnationId: "incarnation-1",
  adminAddress: "10.0.0.1:8001",
  buildVersion: "0.1.0",
  startedAtUnixMs: 1000,
  reportedAtUnixMs: 2000,
  heartbeatSeq: 3,
  health: "healthy",
  ready: true,
  metrics: { ...emptyMetrics, blockCount: 42, residentBytes: 1024, capacityBytes: 4096 },
  labels: [["zone", "us-west-1a"]]
}

/**
 * A healthy, ready worker status of a fresh incarnation, reported now, at an address nothing
 * listens on: what a forged or hand-made status sent over a raw control connection looks like.
 */
export const freshWorkerStatus = (id: string, overrides: Partial<NodeStatus> = {}): NodeStatus => ({
  schemaVersion: NODE_STATUS_SCHEMA_VERSION,
  clusterId: "default",
  node: { id, address: "127.0.0.1:9", role: NodeRole.Worker },
  incarnationId: randomUUID(),
  adminAddress: null,
  buildVersion: "test",
  startedAtUnixMs: Date.now(),
  reportedAtUnixMs: Date.now(),
  heartbeatSeq: 1,
  health: "healthy",
  ready: true,
  metrics: emptyMetrics,
  labels: [],
  ...overrides
})
