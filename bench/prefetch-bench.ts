/**
 * `talon prefetch` throughput on a local cluster against an S3-like origin stub (30 ms first
 * byte, 100 MB/s per response): a cold prefetch of a prefix, a second (resident) run, and one
 * plain 1-stream GET per object straight from the origin for scale. Every object is then read
 * from the cache with the origin refusing every request, each byte compared. Short on purpose
 * (2 cores, shared machine): compare the ratios within one run.
 *
 *   npx tsx bench/prefetch-bench.ts [objects=8] [MiB per object=32]
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Context, Effect, Layer } from "effect"
import { Prefetch } from "../src/client/prefetch.js"
import { TalonClient } from "../src/client/TalonClient.js"
import { LocalCluster } from "../src/cluster/LocalCluster.js"

const objects = Number(process.argv[2] ?? 8)
const mib = Number(process.argv[3] ?? 32)
const MiB = 1024 * 1024
const BLOCK = 64 * MiB

const bytesOf = (n: number, seed: number): Buffer => {
  const out = Buffer.allocUnsafe(n)
  for (let i = 0; i < n; i += 4) out.writeUInt32LE(Math.imul(i + 1, 2654435761 ^ seed) >>> 0, i)
  return out
}

const program = Effect.gen(function* () {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "talon-prefetch-bench-"))),
    (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
  )
  const data: Array<Buffer> = []
  for (let i = 0; i < objects; i++) {
    const file = join(dir, "origin", "data", "set", `part-${i}.bin`)
    mkdirSync(join(file, ".."), { recursive: true })
    data.push(bytesOf(mib * MiB, i + 1))
    writeFileSync(file, data[i]!)
  }
  const cluster = yield* LocalCluster.make({ dir, ephemeral: true, workers: 2, gateway: false, worker: { blockSize: BLOCK, capacity: 4 * objects * mib * MiB } })
  while ((yield* cluster.coordinator.members).length < 2) yield* Effect.sleep("100 millis")
  yield* cluster.origin.setFaults({ latency: { kind: "fixed", ms: 30 }, bandwidthBytesPerSec: 100 * 1e6 })

  const total = objects * mib * MiB
  const directRead = Effect.promise(async () => {
    const t = performance.now()
    for (let i = 0; i < objects; i++) {
      const res = await fetch(`${cluster.origin.url}/data/set/part-${i}.bin`)
      await res.arrayBuffer()
    }
    return total / 1e6 / ((performance.now() - t) / 1000)
  })
  // Direct reads before and after the cold prefetch (A/B/A): the machine is shared.
  const directBefore = yield* directRead

  const ctx = yield* Layer.build(Prefetch.layer({ coordinator: cluster.coordinator.controlAddress, blockSize: BLOCK, statTtlMs: 600_000 }))
  const prefetch = Context.get(ctx, Prefetch)
  const client = Context.get(ctx, TalonClient)
  const before = yield* cluster.origin.stats()
  const cold = yield* prefetch.prefetch("s3://data/set/")
  const mid = yield* cluster.origin.stats()
  const directAfter = yield* directRead
  const mid2 = yield* cluster.origin.stats()
  const warm = yield* prefetch.prefetch("s3://data/set/")
  const after = yield* cluster.origin.stats()
  yield* cluster.origin.setFaults({ failureRate: 1, failureMode: "reset", latency: { kind: "none" } })
  let checked = 0
  for (let i = 0; i < objects; i++) {
    const got = yield* client.read(`s3://data/set/part-${i}.bin`, 0, mib * MiB)
    if (Buffer.compare(Buffer.from(got), data[i]!) !== 0) throw new Error(`part-${i} differs`)
    checked += got.length
  }
  const mbps = (s: { bytesDone: number; elapsedMs: number }) => s.bytesDone / 1e6 / (s.elapsedMs / 1000)
  console.log(
    JSON.stringify(
      {
        objects,
        objectMiB: mib,
        directOneStreamMBpsBefore: +directBefore.toFixed(1),
        directOneStreamMBpsAfter: +directAfter.toFixed(1),
        prefetchColdMBps: +mbps(cold).toFixed(1),
        prefetchColdSeconds: cold.elapsedMs / 1000,
        coldOriginBytes: mid.bytesServed - before.bytesServed,
        coldFetched: cold.fetched,
        secondRunSeconds: warm.elapsedMs / 1000,
        secondRunOriginBytes: after.bytesServed - mid2.bytesServed,
        secondRunOriginGets: after.requests.get - mid2.requests.get,
        secondRunResident: warm.resident,
        failures: cold.failed + warm.failed,
        bytesVerifiedFromCacheWithOriginDown: checked
      },
      null,
      2
    )
  )
})

Effect.runPromise(Effect.scoped(program)).catch((e) => {
  console.error(e)
  process.exit(1)
})
