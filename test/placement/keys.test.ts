import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import fc from "fast-check"
import { Backend, NodeRole, type BlockId } from "../../src/core/ids.js"
import { BlockHasher, compareUtf8, Maglev, membershipEpoch, membershipToken, normalizeWorkers, PlacementTable, Rendezvous } from "../../src/placement/index.js"

/** Placement step 5 spelled out with Buffer.concat and node:crypto: the oracle for BlockHasher. */
const field = (s: string): Buffer => {
  const bytes = Buffer.from(s, "utf8")
  const len = Buffer.alloc(8)
  len.writeBigUInt64LE(BigInt(bytes.length))
  return Buffer.concat([len, bytes])
}
const referenceDigest = (b: BlockId): Buffer => {
  const offset = Buffer.alloc(8)
  offset.writeBigUInt64LE(BigInt(b.offset))
  const size = Buffer.alloc(4)
  size.writeUInt32LE(b.blockSize)
  return createHash("sha256")
    .update(
      Buffer.concat([
        Buffer.from("talon-cache-maglev-block-v1\0"),
        Buffer.from([b.object.backend]),
        field(b.object.bucket),
        field(b.object.objectPath),
        offset,
        size,
        field(b.version)
      ])
    )
    .digest()
}

const blockArb: fc.Arbitrary<BlockId> = fc.record({
  object: fc.record({
    backend: fc.constantFrom(Backend.S3, Backend.Gcs, Backend.Azure),
    bucket: fc.string({ maxLength: 64, unit: "grapheme" }),
    // Up to ~1000 chars (some 4-byte UTF-8): forces the scratch buffer to grow.
    objectPath: fc.oneof(fc.string({ maxLength: 1000, unit: "binary" }), fc.string({ maxLength: 400, unit: "grapheme" }))
  }),
  offset: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
  blockSize: fc.integer({ min: 0, max: 0xffff_ffff }),
  version: fc.string({ maxLength: 80, unit: "binary" })
})

describe("BlockHasher", () => {
  it("hashes exactly Talon's block key layout (checked against node:crypto)", () => {
    const h = new BlockHasher()
    fc.assert(
      fc.property(fc.array(blockArb, { minLength: 1, maxLength: 4 }), (blocks) => {
        // Several blocks through one hasher: leftovers from a longer key must not leak.
        for (const b of blocks) {
          h.hash(b)
          const d = referenceDigest(b)
          expect(h.lo).toBe(d.readUInt32LE(0))
          expect(h.lo2).toBe(d.readUInt32LE(4))
          expect(h.hi).toBe(d.readUInt32LE(8))
        }
      }),
      { numRuns: 300 }
    )
  })

  it("encodes arbitrary UTF-16 (paired and lone surrogates, every width) the way Buffer does", () => {
    const h = new BlockHasher()
    const utf16 = fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)), maxLength: 40 })
    fc.assert(
      fc.property(utf16, utf16, utf16, (bucket, objectPath, version) => {
        const b: BlockId = { object: { backend: Backend.Gcs, bucket, objectPath }, offset: 3, blockSize: 4, version }
        h.hash(b)
        const d = referenceDigest(b)
        expect([h.lo, h.lo2, h.hi]).toEqual([d.readUInt32LE(0), d.readUInt32LE(4), d.readUInt32LE(8)])
      }),
      { numRuns: 500 }
    )
  })

  it("handles lone surrogates the way Buffer's UTF-8 encoder does", () => {
    const h = new BlockHasher()
    const b: BlockId = { object: { backend: Backend.S3, bucket: "b\ud800", objectPath: "x\udfffy" }, offset: 1, blockSize: 2, version: "é" }
    h.hash(b)
    expect(h.lo).toBe(referenceDigest(b).readUInt32LE(0))
  })
})

describe("compareUtf8", () => {
  it("orders like the UTF-8 bytes (Buffer.compare), unlike UTF-16 `<`", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 6 }), fc.string({ unit: "binary", maxLength: 6 }), (a, b) => {
        expect(Math.sign(compareUtf8(a, b))).toBe(Math.sign(Buffer.compare(Buffer.from(a), Buffer.from(b))))
      }),
      { numRuns: 2000 }
    )
    expect(compareUtf8("\uffff", "😀")).toBeLessThan(0)
    expect("\uffff" < "😀").toBe(false)
  })

  it("ids that differ only in lone surrogates are one worker (both are U+FFFD on the wire)", () => {
    const nodes = ["a\ud800", "a\udfff", "a\ufffd"].map((id) => ({ id, address: "x", role: NodeRole.Worker }))
    expect(normalizeWorkers(nodes)).toHaveLength(1)
  })
})

describe("membership epoch", () => {
  const nodes = [
    { id: "worker-b", address: "10.0.0.2:7001", role: NodeRole.Worker },
    { id: "coord", address: "10.0.0.9:7000", role: NodeRole.Coordinator },
    { id: "worker-a", address: "10.0.0.1:7001", role: NodeRole.Worker },
    { id: "worker-c", address: "10.0.0.3:7001", role: NodeRole.Worker }
  ]

  it("is Talon's cache_membership_epoch token (computed independently with Python hashlib), top 53 bits", () => {
    const workers = normalizeWorkers(nodes)
    expect(membershipToken(workers)).toBe(16885744399756118765n)
    expect(membershipEpoch(workers)).toBe(8244992382693417)
    expect(Maglev.build(nodes).epoch).toBe(8244992382693417)
    expect(Rendezvous.build(nodes).epoch).toBe(8244992382693417)
  })

  it("changes with an address, is 0 when empty, and yields to an explicit epoch", () => {
    const moved = nodes.map((n) => (n.id === "worker-a" ? { ...n, address: "10.0.0.7:7001" } : n))
    expect(Maglev.build(moved).epoch).not.toBe(Maglev.build(nodes).epoch)
    expect(Maglev.build([]).epoch).toBe(0)
    expect(Maglev.build(nodes, { epoch: 42 }).epoch).toBe(42)
  })
})

describe("PlacementTable service", () => {
  for (const [name, layer] of [
    ["Maglev", Maglev.layer],
    ["Rendezvous", Rendezvous.layer]
  ] as const) {
    it.effect(`${name}.layer starts empty and swaps in a rebuilt placement on update`, () =>
      Effect.gen(function* () {
        const table = yield* PlacementTable
        const block: BlockId = { object: { backend: Backend.S3, bucket: "b", objectPath: "k" }, offset: 0, blockSize: 1, version: "v" }
        const empty = yield* table.current
        expect(empty.primary(block)).toBeUndefined()
        expect(empty.epoch).toBe(0)
        const updated = yield* table.update([{ id: "w1", address: "a:1", role: NodeRole.Worker }], { epoch: 7 })
        const current = yield* table.current
        expect(current).toBe(updated)
        expect(current.epoch).toBe(7)
        expect(current.primary(block)).toBe("w1")
      }).pipe(Effect.provide(layer))
    )
  }
})
