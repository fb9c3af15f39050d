/**
 * Talon's sample NodeStatus: a healthy, ready worker with one label. Its schema-2
 * heartbeat envelope is 293 bytes; test/protocol/status.test.ts holds the wire bytes,
 * derived by hand, and bench/protocol.bench.ts times encoding and decoding it.
 */
import { NodeRole } from "../../src/core/ids.js"
import { emptyMetrics, type NodeStatus } from "../../src/protocol/status.js"

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
