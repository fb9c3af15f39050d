/**
 * `just mixed-bench`: the mixed hit/miss study Talon left open (issue #22 part 4). Two workers
 * of one cluster, one in `--serve-mode pipelined` and one in `--serve-mode multiplexed`, driven
 * by the Loadgen service (this process) at 0, 1, 10 and 50 % misses × depth 1 and 16, against an
 * origin stub whose every response is delayed lognormally (median 30 ms). Hits read a warmed
 * object; misses read offsets of a fresh object per run that no one read before (`--miss-object`,
 * spaced `--miss-stride` apart so no two misses share a page and no read-ahead sees a sequence),
 * so loadgen knows which requests were misses and reports their latencies apart.
 * Paired order-swapped rounds per case (bench/lib/rounds.ts).
 *
 *   npx tsx bench/mixed-bench.ts [--quick] [--shares 0,0.01,0.1,0.5] [--depths 1,16] [--conns 8]
 *       [--seconds 8] [--warmup 2] [--rounds 3] [--latency-ms 30] [--sigma 1] [--no-pin] [--no-write]
 *
 * Writes bench/data/mixed.json: hit/miss p50/p99, rps, server CPU per request, per-round ratios
 * multiplexed / pipelined, which mode each case calls for, and the issue's target judged.
 */
import { execFileSync } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, truncateSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Data, Effect, Either } from "effect"
import { Loadgen, loadSpec } from "../src/loadgen/Loadgen.js"
import { parseIntList, parseObject } from "../src/loadgen/options.js"
import { sampleBytes } from "../src/origin/seed.js"
import { type BenchData, BENCH_DATA_SCHEMA, describeMachine, type Row, tableColumns, today } from "./lib/chartsData.js"
import { type Arm, runRounds } from "./lib/rounds.js"
import { repoRoot } from "./lib/args.js"
import { buildDist, stubBackendEnv, talonBin } from "./lib/build.js"
import { Flag, parseFlags, runDriver } from "./lib/driver.js"
import * as Proc from "./lib/proc.js"
import { warmObject } from "./lib/warm.js"
import { compare, type Comparison, judgeTarget, medianOf, type MixedResult, pickMode } from "./mixed/verdict.js"

const flags = await parseFlags("mixed-bench", "Pipelined vs multiplexed serve mode under mixed cache hits and origin misses, paired order-swapped rounds.", {
  quick: Flag.bool("quick", "A couple of minutes: 3 s runs, 1 s warmup, 2 rounds (explicit flags still win)."),
  shares: Flag.text("shares", "0,0.01,0.1,0.5", "Miss shares, comma-separated (0 ≤ share < 1)."),
  depths: Flag.text("depths", "1,16", "Requests in flight per connection, comma-separated."),
  conns: Flag.number("conns", 8, "Connections per run."),
  range: Flag.size("range", "64K", "Bytes per request."),
  seconds: Flag.number("seconds", 0, "Measured seconds per run (default 8; --quick 3)."),
  warmup: Flag.number("warmup", 0, "Warmup seconds per run (default 2; --quick 1)."),
  rounds: Flag.number("rounds", 0, "Paired rounds per case (default 3; --quick 2)."),
  latencyMs: Flag.number("latency-ms", 30, "Median of the origin's lognormal response delay, ms."),
  sigma: Flag.number("sigma", 1, "Sigma of the origin's lognormal delay (the stub's --latency-tail lognormal uses 1)."),
  pageSize: Flag.size("page-size", "64K", "The workers' --page-size (a miss fetches at least one page)."),
  missStride: Flag.size("miss-stride", "4M", "Distance between miss offsets."),
  cooldown: Flag.number("cooldown", 1, "Pause between runs, seconds."),
  noPin: Flag.bool("no-pin", "Do not pin servers to CPU 0 and the load generator to CPU 1."),
  noWrite: Flag.bool("no-write", "Print only; do not write bench/data/mixed.json."),
  machine: Flag.machine()
})

class MixedBenchFailed extends Data.TaggedError("MixedBenchFailed")<{ readonly message: string }> {}

const orDie = <A>(e: Either.Either<A, string>): A =>
  Either.getOrElse(e, (msg) => {
    console.error(msg)
    return process.exit(2)
  })
