/**
 * The worker's miss path on a cold sequential read, against the origin stub at S3-like latency
 * and per-connection bandwidth. JSON Lines on stdout (and `--out FILE`); not a CI gate.
 *
 *   npx tsx bench/miss-path.ts [--size 256M] [--rounds 3] [--latency-ms 30] [--bandwidth 100M]
 *       [--fetch-sizes 4M] [--out FILE]
 *
 * Two clusters (bench/miss-path/cluster.ts, a process each: origin stub + coordinator + one
 * worker) differ only in worker settings: `before` behaves as the miss path did before bounded
 * fetches (a run of missing pages is one GET, 16 origin fetches, no read-ahead); `after` has the
 * defaults (with `--fetch-sizes`, one `after` arm per fetch size). Per round every arm reads a
 * fresh object (a hard link of one file, so the cache is cold for it) from offset 0 to the end:
 *   direct-1   one GET of the whole object from the origin stub
 *   direct-8   8 concurrent ranged GETs
 *   <arm>      TalonClient.readStream through the arm's cluster
 * every byte compared with the object's. Arms run in a rotated order each round (paired). Per
 * arm: MB/s, and for cache arms origin bytes ÷ bytes read and the worker's read-ahead counters.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { Duration, Effect, Stream } from "effect"
import { makeTalonClient } from "../src/client/TalonClient.js"
import { sampleBytes } from "../src/origin/seed.js"
import { Flag, parseFlags, runDriver } from "./lib/driver.js"
import * as Proc from "./lib/proc.js"

const flags = await parseFlags("miss-path", "Cold sequential reads through one worker vs straight from the origin; JSON Lines.", {
  size: Flag.size("size", "256M", "Object size."),
  rounds: Flag.number("rounds", 3, "Rounds (each arm once per round, order rotated)."),
  latencyMs: Flag.number("latency-ms", 30, "Origin first-byte latency, ms."),
  bandwidth: Flag.size("bandwidth", "100M", "Origin bandwidth per response, bytes/s (M = 10^6 here: S3's ~100 MB/s per connection)."),
  fetchSizes: Flag.text("fetch-sizes", "4M", "originFetchSize of the after arms, comma-separated."),
  noSync: Flag.bool("no-sync", "Add an arm with the defaults and --no-sync-fills (no fdatasync per filled page)."),
  out: Flag.text("out", "", "Also write the JSON Lines to this file.")
})
const SIZE = flags.size
const BUCKET = "misspath"
const MiB = 1024 * 1024
// The size parser reads M as MiB; the bandwidth flag means decimal MB/s.
const bandwidth = Math.round((flags.bandwidth / MiB) * 1e6)
const fetchSizes = flags.fetchSizes.split(",").map((s) => Number.parseFloat(s) * MiB)

const emit = (record: Record<string, unknown>) => {
  const line = JSON.stringify({ bench: "miss-path", ...record })
  console.log(line)
  if (flags.out !== "") fs.appendFileSync(flags.out, line + "\n")
}

interface Cluster {
  readonly name: string
  readonly origin: string
  readonly root: string
  readonly coordinator: string
  readonly admin: string
}

const startCluster = (name: string, worker: Record<string, unknown>) =>
  Effect.gen(function* () {
    const p = yield* Proc.spawn(
      `cluster ${name}`,
      ["npx", "tsx", "bench/miss-path/cluster.ts", JSON.stringify({ capacity: 16 * 1024 ** 3, ...worker }), String(flags.latencyMs), String(bandwidth)],
      { echoStderr: true }
    )
    const m = yield* p.waitFor(/^(\{"ready":true.*\})$/m, "120 seconds")
    return { name, ...(JSON.parse(m[1]!) as Omit<Cluster, "name">) } satisfies Cluster
  })

const metrics = (admin: string) =>
  Effect.promise(
    () =>
      new Promise<Record<string, number>>((resolve, reject) => {
        http
          .get(`http://${admin}/metrics`, (res) => {
            let body = ""
            res.setEncoding("utf8")
            res.on("data", (c: string) => (body += c))
            res.on("end", () => {
              const out: Record<string, number> = {}
              for (const line of body.split("\n")) {
                const m = /^(talon_worker_[a-z_]+) ([0-9.e+]+)$/.exec(line)
                if (m) out[m[1]!] = Number(m[2])
              }
              resolve(out)
            })
          })
          .on("error", reject)
      })
  )

/** The origin stub's admin API: reset its counters, or read its most GETs in flight at once since. */
const originAdmin = (origin: string, route: "stats" | "stats/reset") =>
  Effect.promise(
    () =>
      new Promise<{ peakInflight?: { get: number } }>((resolve, reject) => {
        const req = http.request(`${origin}/_talon/${route}`, { method: route === "stats" ? "GET" : "POST" }, (res) => {
          let body = ""
          res.setEncoding("utf8")
          res.on("data", (c: string) => (body += c))
          res.on("end", () => resolve(body === "" ? {} : (JSON.parse(body) as { peakInflight?: { get: number } })))
        })
        req.on("error", reject)
        req.end()
      })
  )

const expected = sampleBytes(0, SIZE)

