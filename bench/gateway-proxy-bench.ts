/**
 * The gateway as a proxy, four arms in one run — S3 × {cache, origin} and Azure ×
 * {cache, origin} — plus a control arm straight to the origin, all against one origin
 * stub with a realistic, variable latency (lognormal). 1 MiB ranges (aligned, random)
 * of a 64 MiB object, a fixed number of requests per arm per round at a fixed
 * concurrency, paired order-swapped rounds (bench/lib/rounds.ts). Every response is
 * SHA-256-checked: a wrong byte fails the run. Not a CI gate.
 *
 *   npx tsx bench/gateway-proxy-bench.ts [--rounds 5] [--requests 200] [--warmup-requests 1500] [--concurrency 8]
 *       [--latency-ms 50] [--sigma 0.8] [--cooldown 1] [--no-pin] [--no-write] [--arms s3-cache,azure-cache]
 *
 * Processes: origin stub, coordinator, two workers, and one `talon gateway` per route,
 * all pinned to CPU 0; this script (the client) pins itself to CPU 1. Writes
 * bench/data/gateway_proxy.json (unless --no-write) and prints per-run lines, the
 * summary and the verdicts against the targets (cache ≥ 2× origin rps, ≥ 10× lower p99;
 * S3 and Azure within the run-to-run noise of each other).
 *
 * Diagnostics (environment): GW_SLOW=<ms> prints every request slower than that with its
 * position in the run; GW_TRACE=<file> runs the gateways with --trace-gc and writes the
 * cache gateway's output there at exit; GW_NODE_FLAGS adds Node flags to both gateways;
 * GW_PROF=<dir> writes CPU profiles.
 */
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import {
  type BenchData,
  BENCH_DATA_SCHEMA,
  describeMachine,
  medianBarChart,
  ratioTable,
  rowsFromRounds,
  type Row,
  summaryTable,
  today
} from "./lib/chartsData.js"
import { type Arm, runRounds, spread } from "./lib/rounds.js"
import { sampleBytes } from "../src/origin/seed.js"
import {
  ACCOUNT,
  AZ_KEY,
  azureSigner,
  BenchFailed,
  BLOCK,
  BUCKET,
  get,
  KEY,
  type MeasureContext,
  measure,
  type Metrics,
  MiB,
  S3_CREDS,
  s3Signer,
  SIZE
} from "./gateway-proxy/client.js"
import { repoRoot } from "./lib/args.js"
import { buildDist, talonBin } from "./lib/build.js"
import { Flag, parseFlags, runDriver } from "./lib/driver.js"
import * as Proc from "./lib/proc.js"

const flags = await parseFlags("gateway-proxy-bench", "S3 and Azure front ends × cache and origin routes of talon gateway, plus a control arm straight to the origin, in paired order-swapped rounds.", {
  rounds: Flag.number("rounds", 5, "Measured rounds."),
  requests: Flag.number("requests", 200, "Requests per arm per round."),
  warmupRequests: Flag.number("warmup-requests", 1500, "Requests per arm in the discarded warmup round."),
  concurrency: Flag.number("concurrency", 8, "Requests in flight (one connection each)."),
  latencyMs: Flag.number("latency-ms", 50, "Median of the origin's lognormal response delay, ms."),
  sigma: Flag.number("sigma", 0.8, "Sigma of the origin's lognormal delay."),
  cooldown: Flag.number("cooldown", 1, "Pause between runs, seconds."),
  noPin: Flag.bool("no-pin", "Do not pin servers to CPU 0 and this client to CPU 1."),
  arms: Flag.text("arms", "", "Only these arms (comma-separated; for profiling and iteration; writes no data)."),
  noWrite: Flag.bool("no-write", "Print only; do not write bench/data/gateway_proxy.json."),
  machine: Flag.machine()
})
const root = repoRoot
const { rounds, requests, concurrency, latencyMs, sigma, cooldown } = flags
/**
 * Requests per arm in the discarded warmup round. The gateway's per-request code reaches
 * V8's optimizing tier only after a few thousand requests (measured: gateway CPU 2.4-3.0
 * ms/req after 300 warmup requests, 1.6-1.8 after 3000), so a short warmup would measure
 * the JIT, not the gateway a deployment runs for days.
 */
const warmupRequests = flags.warmupRequests
const pin = !flags.noPin
const machineName = flags.machine
/** Downstream version caches (client stat, worker version) are trusted this long; see caveats. */
const VERSION_TTL_MS = 30_000

