import { Backend, NodeRole, type BlockId, type NodeInfo } from "../src/core/ids.js"
import * as placement from "../src/placement/index.js"
import { benchBatched } from "./batch.js"

const { Maglev, Rendezvous } = placement

/*
 * Inputs shaped like Talon's placement_benches.rs so the numbers line up: workers
 * `worker-{i}` at `10.0.0.{i}:7001`; blocks of `s3://bucket/obj-{i}` at offset i × 256 MiB,
 * version "v1" (a 79-byte key: two SHA-256 blocks). Talon looks up one fixed block; here every
 * call takes the next of 64 such blocks (nothing is cached per block, so this only keeps the
 * branch predictor honest).
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
  benchBatched(`locate/${n}`, 256, () => maglev.primary(nextBlock()))
  // HRW primary: one block hash + n score mixes (the shape of Talon's RendezvousPlacement::locate).
  benchBatched(`locate_hrw/${n}`, n >= 256 ? 64 : 256, () => hrw.primary(nextBlock()))
  // Top-3 replicas (Talon's locate_top_k uses k = 3): hash + probe until 3 distinct workers.
  benchBatched(`locate_top_k/${n}`, 256, () => maglev.rank(nextBlock(), 3))
  benchBatched(`locate_top_k_hrw/${n}`, n >= 256 ? 64 : 256, () => hrw.rank(nextBlock(), 3))
}

for (const [n, batch, hrwBatch] of [
  [8, 4, 16],
  [64, 2, 4],
  [256, 1, 1]
] as const) {
  const members = nodes(n)
  // A membership change: normalise + sort, n worker permutations, the slot fill, the epoch.
  benchBatched(`table_build/${n}`, batch, () => Maglev.build(members).size)
  benchBatched(`table_build_hrw/${n}`, hrwBatch, () => Rendezvous.build(members).ids)
}
