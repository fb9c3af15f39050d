// Embedding talon-ts from an installed package (`npm install talon-ts effect`), in plain
// JavaScript: a local cluster (seeded origin stub, coordinator, two workers) from the exported
// layers, a TalonClient on it, one range read through the cache and checked byte by byte
// against the seeded content. test/package/pack.test.ts installs the packed tarball and runs this.
import { Effect, Layer } from "effect"
import { LocalCluster, Origin } from "talon-ts"
import { TalonClient } from "talon-ts/client"

const OBJECT = "s3://talon/datasets/sample-1m.bin"
const offset = Number(process.argv[2] ?? 12345)
const length = Number(process.argv[3] ?? 300_000)

// The client dials the coordinator the cluster just bound (ephemeral ports).
const ClientLive = Layer.unwrapEffect(
  Effect.map(LocalCluster, (cluster) => TalonClient.layer({ coordinator: cluster.coordinator.controlAddress }))
)
const AppLive = ClientLive.pipe(Layer.provideMerge(LocalCluster.layer({ ephemeral: true, workers: 2, gateway: false })))

const program = Effect.gen(function* () {
  const cluster = yield* LocalCluster
  const client = yield* TalonClient
  const info = yield* client.stat(OBJECT)
  const bytes = yield* client.read(OBJECT, offset, length)
  const expected = Origin.sampleBytes(offset, length)
  let firstDifference = -1
  for (let i = 0; i < Math.max(bytes.length, expected.length); i++) {
    if (bytes[i] !== expected[i]) {
      firstDifference = i
      break
    }
  }
  return {
    object: OBJECT,
    size: info.size,
    offset,
    length: bytes.length,
    identical: bytes.length === length && firstDifference < 0,
    firstDifference,
    workers: cluster.workers.length
  }
})

const result = await Effect.runPromise(program.pipe(Effect.provide(AppLive)))
console.log(JSON.stringify(result))
process.exitCode = result.identical ? 0 : 1
