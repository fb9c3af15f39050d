import { afterAll, bench } from "vitest"
import { Backend, NodeRole, type BlockId, type NodeInfo } from "../src/core/ids.js"
import { Maglev, Rendezvous } from "../src/placement/index.js"
import { benchBatched, consume, sink } from "./batch.js"

/*
 * Inputs shaped like Talon's placement_benches.rs so the numbers line up: workers
 * `worker-{i}` at `10.0.0.{i}:7001`; blocks of `s3://bucket/obj-{i}` at offset i × 256 MiB,
 * version "v1" (a 79-byte key: two SHA-256 blocks). Talon looks up one fixed block; here every
 * call takes the next of 64 such blocks (no lookup is cached, so this only keeps the branch
 * predictor honest).
 */
const MiB = 1024 * 1024
const nodes = (n: number): ReadonlyArray<NodeInfo> =>
  Array.from({ length: n }, (_, i) => ({ id: `worker-${i}`, address: `10.0.0.${i}:7001`, role: NodeRole.Worker }))
const block = (i: number): BlockId => ({
  object: { backend: Backend.S3, bucket: "bucket", objectPath: `obj-${i}` },
  offset: i * 256 * MiB,
  blockSize: 256 * MiB,
  version: "v1"
})
const blocks = Array.from({ length: 64 }, (_, i) => block(i + 10))
let next = 0
const nextBlock = (): BlockId => blocks[next++ & 63]!

for (const n of [8, 64, 256]) {
  const maglev = Maglev.build(nodes(n))
  const hrw = Rendezvous.build(nodes(n))
  // Maglev primary: one block hash + one table read.
  benchBatched(`locate/${n}`, 64, () => consume(maglev.primary(nextBlock())))
  // HRW primary: one block hash + n score mixes (Talon's RendezvousPlacement::locate is this shape).
  benchBatched(`locate_hrw/${n}`, n >= 256 ? 16 : 64, () => consume(hrw.primary(nextBlock())))
  // Top-3 replicas (Talon's locate_top_k uses k = 3).
  benchBatched(`locate_top_k/${n}`, 64, () => consume(maglev.rank(nextBlock(), 3)))
  benchBatched(`locate_top_k_hrw/${n}`, n >= 256 ? 16 : 64, () => consume(hrw.rank(nextBlock(), 3)))
}

for (const n of [8, 64, 256]) {
  const members = nodes(n)
  // Whole rebuild on a membership change: normalise + sort, n worker permutations, fill, epoch.
  bench(`table_build/${n}`, () => consume(Maglev.build(members).size))
  benchBatched(`table_build_hrw/${n}`, n >= 256 ? 4 : 16, () => consume(Rendezvous.build(members).ids))
}

afterAll(() => {
  if (sink.value === 0x7fffffff) console.log("unreachable", sink.value)
})
