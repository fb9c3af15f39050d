/**
 * The load of the HA scenarios: a `TalonClient` (coordinators from TALON_CLIENT_COORDINATOR, a
 * list it fails over between) reading random ranges of one object with `--concurrency` reads in
 * flight, every byte compared with a local copy. Prints a JSON progress line every 250 ms and,
 * on SIGTERM, a final line with the counts, the error times and every stall (a gap between
 * completed reads) over 100 ms, so the harness can line them up with what it broke and when.
 *
 *   node --import tsx bench/multihost/reader.ts --object s3://talon/k --copy FILE [--range 256K] [--concurrency 8]
 */
import { readFileSync } from "node:fs"
import { Effect } from "effect"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import { scriptArgs } from "../lib/args.js"

const args = scriptArgs()
const object = args.string("object", "")
const copyPath = args.string("copy", "")
if (object === "" || copyPath === "") {
  console.error("usage: reader.ts --object s3://bucket/key --copy LOCAL_FILE [--range 256K] [--concurrency 8]")
  process.exit(2)
}
const copy = readFileSync(copyPath)
const range = args.size("range", "256K")
const concurrency = args.number("concurrency", 8)

let ok = 0
let errors = 0
let wrongBytes = 0
let lastOkAt = Date.now()
let stopping = false
const errorTimes: Array<number> = []
const errorSamples: Array<string> = []
const stalls: Array<{ readonly from: number; readonly ms: number }> = []

const countWrong = (got: Uint8Array, offset: number): number => {
  let wrong = Math.abs(got.length - Math.min(range, copy.length - offset))
  const n = Math.min(got.length, copy.length - offset)
  if (Buffer.compare(Buffer.from(got.buffer, got.byteOffset, n), copy.subarray(offset, offset + n)) === 0) return wrong
  for (let i = 0; i < n; i++) if (got[i] !== copy[offset + i]) wrong++
  return wrong
}

const line = (extra: Record<string, unknown> = {}) =>
  console.log(JSON.stringify({ t: Date.now(), ok, errors, wrong_bytes: wrongBytes, ...extra }))

const program = Effect.gen(function* () {
  const client = yield* makeTalonClient()
  const slots = Math.floor(copy.length / range)
  const one = Effect.suspend(() => {
    const offset = Math.floor(Math.random() * slots) * range
    return client.read(object, offset, range).pipe(
      Effect.map((bytes) => {
        const now = Date.now()
        if (now - lastOkAt > 100) stalls.push({ from: lastOkAt, ms: now - lastOkAt })
        lastOkAt = now
        ok++
        wrongBytes += countWrong(bytes, offset)
      }),
      Effect.catchAll((e) =>
        Effect.sync(() => {
          errors++
          errorTimes.push(Date.now())
          if (errorSamples.length < 5) errorSamples.push(`${e._tag}: ${e.message}`)
        })
      )
    )
  })
  const loop = Effect.gen(function* () {
    while (!stopping) yield* one
  })
  const ticker = Effect.gen(function* () {
    while (!stopping) {
      yield* Effect.sleep("250 millis")
      line()
    }
  })
  yield* Effect.all([ticker, ...Array.from({ length: concurrency }, () => loop)], { concurrency: "unbounded", discard: true })
  line({ final: true, error_times: errorTimes, error_samples: errorSamples, stalls })
})

process.on("SIGTERM", () => {
  stopping = true
})

Effect.runPromise(Effect.scoped(program)).then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e instanceof Error ? e.message : String(e))
    process.exit(1)
  }
)