const mode = flags.quick ? "quick" : "full"
const shares = flags.shares.split(",").map((s) => Number(s.trim()))
if (shares.some((s) => !Number.isFinite(s) || s < 0 || s >= 1)) {
  console.error(`--shares: want numbers in [0, 1), got ${JSON.stringify(flags.shares)}`)
  process.exit(2)
}
const depths = orDie(parseIntList("--depths", flags.depths))
const seconds = flags.seconds || (flags.quick ? 3 : 8)
const warmup = flags.warmup || (flags.quick ? 1 : 2)
const rounds = flags.rounds || (flags.quick ? 2 : 3)
const pin = !flags.noPin
const BUCKET = "mixedbench"
const HOT_KEY = "hot.bin"
const HOT_SIZE = 64 * 1024 * 1024
/** Sparse: zeros cost the origin nothing to store and a run uses far less than this. */
const MISS_SIZE = 1024 * 1024 * 1024 * 1024
/** Hits must stay hits: the workers trust the hot object's version for the whole bench. */
const VERSION_TTL_MS = 3_600_000
const MODES = ["pipelined", "multiplexed"] as const

interface Server {
  readonly mode: string
  readonly host: string
  readonly port: number
  readonly pids: ReadonlyArray<number>
}

/** Reads the whole hot object through a worker, so every later hot read is a hit. */
const warm = (s: Server): Effect.Effect<void, MixedBenchFailed> =>
  warmObject(s.host, s.port, BUCKET, HOT_KEY, HOT_SIZE).pipe(
    Effect.mapError((message) => new MixedBenchFailed({ message: `warming the ${s.mode} worker: ${message}` }))
  )

const postJson = (url: string, body: unknown): Promise<number> =>
  new Promise((resolve, reject) => {
    const text = JSON.stringify(body)
    const u = new URL(url)
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: "POST", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(text) } }, (res) => {
      res.resume()
      res.on("end", () => resolve(res.statusCode ?? 0))
    })
    req.on("error", reject)
    req.end(text)
  })