/** Compares `chunk` with the object at `at`; throws at the first wrong byte. */
const check = (arm: string, at: number, chunk: Uint8Array) => {
  if (at + chunk.length > SIZE || Buffer.compare(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length), expected.subarray(at, at + chunk.length)) !== 0) {
    throw new Error(`${arm}: wrong bytes in [${at}, ${at + chunk.length})`)
  }
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 })

/** GET `[from, to)` of `key` from the origin stub, checking bytes as they come. */
const originRange = (origin: string, key: string, from: number, to: number, arm: string) =>
  new Promise<void>((resolve, reject) => {
    const req = http.get(`${origin}/${BUCKET}/${key}`, { agent, headers: { range: `bytes=${from}-${to - 1}` } }, (res) => {
      if (res.statusCode !== 206 && res.statusCode !== 200) return reject(new Error(`${arm}: origin answered ${res.statusCode}`))
      let at = from
      res.on("data", (c: Buffer) => {
        try {
          check(arm, at, c)
        } catch (e) {
          req.destroy()
          reject(e)
        }
        at += c.length
      })
      res.on("end", () => (at === to ? resolve() : reject(new Error(`${arm}: short body ${at - from} of ${to - from}`))))
      res.on("error", reject)
    })
    req.on("error", reject)
  })

const direct = (origin: string, key: string, streams: number, arm: string) => {
  const piece = Math.ceil(SIZE / streams)
  return Promise.all(Array.from({ length: streams }, (_, i) => originRange(origin, key, i * piece, Math.min(SIZE, (i + 1) * piece), arm)))
}

runDriver(
  Effect.gen(function* () {
    const before = yield* startCluster("before", { originFetchSize: 256 * MiB, originConcurrency: 16, originConcurrencyPerObject: 16, readAhead: 0 })
    const afters: Array<Cluster> = []
    for (const fs of fetchSizes) afters.push(yield* startCluster(`after-${fs / MiB}M`, { originFetchSize: fs }))
    if (flags.noSync) afters.push(yield* startCluster("after-nosync", { syncFills: false }))
    const clusters = [before, ...afters]
    // One file, hard-linked under a fresh key per arm and round in every origin root.
    const source = path.join(before.root, BUCKET, "source.bin")
    fs.mkdirSync(path.dirname(source), { recursive: true })
    fs.writeFileSync(source, expected)
    const link = (c: Cluster, key: string) => {
      const p = path.join(c.root, BUCKET, key)
      fs.mkdirSync(path.dirname(p), { recursive: true })
      fs.linkSync(source, p)
    }
    const clientOf = new Map<string, Effect.Effect.Success<ReturnType<typeof makeTalonClient>>>()
    for (const c of clusters) clientOf.set(c.name, yield* makeTalonClient({ coordinator: c.coordinator }))
    // The worker must be a member before the first read.
    yield* Effect.sleep(Duration.seconds(2))

    const arms = ["direct-1", "direct-8", ...clusters.map((c) => c.name)]
    for (let round = 0; round < flags.rounds; round++) {
      const order = arms.map((_, i) => arms[(i + round) % arms.length]!)
      if (round % 2 === 1) order.reverse()
      for (const arm of order) {
        const key = `r${round}-${arm}.bin`
        const cluster = clusters.find((c) => c.name === arm) ?? afters[0]!
        link(cluster, key)
        const m0 = arm.startsWith("direct") ? undefined : yield* metrics(cluster.admin)
        yield* originAdmin(cluster.origin, "stats/reset")
        const t0 = performance.now()
        if (arm === "direct-1") yield* Effect.promise(() => direct(cluster.origin, key, 1, arm))
        else if (arm === "direct-8") yield* Effect.promise(() => direct(cluster.origin, key, 8, arm))
        else {
          const client = clientOf.get(arm)!
          let at = 0
          const target = `s3://${BUCKET}/${key}`
          yield* Stream.runForEach(client.readStream(target, 0, SIZE), (chunk) =>
            Effect.sync(() => {
              check(arm, at, chunk)
              at += chunk.length
            })
          )
          if (at !== SIZE) throw new Error(`${arm}: read ${at} of ${SIZE} bytes`)
        }
        const seconds = (performance.now() - t0) / 1000
        const peak = (yield* originAdmin(cluster.origin, "stats")).peakInflight?.get
        const record: Record<string, unknown> = { round, arm, bytes: SIZE, seconds: +seconds.toFixed(3), mbps: +(SIZE / 1e6 / seconds).toFixed(1), originPeakGets: peak }
        if (m0 !== undefined) {
          const m1 = yield* metrics(cluster.admin)
          const d = (k: string) => (m1[k] ?? 0) - (m0[k] ?? 0)
          record.originBytesPerByte = +(d("talon_worker_origin_bytes_total") / SIZE).toFixed(3)
          record.originFetches = d("talon_worker_origin_fetches_total")
          record.readAheadBytes = d("talon_worker_read_ahead_bytes_total")
          record.readAheadUnusedBytes = d("talon_worker_read_ahead_unused_bytes_total")
          record.fsyncSeconds = +d("talon_worker_fill_fsync_seconds_total").toFixed(2)
        }
        emit(record)
      }
    }
  })
)

