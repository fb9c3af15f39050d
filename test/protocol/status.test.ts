/**
 * NodeStatusHeartbeat (control tag 9). The vectors below were derived by hand
 * from Talon's `NodeStatus` declaration (talon_core::status) and bincode 1.3's
 * fixed-int layout, independently of this codec.
 */
import { Either } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { NodeRole } from "../../src/core/index.js"
import {
  BincodeWriter,
  MAX_NODE_STATUS_BYTES,
  MAX_STATUS_FIELD_BYTES,
  MAX_STATUS_LABELS,
  MAX_STATUS_LABEL_KEY_BYTES,
  MAX_STATUS_LABEL_VALUE_BYTES,
  canonicalLabels,
  decodeControl,
  encodeControl,
  nodeStatusProblem,
  nodeStatusSize,
  type ControlMessage,
  type NodeStatus
} from "../../src/protocol/index.js"
import { talonSampleStatus } from "../../bench/kit/nodeStatus.js"
import { nodeStatusArb } from "./arbitraries.js"

const hex = (parts: ReadonlyArray<string>): string => parts.join("")
const u64 = (n: number): string => Buffer.from(new BigUint64Array([BigInt(n)]).buffer).toString("hex")
const str = (s: string): string => u64(Buffer.byteLength(s)) + Buffer.from(s).toString("hex")

// schema 2, tag 9, then the status in declaration order
const talonSampleHex = hex([
  "0200", "09000000",
  "0100", str("cluster-a"),
  str("worker-1"), str("10.0.0.1:7001"), "01000000",
  str("incarnation-1"),
  "01", str("10.0.0.1:8001"),
  str("0.1.0"),
  "e803000000000000", "d007000000000000", "0300000000000000",
  "00000000", "01",
  "0000000000000000".repeat(8), "2a00000000000000", "0000000000000000", "0004000000000000", "0010000000000000", "0000000000000000",
  "0100000000000000", "0400000000000000", "7a6f6e65", "0a00000000000000", "75732d776573742d3161"
])

const edgeSample: NodeStatus = {
  schemaVersion: 1,
  clusterId: "c",
  node: { id: "coord-数", address: "[::1]:7000", role: NodeRole.Coordinator },
  incarnationId: "i",
  adminAddress: null,
  buildVersion: "v",
  startedAtUnixMs: Number.MAX_SAFE_INTEGER,
  reportedAtUnixMs: Number.MAX_SAFE_INTEGER,
  heartbeatSeq: 2 ** 32,
  health: "unknown",
  ready: false,
  metrics: {
    requestsTotal: 1,
    errorsTotal: 2,
    bytesServedTotal: 3,
    cacheHitsTotal: 4,
    cacheMissesTotal: 5,
    backendErrorsTotal: 6,
    evictionsTotal: 7,
    inflightLoads: 8,
    blockCount: 9,
    pageCount: 10,
    residentBytes: 11,
    capacityBytes: 12,
    stateSnapshotAgeMs: 13
  },
  labels: [["region", ""], ["zone", "z1"]]
}

// Computed separately (Python struct.pack over the same field list).
const edgeSampleHex =
  "05000900000001000100000000000000630900000000000000636f6f72642de695b00a000000000000005b3a3a315d3a373030300000000001000000000000006900010000000000000076ffffffffffff1f00ffffffffffff1f00000000000100000003000000000100000000000000020000000000000003000000000000000400000000000000050000000000000006000000000000000700000000000000080000000000000009000000000000000a000000000000000b000000000000000c000000000000000d0000000000000002000000000000000600000000000000726567696f6e000000000000000004000000000000007a6f6e6502000000000000007a31"