const main = Effect.gen(function* () {
  buildDist()
  // Loadgen threads start later and inherit the affinity of the thread that creates them.
  if (pin) execFileSync("taskset", ["-a", "-pc", "1", String(process.pid)], { stdio: "ignore" })
  const dir = mkdtempSync(join(tmpdir(), "mixed-bench-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  const originRoot = join(dir, "origin")
  mkdirSync(join(originRoot, BUCKET, "miss"), { recursive: true })
  const hotFile = join(originRoot, BUCKET, HOT_KEY)
  writeFileSync(hotFile, sampleBytes(0, HOT_SIZE))
  let missObjects = 0
  /** A never-read object for one run's misses: a sparse file, so it costs no disk. */
  const freshMissKey = (): string => {
    const key = `miss/${++missObjects}.bin`
    const file = join(originRoot, BUCKET, key)
    writeFileSync(file, "")
    truncateSync(file, MISS_SIZE)
    return key
  }

  const talon = talonBin()
  const start = (name: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
    Proc.spawn(name, [...talon, ...args], { env, grace: "3 seconds", ...(pin ? { cpus: "0" } : {}) })
  const origin = yield* start("origin", ["origin", "--root", originRoot, "--port", "0"])
  const originUrl = (yield* origin.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)/, "180 seconds"))[1]!
  const faults = { latency: { kind: "lognormal", medianMs: flags.latencyMs, sigma: flags.sigma, maxMs: 5000 }, seed: 7 }
  const set = yield* Effect.promise(() => postJson(`${originUrl}/_talon/faults`, faults))
  if (set !== 200) return yield* Effect.fail(new MixedBenchFailed({ message: `the origin refused the latency setting (HTTP ${set})` }))
  const backendEnv = stubBackendEnv(originUrl)
  const coordinator = yield* start("coordinator", ["coordinator", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"], backendEnv)
  const coord = (yield* coordinator.waitFor(/coordinator control on ([\d.]+:\d+)/, "180 seconds"))[1]!
  const servers: Array<Server> = []
  for (const m of MODES) {
    const w = yield* start(
      m,
      ["worker", "--id", `mixed-${m}`, "--data-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--coordinator", coord, "--cache-dir", join(dir, `cache-${m}`), "--serve-mode", m, "--page-size", String(flags.pageSize)],
      { ...backendEnv, TALON_WORKER_VERSION_TTL_MS: String(VERSION_TTL_MS) }
    )
    const match = yield* w.waitFor(/worker data listener on ([\d.]+):(\d+) \((\w+) plane, (\w+) mode(?:[^)]*pids ([\d, ]+))?\)/, "180 seconds")
    if (match[4] !== m) return yield* Effect.fail(new MixedBenchFailed({ message: `the ${m} worker says it runs in ${match[4]} mode` }))
    const pids = (match[5] ?? "").split(",").filter((p) => p.trim() !== "").map((p) => Number(p.trim()))
    servers.push({ mode: m, host: match[1]!, port: Number(match[2]), pids: [...new Set([w.pid, ...pids])] })
  }
  for (const s of servers) yield* warm(s)
  const hotObject = orDie(parseObject("object", `s3://${BUCKET}/${HOT_KEY}`, "s3", undefined))
  console.log(
    `${mode} run: origin ${originUrl} (lognormal latency, median ${flags.latencyMs} ms, sigma ${flags.sigma}); workers ${servers.map((s) => `${s.mode} ${s.host}:${s.port}`).join(", ")} warmed; ` +
      `${flags.conns} conns, ${flags.range} B ranges, ${seconds} s (+${warmup} s warmup) per run, ${rounds} rounds${pin ? "; servers on CPU 0, loadgen on CPU 1" : ""}`
  )

  const originStats = () =>
    new Promise<{ bytesServed: number; requests: { get: number } }>((resolve, reject) =>
      http
        .get(`${originUrl}/_talon/stats`, (res) => {
          const chunks: Array<Buffer> = []
          res.on("data", (c: Buffer) => chunks.push(c))
          res.on("end", () => resolve(JSON.parse(Buffer.concat(chunks).toString("utf8"))))
          res.on("error", reject)
        })
        .on("error", reject)
    )
  const loadgen = yield* Loadgen
  const measure = (s: Server, share: number, depth: number): Effect.Effect<MixedResult & Row, MixedBenchFailed> =>
    Effect.gen(function* () {
      const missKey = share > 0 ? freshMissKey() : undefined
      const spec = loadSpec({
        host: s.host,
        port: s.port,
        object: hotObject,
        size: HOT_SIZE,
        conns: flags.conns,
        depth,
        range: flags.range,
        seconds,
        warmup,
        missShare: share,
        missStride: flags.missStride,
        ...(missKey !== undefined ? { missObject: orDie(parseObject("miss", `s3://${BUCKET}/${missKey}`, "s3", undefined)), missSize: MISS_SIZE } : {}),
        verify: hotFile,
        serverPids: s.pids,
        threads: 1
      })
      const before = yield* Effect.promise(originStats)
      const r = yield* loadgen.runChecked(spec).pipe(
        Effect.mapError((e) => new MixedBenchFailed({ message: `loadgen against the ${s.mode} worker (${share * 100} % misses, depth ${depth}): ${e.message}` }))
      )
      const after = yield* Effect.promise(originStats)
      const gets = after.requests.get - before.requests.get
      return {
        rps: r.rps,
        hit_p50_us: r.hit_p50_us ?? r.p50_us,
        hit_p99_us: r.hit_p99_us ?? r.p99_us,
        miss_p50_us: r.miss_p50_us,
        miss_p99_us: r.miss_p99_us,
        p99_us: r.p99_us,
        cpu_us_per_req: r.cpu_us_per_req,
        hit_samples: share > 0 ? r.hit_samples : r.samples,
        miss_samples: r.miss_samples,
        client_cores: r.client_cores,
        // Misses issued (warmup included) vs what the origin saw: shows misses were misses.
        origin_gets: gets,
        origin_kib_per_get: gets === 0 ? 0 : Math.round((after.bytesServed - before.bytesServed) / gets / 1024)
      }
    })

  const runs: Array<Row> = []
  const summary: Array<Row> = []
  const ratios: Array<Row> = []
  const comparisons = new Map<string, Comparison>()
  for (const depth of depths) {
    for (const share of shares) {
      const arms: Array<Arm<MixedResult & Row, MixedBenchFailed>> = servers.map((s) => ({ name: s.mode, run: () => measure(s, share, depth) }))
      const report = yield* runRounds(arms, {
        rounds,
        coolDown: `${flags.cooldown} seconds`,
        baseline: "pipelined",
        // Every metric named, so one with no samples in a run (misses at 0 %) is NaN, not missing.
        metrics: Object.fromEntries(
          (["rps", "hit_p50_us", "hit_p99_us", "miss_p50_us", "miss_p99_us", "p99_us", "cpu_us_per_req", "hit_samples", "miss_samples", "client_cores"] as const).map(
            (k) => [k, (r: MixedResult & Row) => r[k] as number | null]
          )
        ),
        onRun: (r) =>
          Effect.sync(() => {
            const x = r.result
            const us = (v: number | null) => (v === null ? "-" : (v / 1000).toFixed(2))
            console.log(
              `${String(share * 100).padStart(3)} % misses depth ${String(depth).padStart(2)} round ${r.round} ${r.arm.padEnd(11)} rps ${x.rps.toFixed(0).padStart(6)}  ` +
                `hit p50/p99 ${us(x.hit_p50_us)}/${us(x.hit_p99_us)} ms  miss p50/p99 ${us(x.miss_p50_us)}/${us(x.miss_p99_us)} ms  ${x.cpu_us_per_req ?? "-"} µs CPU/req  (${x.hit_samples} hits, ${x.miss_samples} misses; origin ${x["origin_gets"]} GETs of ${x["origin_kib_per_get"]} KiB)`
            )
          })
      })
      const key = `${share}/${depth}`
      const c = compare(report.byArm["multiplexed"]!, report.byArm["pipelined"]!)
      comparisons.set(key, c)
      const label = `${share * 100} % misses, depth ${depth}`
      for (const r of report.runs) runs.push({ miss_share: share, depth, case: label, round: r.round, position: r.position, arm: r.arm, ...r.result })
      for (const arm of report.arms) {
        const s = report.summary[arm]!
        const ms = (m: string) => (Number.isFinite(s[m]!.median) ? Math.round(s[m]!.median / 10) / 100 : null)
        summary.push({
          miss_share: share,
          depth,
          case: label,
          arm,
          rounds: s["rps"]!.n,
          rps: Math.round(s["rps"]!.median),
          rps_min: Math.round(s["rps"]!.min),
          rps_max: Math.round(s["rps"]!.max),
          hit_p50_ms: ms("hit_p50_us"),
          hit_p99_ms: ms("hit_p99_us"),
          miss_p50_ms: ms("miss_p50_us"),
          miss_p99_ms: ms("miss_p99_us"),
          cpu_us_per_req: Number.isFinite(s["cpu_us_per_req"]!.median) ? Math.round(s["cpu_us_per_req"]!.median * 10) / 10 : null
        })
      }
      const r3 = (x: number | null) => (x === null ? null : Math.round(x * 1000) / 1000)
      const perRound = (xs: ReadonlyArray<number>) => xs.map((v) => (Number.isFinite(v) ? v.toFixed(3) : "-")).join(" ")
      const hitP99 = medianOf(c.hitP99)
      const rps = medianOf(c.rps)
      ratios.push({
        miss_share: share,
        depth,
        case: label,
        arm: "multiplexed",
        baseline: "pipelined",
        hit_p99_ratio: r3(hitP99),
        hit_p50_ratio: r3(medianOf(c.hitP50)),
        rps_ratio: r3(rps),
        cpu_ratio: r3(medianOf(c.cpu)),
        hit_p99_per_round: perRound(c.hitP99),
        rps_per_round: perRound(c.rps),
        pick: pickMode(c.hitP99, c.rps),
        // The issue's target lives on its own case's row, so a table can show it from the data.
        target: share === 0.1 && depth === 16 ? judgeTarget(c, share, depth).text : null
      })
    }
  }

  const target = judgeTarget(comparisons.get(`0.1/16`), 0.1, 16)
  console.log("\n| case | mux/pipe hit p99 | hit p50 | rps | CPU/req | per-round hit p99 | per-round rps | pick |")
  console.log("|---|--:|--:|--:|--:|---|---|---|")
  for (const r of ratios) console.log(`| ${r["case"]} | ${r["hit_p99_ratio"]} | ${r["hit_p50_ratio"]} | ${r["rps_ratio"]} | ${r["cpu_ratio"]} | ${r["hit_p99_per_round"]} | ${r["rps_per_round"]} | ${r["pick"]} |`)
  console.log(`\ntarget: ${target.text}`)

  if (flags.noWrite) return
  const data: BenchData = {
    schema: BENCH_DATA_SCHEMA,
    id: "mixed",
    title: `Pipelined vs multiplexed under mixed hits and misses (${mode} run)`,
    measures:
      `One worker per serve mode, ${flags.conns} connections × depth ${depths.join(" and ")}, ${flags.range / 1024} KiB GetRanges; hits read a warmed 64 MiB object, misses a fresh never-read object per run ` +
      `(offsets ${flags.missStride / 1024 / 1024} MiB apart, page size ${flags.pageSize / 1024} KiB), at ${shares.map((s) => `${s * 100} %`).join(", ")} misses; ` +
      `the origin delays every response lognormally (median ${flags.latencyMs} ms, sigma ${flags.sigma}). Hit and miss latency percentiles apart, rps, server CPU per request (from /proc).`,
    caveats: [
      `Mode ${mode}: ${seconds} s measured after ${warmup} s warmup per run, ${rounds} paired order-swapped rounds per case; the 2-vCPU machine was shared with other work, compare per-round ratios.`,
      pin ? "Servers (origin, coordinator, both workers) pinned to CPU 0, the load generator to CPU 1: misses cost origin CPU on the workers' core." : "Nothing pinned.",
      `The workers trust the hot object's version for ${VERSION_TTL_MS / 60000} min, so no hit waits for an origin HEAD; a miss's first request on its object also pays the HEAD.`,
      "At depth 1 each connection has one request in flight, so the serve modes cannot differ in ordering: those cases are the control.",
      `rps counts hits and misses; at high miss shares it is bounded by origin latency × requests in flight (and the worker's origin concurrency), not by the serve loop.`
    ],
    command: `npx tsx bench/mixed-bench.ts${flags.quick ? " --quick" : ""} --shares ${shares.join(",")} --depths ${depths.join(",")} --conns ${flags.conns} --seconds ${seconds} --warmup ${warmup} --rounds ${rounds} --latency-ms ${flags.latencyMs} --sigma ${flags.sigma}${pin ? "" : " --no-pin"}`,
    date: today(),
    machine: describeMachine(flags.machine),
    params: {
      mode,
      shares: shares.join(","),
      depths: depths.join(","),
      conns: flags.conns,
      range: flags.range,
      seconds,
      warmup,
      rounds,
      origin_latency: `lognormal median ${flags.latencyMs} ms sigma ${flags.sigma}`,
      page_size: flags.pageSize,
      miss_stride: flags.missStride,
      pinned: pin,
      target: target.text,
      target_met: target.met
    },
    runs,
    summary,
    ratios,
    charts: [
      {
        id: "hit-p99",
        title: "Hit p99 by case and serve mode (ms, median of rounds)",
        data: "summary",
        mark: "bar",
        x: { field: "case", title: "misses, depth", type: "nominal" },
        y: { field: "hit_p99_ms", title: "hit p99 (ms)", scale: "log" },
        color: "arm"
      },
      {
        id: "rps",
        title: "Requests per second by case and serve mode (median of rounds)",
        data: "summary",
        mark: "bar",
        x: { field: "case", title: "misses, depth", type: "nominal" },
        y: { field: "rps", title: "rps", scale: "log" },
        color: "arm"
      }
    ],
    tables: [
      {
        id: "summary",
        title: "Per serve mode, median over rounds",
        data: "summary",
        columns: [
          ...tableColumns({ case: "case", arm: "mode", rps: "rps" }),
          ...tableColumns({ hit_p50_ms: "hit p50 ms", hit_p99_ms: "hit p99 ms", miss_p50_ms: "miss p50 ms", miss_p99_ms: "miss p99 ms" }, 2),
          ...tableColumns({ cpu_us_per_req: "server CPU µs/req" }, 1)
        ]
      },
      {
        id: "target",
        title: "The issue's target (at 10 % misses, multiplexed hit p99 ≤ 0.1× pipelined at equal or better rps), judged on medians of per-round ratios",
        data: "ratios",
        filter: { case: "10 % misses, depth 16" },
        columns: [...tableColumns({ case: "case" }), ...tableColumns({ hit_p99_ratio: "hit p99", rps_ratio: "rps" }, 3), ...tableColumns({ target: "verdict" })]
      },
      {
        id: "ratios",
        title: "Multiplexed / pipelined, median of per-round ratios, and the mode each case calls for",
        data: "ratios",
        columns: [
          ...tableColumns({ case: "case" }),
          ...tableColumns({ hit_p99_ratio: "hit p99", hit_p50_ratio: "hit p50", rps_ratio: "rps", cpu_ratio: "CPU/req" }, 3),
          ...tableColumns({ hit_p99_per_round: "hit p99 per round", rps_per_round: "rps per round", pick: "pick" })
        ]
      }
    ]
  }
  const out = join(repoRoot, "bench/data/mixed.json")
  writeFileSync(out, JSON.stringify(data, null, 2) + "\n")
  console.log(`wrote ${out}`)
})

runDriver(Effect.provide(main, Loadgen.layer))
