/**
 * Client- and gateway-side read-ahead, before vs after, on cold objects: a cluster
 * (origin stub with a fixed first-byte latency and a per-response bandwidth cap,
 * coordinator, workers) in one child process, two gateways in their own (one with the
 * embedded client's read-ahead off, one with it on), and the readers here.
 *
 *   npx tsx bench/readahead-bench.ts --size 256M --block-size 8M --rounds 2
 *
 * Arms, each on a fresh cold object (a hard link of one template, so the workers hold
 * nothing of it), every byte checked against the template's SHA-256:
 *   origin-1     one GET straight from the origin (the reference)
 *   stream       TalonClient.readStream of the whole object
 *   loop-1M      a loop of 1 MiB TalonClient.read calls (a data loader, a FUSE mount)
 *   gateway      one GET of the whole object through the gateway (cache route)
 * "before" is `readAheadBytes: 0` (the read path as it was: `parallelism` pieces in
 * flight, no read-ahead across calls), "after" the defaults. Rounds alternate which of
 * the pair goes first. Results: one JSON line per measurement, and bench/data/raw/readahead.json.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { Duration, Effect, Stream } from "effect"
import { makeTalonClient, type TalonClientShape } from "../src/client/TalonClient.js"
import { LocalCluster } from "../src/cluster/LocalCluster.js"
import { parseSize } from "../src/core/size.js"
import { sampleBytes } from "../src/origin/seed.js"
import { repoRoot } from "./lib/args.js"
import { Flag, parseFlags, runDriver } from "./lib/driver.js"
import * as Proc from "./lib/proc.js"

const MiB = 1024 * 1024

const parseSizeOrThrow = (text: string): number => {
  const n = parseSize(text)
  if (n._tag === "Left") throw new Error(`--read-ahead: ${n.left}`)
  return n.right
}
const BUCKET = "rabench"

const flags = await parseFlags("readahead-bench", "Client/gateway read-ahead before vs after on cold objects over a slow origin.", {
  size: Flag.size("size", "256M", "Object size."),
  blockSize: Flag.size("block-size", "8M", "Block size of the workers and clients."),
  pageSize: Flag.size("page-size", "1M", "Worker page size."),
  workers: Flag.number("workers", 2, "Workers."),
  rounds: Flag.number("rounds", 2, "Rounds (each arm's pair order alternates between rounds)."),
  latencyMs: Flag.number("latency-ms", 30, "Origin first-byte latency per request."),
  bandwidth: Flag.size("bandwidth", "100M", "Origin bandwidth cap per response, bytes/s."),
  readAhead: Flag.text("read-ahead", "", "The after arms' readAheadBytes (e.g. 64M; '' = the client's default)."),
  arms: Flag.text("arms", "origin-1,stream,loop-1M,gateway", "Comma-separated arms."),
  out: Flag.text("out", "bench/data/raw/readahead.json", "Data file ('' = none)."),
  serve: Flag.text("serve", "", "(internal) run the cluster over this directory and print its addresses."),
  machine: Flag.machine()
})

const afterReadAhead = flags.readAhead === "" ? undefined : parseSizeOrThrow(flags.readAhead)

const emit = (record: Record<string, unknown>) => console.log(JSON.stringify({ bench: "readahead", ...record }))

/** The child: the cluster, with the origin slowed down, until it is stopped. */
const serveCluster = (dir: string) =>
  Effect.gen(function* () {
    const cluster = yield* LocalCluster.make({
      dir,
      keep: true,
      ephemeral: true,
      workers: flags.workers,
      worker: { blockSize: flags.blockSize, pageSize: flags.pageSize },
      gateway: false
    })
    yield* cluster.origin.setFaults({ latency: { kind: "fixed", ms: flags.latencyMs }, bandwidthBytesPerSec: flags.bandwidth })
    console.log(`CLUSTER ${JSON.stringify({ coordinator: cluster.coordinator.controlAddress, origin: cluster.origin.url })}`)
    return yield* Effect.never
  })

interface Reading {
  readonly bytes: number
  readonly sha: string
  readonly ms: number
}

const hashing = () => {
  const h = createHash("sha256")
  let bytes = 0
  return {
    add: (b: Uint8Array) => {
      h.update(b)
      bytes += b.length
    },
    done: (t0: number): Reading => ({ bytes, sha: h.digest("hex"), ms: performance.now() - t0 })
  }
}

