import * as bitmap from "../src/core/bitmap.js"
import * as geometry from "../src/core/geometry.js"
import { Backend, type BlockId } from "../src/core/ids.js"
import * as objectId from "../src/core/objectId.js"
import { benchBatched } from "./batch.js"

// Local bindings: see bench/batch.ts on vitest's import getters.
const { PresentBitmap } = bitmap
const { pageCount } = geometry
const { objectIdFromPath, objectIdToPath } = objectId

/*
 * Inputs are Talon's core_benches.rs sample: s3://my-bucket/data/checkpoint-000042.bin,
 * block 7 of 256 MiB, version "etag-abc123".
 */
const MiB = 1024 * 1024
const sample: BlockId = {
  object: { backend: Backend.S3, bucket: "my-bucket", objectPath: "data/checkpoint-000042.bin" },
  offset: 7 * 256 * MiB,
  blockSize: 256 * MiB,
  version: "etag-abc123"
}
const path = objectIdToPath(sample.object)

// ObjectId → "/s3/my-bucket/data/checkpoint-000042.bin".
benchBatched("object_id_to_path", 4096, () => objectIdToPath(sample.object))

// "/s3/my-bucket/…" → Either<ObjectId>: split, backend lookup, component checks.
benchBatched("object_id_from_path", 1024, () => objectIdFromPath(path)._tag)

// ceil(256 MiB / 256 KiB), Talon's BlockId::page_count(256 KiB). The page size is read from
// an array so the call cannot be constant-folded (divan::black_box in Talon).
const pageSizes = [256 * 1024, 256 * 1024]
let turn = 0
benchBatched("block_page_count", 16384, () => pageCount(sample.blockSize, pageSizes[turn++ & 1]!))

for (const pages of [64, 1024]) {
  // As Talon measures it: allocate a bitmap, set every page one by one, popcount.
  benchBatched(`bitmap_set_all/${pages}`, pages >= 1024 ? 64 : 1024, () => {
    const bm = new PresentBitmap(pages)
    for (let p = 0; p < pages; p++) bm.set(p)
    return bm.count()
  })

  // A full bitmap asked whether [0, pages) is present: the hit-path check.
  const full = new PresentBitmap(pages)
  for (let p = 0; p < pages; p++) full.set(p)
  benchBatched(`bitmap_range_present/${pages}`, 8192, () => full.rangePresent(0, pages))
}