const heartbeat = (status: NodeStatus): ControlMessage => ({ _tag: "NodeStatusHeartbeat", status })
const reason = (bytes: Uint8Array): string => {
  const r = decodeControl(bytes)
  return Either.isLeft(r) ? r.left.reason : "decoded"
}
const envelope = (status: NodeStatus, schema = 2): Buffer => {
  // Writes a status without the encoder's checks, to build what a broken peer might send.
  const w = new BincodeWriter()
  w.u16(schema).u32(9).u16(status.schemaVersion).string(status.clusterId).string(status.node.id).string(status.node.address).u32(status.node.role)
  w.string(status.incarnationId).option(status.adminAddress, (w, a) => w.string(a)).string(status.buildVersion)
  w.u64(status.startedAtUnixMs).u64(status.reportedAtUnixMs).u64(status.heartbeatSeq).u32(0).bool(status.ready)
  for (const v of Object.values(status.metrics)) w.u64(v)
  w.vec(status.labels, (w, [k, v]) => w.string(k).string(v))
  return Buffer.from(w.finish())
}

describe("NodeStatusHeartbeat", () => {
  it("encodes Talon's sample status byte for byte, at schema 2 by default", () => {
    const bytes = encodeControl(heartbeat(talonSampleStatus))
    expect(Buffer.from(bytes).toString("hex")).toBe(talonSampleHex)
    expect(bytes.length).toBe(293)
    expect(decodeControl(Buffer.from(talonSampleHex, "hex"))).toEqual(Either.right({ schema: 2, message: heartbeat(talonSampleStatus) }))
  })

  it("encodes the edge vector (no admin address, coordinator, unknown health, UTF-8 id, 2^53-1, two labels)", () => {
    expect(Buffer.from(encodeControl(heartbeat(edgeSample), 5)).toString("hex")).toBe(edgeSampleHex)
    expect(decodeControl(Buffer.from(edgeSampleHex, "hex"))).toEqual(Either.right({ schema: 5, message: heartbeat(edgeSample) }))
  })

  it("round trips any valid status at schemas 2..5 (property)", () => {
    fc.assert(
      fc.property(nodeStatusArb, fc.integer({ min: 2, max: 5 }), (status, schema) => {
        const bytes = encodeControl(heartbeat(status), schema)
        expect(decodeControl(bytes)).toEqual(Either.right({ schema, message: heartbeat(status) }))
        expect(bytes.length).toBe(6 + nodeStatusSize(status))
      }),
      { numRuns: 300 }
    )
  })

  it("never throws on truncated, mutated or random bytes, and whatever decodes re-encodes exactly (property)", () => {
    fc.assert(
      fc.property(nodeStatusArb, fc.nat(), fc.array(fc.tuple(fc.nat(), fc.nat({ max: 255 })), { maxLength: 4 }), (status, cut, muts) => {
        const bytes = Uint8Array.from(encodeControl(heartbeat(status)))
        expect(Either.isLeft(decodeControl(bytes.subarray(0, cut % bytes.length)))).toBe(true)
        for (const [i, b] of muts) bytes[i % bytes.length] = b
        const r = decodeControl(bytes)
        if (Either.isRight(r)) expect(Buffer.from(encodeControl(r.right.message, r.right.schema)).equals(Buffer.from(bytes))).toBe(true)
      }),
      { numRuns: 1000 }
    )
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), (tail) => {
        decodeControl(Buffer.concat([Buffer.from("020009000000", "hex"), tail]))
      }),
      { numRuns: 1000 }
    )
  })

  it("refuses schema 1 in both directions", () => {
    expect(() => encodeControl(heartbeat(talonSampleStatus), 1)).toThrow(/requires schema 2/)
    const v1 = Buffer.from(talonSampleHex, "hex")
    v1[0] = 1
    expect(reason(v1)).toContain("requires schema 2")
  })

  it("applies Talon's validation on encode and decode, with messages that name the field", () => {
    const cases: ReadonlyArray<[Partial<NodeStatus>, string]> = [
      [{ clusterId: "" }, "cluster_id must not be empty"],
      [{ node: { ...talonSampleStatus.node, address: "x".repeat(MAX_STATUS_FIELD_BYTES + 1) } }, "node.address is 257 bytes; maximum is 256"],
      [{ incarnationId: "é".repeat(129) }, "incarnation_id is 258 bytes"],
      [{ adminAddress: "" }, "admin_address must not be empty"],
      [{ reportedAtUnixMs: 999 }, "reported_at_unix_ms 999 is before started_at_unix_ms 1000"],
      [{ labels: [["", "v"]] }, "label key must not be empty"],
      [{ labels: [["k".repeat(MAX_STATUS_LABEL_KEY_BYTES + 1), "v"]] }, "label key is 64 bytes; maximum is 63"],
      [{ labels: [["region", "界".repeat(MAX_STATUS_LABEL_VALUE_BYTES / 3 + 1)]] }, "label value is 258 bytes"],
      [{ labels: [["zone", "a"], ["region", "b"]] }, "ascending order"],
      [{ labels: [["zone", "a"], ["zone", "b"]] }, "ascending order"]
    ]
    for (const [patch, message] of cases) {
      const bad = { ...talonSampleStatus, ...patch }
      expect(nodeStatusProblem(bad)).toContain(message)
      expect(() => encodeControl(heartbeat(bad))).toThrow(message)
      expect(reason(envelope(bad))).toContain(message)
    }
    expect(reason(envelope({ ...talonSampleStatus, schemaVersion: 2 }))).toContain("unsupported node-status schema 2")
    const labels = canonicalLabels(Array.from({ length: MAX_STATUS_LABELS + 1 }, (_, i) => [`k${i}`, "v"] as const))
    expect(nodeStatusProblem({ ...talonSampleStatus, labels })).toContain("17 labels; maximum is 16")
    expect(reason(envelope({ ...talonSampleStatus, labels }))).toContain("17 labels; maximum is 16")
    const badHealth = Buffer.from(talonSampleHex, "hex")
    badHealth.writeUInt32LE(4, 2 + 4 + 2 + 17 + 16 + 21 + 4 + 21 + 1 + 21 + 13 + 24)
    expect(reason(badHealth)).toContain("unknown node health tag 4")
  })

  it("the largest valid status fits Talon's 16 KiB limit", () => {
    const max: NodeStatus = {
      ...talonSampleStatus,
      clusterId: "c".repeat(MAX_STATUS_FIELD_BYTES),
      node: { id: "n".repeat(MAX_STATUS_FIELD_BYTES), address: "a".repeat(MAX_STATUS_FIELD_BYTES), role: NodeRole.Worker },
      incarnationId: "i".repeat(MAX_STATUS_FIELD_BYTES),
      adminAddress: "m".repeat(MAX_STATUS_FIELD_BYTES),
      buildVersion: "v".repeat(MAX_STATUS_FIELD_BYTES),
      labels: canonicalLabels(
        Array.from({ length: MAX_STATUS_LABELS }, (_, i) => [
          String(i).padStart(2, "0") + "k".repeat(MAX_STATUS_LABEL_KEY_BYTES - 2),
          "x".repeat(MAX_STATUS_LABEL_VALUE_BYTES)
        ] as const)
      )
    }
    expect(nodeStatusProblem(max)).toBeNull()
    expect(nodeStatusSize(max)).toBeLessThanOrEqual(MAX_NODE_STATUS_BYTES)
    expect(decodeControl(encodeControl(heartbeat(max)))).toEqual(Either.right({ schema: 2, message: heartbeat(max) }))
  })

  it("canonicalLabels sorts by UTF-8 bytes and keeps the last value of a repeated key", () => {
    expect(canonicalLabels({ zone: "z", Region: "r", "é": "e", a: "1" })).toEqual([["Region", "r"], ["a", "1"], ["zone", "z"], ["é", "e"]])
    expect(canonicalLabels([["k", "1"], ["k", "2"]])).toEqual([["k", "2"]])
    // U+FFFF sorts before U+1F600 in UTF-8 but after it in UTF-16
    expect(canonicalLabels([["😀", "a"], ["\uffff", "b"]]).map(([k]) => k)).toEqual(["\uffff", "😀"])
  })
})