const httpRead = (base: string, p: string): Promise<Reading> =>
  new Promise((resolve, reject) => {
    const t0 = performance.now()
    const h = hashing()
    http
      .get(`${base}${p}`, (res) => {
        if (res.statusCode !== 200) reject(new Error(`GET ${base}${p}: HTTP ${res.statusCode}`))
        res.on("data", (c: Buffer) => h.add(c))
        res.on("end", () => resolve(h.done(t0)))
        res.on("error", reject)
      })
      .on("error", reject)
  })

const streamRead = (client: TalonClientShape, uri: string) =>
  Effect.gen(function* () {
    const t0 = performance.now()
    const h = hashing()
    yield* Stream.runForEach(client.readStream(uri, 0, flags.size), (b) => Effect.sync(() => h.add(b)))
    return h.done(t0)
  })

const loopRead = (client: TalonClientShape, uri: string) =>
  Effect.gen(function* () {
    const t0 = performance.now()
    const h = hashing()
    for (let at = 0; at < flags.size; at += MiB) h.add(yield* client.read(uri, at, MiB))
    return h.done(t0)
  })

const main = Effect.gen(function* () {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "readahead-bench-"))),
    (d) => Effect.sync(() => fs.rmSync(d, { recursive: true, force: true }))
  )
  // The template: deterministic bytes, written once; every arm reads a hard link of it.
  const bucketDir = path.join(dir, "origin", BUCKET)
  fs.mkdirSync(bucketDir, { recursive: true })
  const template = path.join(bucketDir, "template.bin")
  const fd = fs.openSync(template, "w")
  const expected = createHash("sha256")
  for (let at = 0; at < flags.size; at += 16 * MiB) {
    const b = sampleBytes(at, Math.min(16 * MiB, flags.size - at))
    fs.writeSync(fd, b)
    expected.update(b)
  }
  fs.closeSync(fd)
  const sha = expected.digest("hex")
  let serial = 0
  const freshKey = () => {
    const key = `obj-${process.pid}-${serial++}.bin`
    fs.linkSync(template, path.join(bucketDir, key))
    return key
  }

  const self = path.join(repoRoot, "bench/readahead-bench.ts")
  const common = ["--block-size", String(flags.blockSize), "--page-size", String(flags.pageSize), "--workers", String(flags.workers)]
  const clusterProc = yield* Proc.spawn("cluster", [process.execPath, "--import", "tsx", self, "--serve", dir, "--latency-ms", String(flags.latencyMs), "--bandwidth", String(flags.bandwidth), ...common])
  const addresses = JSON.parse((yield* clusterProc.waitFor(/CLUSTER (\{.*\})/, "180 seconds"))[1]!) as { coordinator: string; origin: string }

  const gateway = (readAheadBytes: number | undefined) =>
    Effect.gen(function* () {
      const env: Record<string, string> = { TALON_S3_ENDPOINT: addresses.origin, TALON_S3_ACCESS_KEY_ID: "talon", TALON_S3_SECRET_ACCESS_KEY: "talon-secret" }
      if (readAheadBytes !== undefined) env.TALON_CLIENT_READ_AHEAD_BYTES = String(readAheadBytes)
      const gw = yield* Proc.spawn(
        `gateway-${readAheadBytes ?? "default"}`,
        [process.execPath, "--import", "tsx", path.join(repoRoot, "src/gateway/main.ts"), "--listen", "127.0.0.1:0", "--route", "cache", "--auth", "off", "--coordinator", addresses.coordinator, "--block-size", String(flags.blockSize)],
        { env }
      )
      return `http://127.0.0.1:${(yield* gw.waitFor(/listening on http:\/\/127\.0\.0\.1:(\d+)/, "180 seconds"))[1]}`
    })
  const arms = new Set(flags.arms.split(","))
  const gwBefore = arms.has("gateway") ? yield* gateway(0) : ""
  const gwAfter = arms.has("gateway") ? yield* gateway(afterReadAhead) : ""
  const before = yield* makeTalonClient({ coordinator: addresses.coordinator, blockSize: flags.blockSize, readAheadBytes: 0 })
  const after = yield* makeTalonClient({
    coordinator: addresses.coordinator,
    blockSize: flags.blockSize,
    ...(afterReadAhead === undefined ? {} : { readAheadBytes: afterReadAhead })
  })
  // Warm-up: the clients' membership, the gateways' first requests, JIT; on objects not measured.
  for (const c of [before, after]) yield* c.read(`s3://${BUCKET}/${freshKey()}`, 0, MiB)
  for (const g of [gwBefore, gwAfter]) if (g !== "") yield* Effect.promise(() => httpRead(g, `/${BUCKET}/${freshKey()}`))

  const records: Array<Record<string, unknown>> = []
  const measure = (arm: string, variant: string, round: number, run: (key: string) => Effect.Effect<Reading, unknown>) =>
    Effect.gen(function* () {
      const key = freshKey()
      const r = yield* run(key)
      const ok = r.bytes === flags.size && r.sha === sha
      const record = { arm, variant, round, bytes: r.bytes, ms: Math.round(r.ms), mb_s: Math.round((r.bytes / 1e6 / (r.ms / 1000)) * 10) / 10, bytes_ok: ok }
      emit(record)
      records.push(record)
      if (!ok) return yield* Effect.fail(new Error(`${arm}/${variant} round ${round}: wrong bytes (${r.bytes} bytes, sha ${r.sha})`))
      return record
    })

  const readAhead = after.readAhead
  for (let round = 0; round < flags.rounds; round++) {
    if (arms.has("origin-1")) yield* measure("origin-1", "direct", round, (key) => Effect.promise(() => httpRead(addresses.origin, `/${BUCKET}/${key}`)))
    const pair = (arm: string, b: (key: string) => Effect.Effect<Reading, unknown>, a: (key: string) => Effect.Effect<Reading, unknown>) =>
      Effect.gen(function* () {
        if (!arms.has(arm)) return
        const order: Array<["before" | "after", (key: string) => Effect.Effect<Reading, unknown>]> = [["before", b], ["after", a]]
        if (round % 2 === 1) order.reverse()
        for (const [variant, run] of order) yield* measure(arm, variant, round, run)
      })
    yield* pair("stream", (k) => streamRead(before, `s3://${BUCKET}/${k}`), (k) => streamRead(after, `s3://${BUCKET}/${k}`))
    yield* pair("loop-1M", (k) => loopRead(before, `s3://${BUCKET}/${k}`), (k) => loopRead(after, `s3://${BUCKET}/${k}`))
    yield* pair("gateway", (k) => Effect.promise(() => httpRead(gwBefore, `/${BUCKET}/${k}`)), (k) => Effect.promise(() => httpRead(gwAfter, `/${BUCKET}/${k}`)))
  }
  const stats = readAhead()
  emit({ readAhead: stats })

  // Per round: after ÷ before for each arm, and after ÷ one origin stream.
  const rate = (arm: string, variant: string, round: number) => records.find((r) => r.arm === arm && r.variant === variant && r.round === round)?.mb_s as number | undefined
  const ratios: Array<Record<string, unknown>> = []
  for (let round = 0; round < flags.rounds; round++) {
    for (const arm of ["stream", "loop-1M", "gateway"]) {
      const b = rate(arm, "before", round)
      const a = rate(arm, "after", round)
      const o = rate("origin-1", "direct", round)
      if (a === undefined || b === undefined) continue
      const r = { arm, round, after_over_before: Math.round((a / b) * 100) / 100, after_over_origin_1: o === undefined ? null : Math.round((a / o) * 100) / 100, before_over_origin_1: o === undefined ? null : Math.round((b / o) * 100) / 100 }
      emit(r)
      ratios.push(r)
    }
  }
  if (flags.out !== "") {
    fs.mkdirSync(path.dirname(path.resolve(repoRoot, flags.out)), { recursive: true })
    fs.writeFileSync(
      path.resolve(repoRoot, flags.out),
      JSON.stringify(
        {
          bench: "readahead",
          command: `npx tsx bench/readahead-bench.ts ${flags.argv.join(" ")}`,
          machine: flags.machine,
          note: "2 cores shared with other builds and tests; compare ratios within a round",
          settings: { readAheadAfter: afterReadAhead ?? "default", size: flags.size, blockSize: flags.blockSize, pageSize: flags.pageSize, workers: flags.workers, latencyMs: flags.latencyMs, bandwidth: flags.bandwidth },
          records,
          ratios,
          readAhead: stats
        },
        null,
        2
      ) + "\n"
    )
  }
  yield* Effect.sleep(Duration.millis(10))
})

if (flags.serve !== "") runDriver(serveCluster(flags.serve))
else runDriver(main)