/** Node flags for the gateways from the diagnostics environment (they go before the script path). */
const gatewayNodeFlags = (): ReadonlyArray<string> => [
  ...(process.env.GW_PROF ? ["--cpu-prof", "--cpu-prof-dir", process.env.GW_PROF] : []),
  ...(process.env.GW_TRACE ? ["--trace-gc"] : []),
  ...(process.env.GW_NODE_FLAGS ? process.env.GW_NODE_FLAGS.split(" ").filter((f) => f !== "") : [])
]

/** Profiling flags write their files at a normal exit: those runs stop gently and get longer to do it. */
const profiling = process.env.GW_PROF !== undefined || /prof/.test(process.env.GW_NODE_FLAGS ?? "")
const start = (name: string, argv: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Proc.spawn(name, argv, { env, grace: profiling ? "20 seconds" : "2 seconds", ...(pin ? { cpus: "0" } : {}) })

const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const s = net.createServer()
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port
      s.close(() => resolve(port))
    })
  })

const main = Effect.gen(function* () {
  const dir = mkdtempSync(join(tmpdir(), "gateway-proxy-bench-"))
  // Added first, so it runs after every process (started later) has been stopped.
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  if (pin) execFileSync("taskset", ["-pc", "1", String(process.pid)], { stdio: "ignore" })

  // The object, and the SHA-256 of every 1 MiB aligned range of it.
  const object = sampleBytes(0, SIZE)
  mkdirSync(join(dir, "origin", BUCKET), { recursive: true })
  writeFileSync(join(dir, "origin", BUCKET, KEY), object)
  const expected = Array.from({ length: SIZE / MiB }, (_, i) => createHash("sha256").update(object.subarray(i * MiB, (i + 1) * MiB)).digest("hex"))

  buildDist()
  // Node, the launcher's flags and bin/talon.mjs: every process runs as `npx talon` runs it.
  const [node, ...talon] = talonBin()
  const originPort = yield* Effect.promise(freePort)
  const origin = yield* start("origin", [node!, ...talon, "origin", "--root", join(dir, "origin"), "--port", String(originPort)])
  const controlPort = yield* Effect.promise(freePort)
  const adminPort = yield* Effect.promise(freePort)
  const originEnv = {
    TALON_S3_ENDPOINT: `http://127.0.0.1:${originPort}`,
    TALON_S3_ACCESS_KEY_ID: "talon",
    TALON_S3_SECRET_ACCESS_KEY: "talon-secret",
    TALON_AZURE_ACCOUNT: "devstoreaccount1",
    TALON_AZURE_ENDPOINT: `http://127.0.0.1:${originPort}/devstoreaccount1`,
    TALON_AZURE_KEY: AZ_KEY
  }
  const coordinator = yield* start(
    "coordinator",
    [node!, ...talon, "coordinator", "--listen", `127.0.0.1:${controlPort}`, "--admin-listen", `127.0.0.1:${adminPort}`],
    originEnv
  )
  const workers = yield* Effect.forEach(["worker-1", "worker-2"], (id) =>
    start(id, [node!, ...talon, "worker", "--cache-dir", join(dir, id)], {
      ...originEnv,
      TALON_WORKER_ID: id,
      TALON_WORKER_COORDINATOR: `127.0.0.1:${controlPort}`,
      TALON_WORKER_DATA_ADDR: "127.0.0.1:0",
      TALON_WORKER_ADMIN_ADDR: "127.0.0.1:0",
      TALON_WORKER_CACHE_DIRS: join(dir, id),
      TALON_WORKER_BLOCK_SIZE: String(BLOCK),
      TALON_WORKER_PAGE_SIZE: String(MiB),
      TALON_WORKER_VERSION_TTL_MS: String(VERSION_TTL_MS)
    })
  )
  const gatewayEnv = {
    ...originEnv,
    TALON_GATEWAY_ACCESS_KEY_ID: S3_CREDS.accessKeyId,
    TALON_GATEWAY_SECRET_ACCESS_KEY: S3_CREDS.secretAccessKey,
    TALON_GATEWAY_AZURE_ACCOUNT: ACCOUNT,
    TALON_GATEWAY_AZURE_KEY: AZ_KEY,
    TALON_CLIENT_STAT_TTL_MS: String(VERSION_TTL_MS)
  }
  const gatewayArgs = (route: string) =>
    // From dist/ like every other process (no tsx loader thread in the measured process).
    [node!, ...gatewayNodeFlags(), ...talon, "gateway", "--listen", "127.0.0.1:0", "--route", route, "--auth", "on", "--coordinator", `127.0.0.1:${controlPort}`, "--block-size", String(BLOCK)]
  const gwCache = yield* start("gateway-cache", gatewayArgs("cache"), gatewayEnv)
  if (process.env.GW_TRACE) {
    const trace = process.env.GW_TRACE
    yield* Effect.addFinalizer(() => Effect.flatMap(Effect.zip(gwCache.stdout, gwCache.stderr), ([o, e]) => Effect.sync(() => writeFileSync(trace, o + e))))
  }
  const gwOrigin = yield* start("gateway-origin", gatewayArgs("origin"), gatewayEnv)

  const urls = yield* Effect.all(
    [
      origin.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)/, "180 seconds"),
      gwCache.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)/, "180 seconds"),
      gwOrigin.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)/, "180 seconds"),
      coordinator.waitFor(/coordinator control on/, "180 seconds")
    ],
    { concurrency: "unbounded" }
  )
  const [originUrl, cacheUrl, originRouteUrl] = [urls[0][1]!, urls[1][1]!, urls[2][1]!]
  const workerLogs = yield* Effect.forEach(workers, (w) => Effect.map(Effect.zip(w.stdout, w.stderr), ([o, e]) => o + e))
  yield* Effect.tryPromise({ catch: (e) => new BenchFailed({ message: (e as Error).message }), try: async () => {
    for (let i = 0; ; i++) {
      const r = await get(`http://127.0.0.1:${adminPort}`, "/api/v1/cluster", {}).catch(() => undefined)
      const members = r ? (JSON.parse(r.body.toString()) as { members: Array<unknown> }).members : []
      if (members.length >= 2) return
      if (i > 1800) throw new Error(`workers did not register:\n${workerLogs.join("\n")}`)
      await new Promise((res) => setTimeout(res, 100))
    }
  } })
  // The origin's latency applies to every request it serves (HEADs, worker fills, reads).
  const faults = { latency: { kind: "lognormal", medianMs: latencyMs, sigma, maxMs: 2000 }, seed: 7 }
  const setFaults = yield* Effect.promise(() =>
    new Promise<number>((resolve, reject) => {
      const body = JSON.stringify(faults)
      const u = new URL(originUrl)
      const req = http.request({ host: u.hostname, port: u.port, method: "POST", path: "/_talon/faults", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
        res.resume()
        res.on("end", () => resolve(res.statusCode ?? 0))
      })
      req.on("error", reject)
      req.end(body)
    })
  )
  if (setFaults !== 200) return yield* Effect.fail(new BenchFailed({ message: `could not set origin faults (${setFaults})` }))
  const originCounts = () =>
    get(originUrl, "/_talon/stats", {}).then((r) => (JSON.parse(r.body.toString()) as { requests: { get: number; head: number } }).requests)

  const serverPids = [origin, coordinator, ...workers, gwCache, gwOrigin].map((p) => p.pid)
  console.log(
    `origin ${originUrl} (lognormal latency, median ${latencyMs} ms, sigma ${sigma}); gateways: cache ${cacheUrl}, origin ${originRouteUrl}; ` +
      `${requests} × 1 MiB per arm per round at concurrency ${concurrency}, ${rounds} rounds${pin ? "; servers on CPU 0, client on CPU 1" : ""}`
  )

  // A 32-bit LCG in integer arithmetic, ranges picked by its high bits. (The earlier
  // `(seed * 1103515245 + 12345) % 2 ** 31` lost its low bits to float rounding and sent
  // ~94% of requests to offset 0: one block, one worker.)
  let seed = 1
  const nextOffset = () => {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0
    return ((seed >>> 16) % (SIZE / MiB)) * MiB
  }

  const ctx: MeasureContext = { concurrency, nextOffset, expected, originCounts, serverPids }
  const allArms: Array<Arm<Metrics, BenchFailed>> = [
    { name: "s3-cache", run: (run) => measure(ctx, cacheUrl, s3Signer(cacheUrl), gwCache.pid, run.warmup ? warmupRequests : requests) },
    { name: "s3-origin", run: (run) => measure(ctx, originRouteUrl, s3Signer(originRouteUrl), gwOrigin.pid, run.warmup ? warmupRequests : requests) },
    { name: "azure-cache", run: (run) => measure(ctx, cacheUrl, azureSigner(), gwCache.pid, run.warmup ? warmupRequests : requests) },
    { name: "azure-origin", run: (run) => measure(ctx, originRouteUrl, azureSigner(), gwOrigin.pid, run.warmup ? warmupRequests : requests) },
    { name: "control-origin", run: (run) => measure(ctx, originUrl, s3Signer(originUrl), origin.pid, run.warmup ? warmupRequests : requests) }
  ]
  // A subset for profiling and iteration; the committed data always has every arm.
  const only = flags.arms
  const arms = only === "" ? allArms : allArms.filter((a) => only.split(",").includes(a.name))

  const report = yield* runRounds(arms, {
    rounds,
    warmupRound: true,
    coolDown: `${cooldown} seconds`,
    baseline: arms.some((a) => a.name === "s3-origin") ? "s3-origin" : arms[0]!.name,
    onRun: (r) =>
      Effect.sync(() =>
        console.log(
          `${r.warmup ? "warmup " : `round ${r.round}`} ${r.arm.padEnd(14)} rps ${String(r.result.rps).padStart(7)}  p50 ${String(r.result.p50_ms).padStart(7)} ms  p99 ${String(r.result.p99_ms).padStart(7)} ms  ` +
            `front ${r.result.front_cpu_ms_per_req} ms/req  servers ${r.result.server_cpu_ms_per_req} ms/req (${r.result.server_cores} cores)  client ${r.result.client_cores} cores  origin GETs/req ${r.result.origin_gets_per_req} HEADs ${r.result.origin_heads} first wave ${r.result.first_wave_ms} ms`
        )
      )
  })

  // Pairs the targets are about, per round: cache vs origin route per protocol, S3 vs Azure per route.
  const pairRatio = (arm: string, baseline: string, metric: keyof Metrics): Row => {
    const a = report.byArm[arm]!
    const b = report.byArm[baseline]!
    const perRound = a.map((x, i) => (b[i]![metric] === 0 ? NaN : (x[metric] as number) / (b[i]![metric] as number)))
    const s = spread(perRound)
    const r3 = (x: number) => (Number.isFinite(x) ? Math.round(x * 1000) / 1000 : null)
    return { arm, baseline, metric, n: s.n, median: r3(s.median), min: r3(s.min), max: r3(s.max), q1: r3(s.q1), q3: r3(s.q3), per_round: perRound.map((v) => r3(v) ?? "-").join(" ") }
  }
  const pairs: Array<Row> = []
  if (only !== "") {
    const s = report.summary
    for (const arm of report.arms) console.log(`${arm}: rps ${s[arm]!["rps"]!.median} p50 ${s[arm]!["p50_ms"]!.median} p99 ${s[arm]!["p99_ms"]!.median} front ${s[arm]!["front_cpu_ms_per_req"]!.median} ms/req`)
    return
  }
  for (const [arm, base] of [["s3-cache", "s3-origin"], ["azure-cache", "azure-origin"], ["azure-cache", "s3-cache"], ["azure-origin", "s3-origin"], ["s3-origin", "control-origin"]] as const) {
    for (const m of ["rps", "p99_ms", "p50_ms", "server_cpu_ms_per_req"] as const) pairs.push(pairRatio(arm, base, m))
  }
  const find = (arm: string, base: string, metric: string) => pairs.find((p) => p.arm === arm && p.baseline === base && p.metric === metric)!
  console.log("\n| arm | rps | MiB/s | p50 ms | p99 ms | front CPU ms/req | server CPU ms/req | server cores |")
  console.log("|---|--:|--:|--:|--:|--:|--:|--:|")
  for (const arm of report.arms) {
    const s = report.summary[arm]!
    const f = (m: string) => `${s[m]!.median} (${s[m]!.min}–${s[m]!.max})`
    console.log(`| ${arm} | ${f("rps")} | ${f("mib_s")} | ${f("p50_ms")} | ${f("p99_ms")} | ${f("front_cpu_ms_per_req")} | ${f("server_cpu_ms_per_req")} | ${f("server_cores")} |`)
  }
  const verdicts: Array<string> = []
  for (const [cache, orig] of [["s3-cache", "s3-origin"], ["azure-cache", "azure-origin"]] as const) {
    const rps = find(cache, orig, "rps").median as number
    const p99 = find(cache, orig, "p99_ms").median as number
    verdicts.push(`${cache} / ${orig}: rps × ${rps} (target ≥ 2: ${rps >= 2 ? "PASS" : "FAIL"}), p99 × ${p99} (target ≤ 0.1: ${p99 <= 0.1 ? "PASS" : "FAIL"})`)
  }
  const az = find("azure-cache", "s3-cache", "rps")
  verdicts.push(`azure-cache / s3-cache rps: median ${az.median}, per-round ${az.per_round} (same-arm spread across rounds: s3-cache ${report.summary["s3-cache"]!["rps"]!.min}–${report.summary["s3-cache"]!["rps"]!.max})`)
  console.log("\n" + verdicts.join("\n"))

  if (flags.noWrite) return
  const rows = rowsFromRounds(report, (m) => ({ ...m }))
  const data: BenchData = {
    schema: BENCH_DATA_SCHEMA,
    id: "gateway_proxy",
    title: `Gateway as a proxy: S3 and Azure front ends × cache and origin routes, 1 MiB ranges, concurrency ${concurrency}`,
    measures:
      `Unmodified S3- and Azure-shaped signed GETs (1 MiB aligned ranges of a 64 MiB object, ${requests} per arm per round, ${concurrency} in flight) through talon gateway on the cache route (two workers) and the origin route, ` +
      `and straight to the origin stub, whose every response is delayed lognormally (median ${latencyMs} ms, sigma ${sigma}, capped at 2 s). rps, MiB/s, latency percentiles, CPU per request of the front process and of all server processes. Every body is SHA-256-checked.`,
    caveats: [
      `Downstream version caches were trusted for ${VERSION_TTL_MS / 1000} s (TALON_CLIENT_STAT_TTL_MS, TALON_WORKER_VERSION_TTL_MS); the gateway's own stat TTL is 1 s, refreshed ahead. Shorter TTLs put an origin HEAD (with its latency) in front of some cache-route reads.`,
      `The cache was warm after the discarded warmup round (${warmupRequests} requests per arm, which also brings the gateways' JIT to steady state): measured cache-route reads are hits (origin_gets_per_req shows it).`,
      "All server processes share CPU 0 and the client has CPU 1 on a 2-vCPU VM shared with other work; absolute rps is this box on that day, compare per-round ratios.",
      `p99 over ${requests} requests per run is set by the run's slowest ${requests - Math.ceil(0.99 * requests) + 1} requests (one stall of the 8 in flight decides it); medians over rounds with min–max are given.`,
      "first_wave_ms: before each run, one unmeasured request per connection opens the connections and, after the idle gap while other arms ran (longer than the gateway's 1 s stat TTL), pays the one origin HEAD a cold stat costs; the slowest of those is reported on its own, outside the run's percentiles.",
      "The client verifies SHA-256 of every body and signs every request (SigV4 or Shared Key), which costs client CPU (client_cores)."
    ],
    command: `npx tsx bench/gateway-proxy-bench.ts --rounds ${rounds} --requests ${requests} --warmup-requests ${warmupRequests} --concurrency ${concurrency} --latency-ms ${latencyMs} --sigma ${sigma}${pin ? "" : " --no-pin"}`,
    date: today(),
    machine: describeMachine(machineName),
    params: {
      object_size: SIZE,
      range: MiB,
      requests_per_arm_per_round: requests,
      warmup_requests_per_arm: warmupRequests,
      concurrency,
      rounds,
      origin_latency: `lognormal median ${latencyMs} ms sigma ${sigma} max 2000 ms`,
      block_size: BLOCK,
      page_size: MiB,
      workers: 2,
      version_ttl_ms: VERSION_TTL_MS,
      pinned: pin
    },
    runs: rows.runs,
    summary: rows.summary,
    ratios: [...rows.ratios, ...pairs],
    charts: [
      medianBarChart({ id: "rps", title: "Requests per second by arm (median of rounds, min–max)", yTitle: "rps", filter: { metric: "rps" } }),
      medianBarChart({ id: "p99", title: "p99 latency by arm (ms, median of rounds, min–max)", yTitle: "p99 (ms)", filter: { metric: "p99_ms" }, scale: "log" })
    ],
    tables: [
      summaryTable({
        title: "Per arm, median over rounds",
        lead: { arm: "arm", metric: "metric" }
      }),
      ratioTable({
        title: "Per-round ratios (arm / baseline)",
        lead: { arm: "arm", baseline: "baseline", metric: "metric" }
      })
    ]
  }
  const out = join(root, "bench/data/gateway_proxy.json")
  writeFileSync(out, JSON.stringify(data, null, 2) + "\n")
  console.log(`wrote ${out}`)
})

runDriver(main)
