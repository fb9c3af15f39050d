import { describe, expect, it } from "@effect/vitest"
import { Backend, NodeRole, type BlockId, type NodeInfo } from "../../src/core/ids.js"
import { Maglev } from "../../src/placement/index.js"

/*
 * Fixed (membership, block) → owners pairs. They were NOT produced by this code base: a
 * separate Python 3 script (hashlib + struct, not committed) implements the placement steps of docs/architecture.md
 * "Placement" steps 1–6 directly — worker permutation from SHA-256("talon-cache-maglev-worker-v1\0"
 * ++ u64le(len) ++ id), the round-robin fill into a 2^k ≥ max(4096, 64n) table, the block
 * hash over "talon-cache-maglev-block-v1\0" ++ tag ++ field(bucket) ++ field(path) ++ u64le(offset)
 * ++ u32le(blockSize) ++ field(version), primary = slots[low64 & mask], top-k by probing with
 * step = (second u64 | 1) & mask — and printed these. The same script reproduces the expectation
 * in Talon's own Rust unit test (`ranking_is_deterministic_and_input_order_independent`:
 * worker-c, worker-a, worker-b), which is also asserted below. Any change in byte layout,
 * endianness, sort order or fill order fails here.
 */

const worker = (id: string): NodeInfo => ({ id, address: `${id}.local:7001`, role: NodeRole.Worker })
const block = (
  backend: Backend,
  bucket: string,
  objectPath: string,
  offset: number,
  blockSize: number,
  version: string
): BlockId => ({ object: { backend, bucket, objectPath }, offset, blockSize, version })

const MiB = 1024 * 1024
const blocks: ReadonlyArray<BlockId> = [
  block(Backend.S3, "bucket", "obj-42", 42 * 256 * MiB, 256 * MiB, "v1"),
  block(Backend.S3, "my-bucket", "data/checkpoint-000042.bin", 7 * 256 * MiB, 256 * MiB, "etag-abc123"),
  block(Backend.Azure, "container", "dir/ファイル.parquet", 0, 64 * MiB, '"0x8DC3A1B2C3D4E5F"'),
  // 200-byte path: the key spans five SHA-256 blocks; offset near 2^53 exercises the high u64 word.
  block(Backend.Gcs, "gcs-bucket", "a".repeat(200), 2 ** 53 - 2 ** 20, MiB, ""),
  block(Backend.S3, "datasets", "training/part-0001", 268435456, 256 * MiB, "etag-v7")
]

const memberships: Record<
  string,
  { ids: ReadonlyArray<string>; size: number; primaries: ReadonlyArray<string>; top3: ReadonlyArray<ReadonlyArray<string>> }
> = {
  abc: {
    ids: ["worker-a", "worker-b", "worker-c"],
    size: 4096,
    primaries: ["worker-c", "worker-c", "worker-b", "worker-c", "worker-c"],
    top3: [
      ["worker-c", "worker-b", "worker-a"],
      ["worker-c", "worker-b", "worker-a"],
      ["worker-b", "worker-a", "worker-c"],
      ["worker-c", "worker-b", "worker-a"],
      ["worker-c", "worker-a", "worker-b"]
    ]
  },
  w8: {
    ids: Array.from({ length: 8 }, (_, i) => `worker-${i}`),
    size: 4096,
    primaries: ["worker-6", "worker-4", "worker-4", "worker-1", "worker-7"],
    top3: [
      ["worker-6", "worker-3", "worker-2"],
      ["worker-4", "worker-0", "worker-5"],
      ["worker-4", "worker-6", "worker-5"],
      ["worker-1", "worker-7", "worker-6"],
      ["worker-7", "worker-2", "worker-1"]
    ]
  },
  w100: {
    ids: Array.from({ length: 100 }, (_, i) => `w${String(i).padStart(3, "0")}`),
    size: 8192,
    primaries: ["w045", "w091", "w054", "w088", "w040"],
    top3: [
      ["w045", "w032", "w066"],
      ["w091", "w046", "w090"],
      ["w054", "w072", "w089"],
      ["w088", "w082", "w087"],
      ["w040", "w015", "w086"]
    ]
  },
  utf8: {
    ids: ["nœud-é", "노드-1", "node-😀", "node-z", "node-\uffff"],
    size: 4096,
    primaries: ["node-😀", "node-\uffff", "노드-1", "node-z", "node-😀"],
    top3: [
      ["node-😀", "노드-1", "node-\uffff"],
      ["node-\uffff", "node-z", "node-😀"],
      ["노드-1", "node-z", "node-😀"],
      ["node-z", "node-\uffff", "노드-1"],
      ["node-😀", "node-z", "노드-1"]
    ]
  }
}

describe("Maglev fixed vectors (independent Python implementation)", () => {
  for (const [name, m] of Object.entries(memberships)) {
    it(`${name}: table size, primaries and top-3`, () => {
      // Reversed input: the result must not depend on input order.
      const table = Maglev.build([...m.ids].reverse().map(worker))
      expect(table.size).toBe(m.size)
      expect(blocks.map((b) => table.primary(b))).toEqual(m.primaries)
      expect(blocks.map((b) => table.rank(b, 3))).toEqual(m.top3)
    })
  }

  it("matches Talon's own unit test expectation", () => {
    const table = Maglev.build(["worker-a", "worker-b", "worker-c"].map(worker))
    expect(table.rank(block(Backend.S3, "datasets", "training/part-0001", 268435456, 256 * MiB, "etag-v7"), 3)).toEqual([
      "worker-c",
      "worker-a",
      "worker-b"
    ])
  })

  it("abc slot ownership: round-robin gives the first worker the odd slot", () => {
    expect(Array.from(Maglev.build(memberships.abc!.ids.map(worker)).slotCounts())).toEqual([1366, 1365, 1365])
  })

  it("ids sort by UTF-8 bytes, not UTF-16 units (a UTF-16 sort would give node-\\uffff here)", () => {
    const table = Maglev.build(memberships.utf8!.ids.map(worker))
    expect(table.ids).toEqual(["node-z", "node-\uffff", "node-😀", "nœud-é", "노드-1"])
    expect(table.primary(block(Backend.S3, "bucket", "obj-2344", 0, MiB, "v1"))).toBe("node-z")
    expect(table.primary(block(Backend.S3, "bucket", "obj-3822", 0, MiB, "v1"))).toBe("node-z")
  })
})
