/**
 * Data-plane load test (`just dataplane-loadtest`): an origin stub, a coordinator
 * and one worker per data plane × serve mode (native/portable × pipelined/
 * multiplexed), plus the C ceiling server as the yardstick, all pinned to CPU 0;
 * the Loadgen service (src/loadgen) in this process, pinned to CPU 1. Every worker is warmed with the whole object
 * (all hits), then for each connection count the arms run in paired,
 * order-swapped rounds. Prints a markdown table and writes bench/data/dataplane_loadtest.json
 * (bench/dataplane-bench.ts, the pound-driven bench, owns bench/data/dataplane.json).
 *
 * Flags (`--help` lists them; each also reads the environment variable it names, e.g. CONNS,
 * DEPTH, SECONDS_PER, WARMUP, ROUNDS, COOLDOWN, ARMS, LOOPS, SIZE, SERVER_CPU, CLIENT_CPU, NO_WRITE).
 */
import { execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Data, Effect, Either } from "effect"
import { type BenchData, BENCH_DATA_SCHEMA, describeMachine, type Row, tableColumns, today } from "./lib/chartsData.js"
import { type Arm, runRounds } from "./lib/rounds.js"
import { Loadgen, loadSpec } from "../src/loadgen/Loadgen.js"
import { parseIntList, parseObject } from "../src/loadgen/options.js"
import { DEFAULT_MACHINE, repoRoot } from "./lib/args.js"
import { buildDist, stubBackendEnv, talonBin } from "./lib/build.js"
import { buildCeiling } from "./lib/ceiling.js"
import { Flag, parseFlags, runDriver } from "./lib/driver.js"
import * as Proc from "./lib/proc.js"
import { warmObject } from "./lib/warm.js"

const root = repoRoot
const flags = await parseFlags("dataplane-loadtest", "Workers per data plane × serve mode and the C ceiling server, driven by the Loadgen service over a sweep of connection counts.", {
  conns: Flag.text("conns", "1,64,256,1024", "Connection counts swept, comma-separated.", "CONNS"),
  depth: Flag.number("depth", 16, "Requests in flight per connection.", "DEPTH"),
  seconds: Flag.number("seconds", 10, "Measured seconds per run.", "SECONDS_PER"),
  warmup: Flag.number("warmup", 3, "Warmup seconds per run.", "WARMUP"),
  rounds: Flag.number("rounds", 2, "Paired rounds per connection count.", "ROUNDS"),
  cooldown: Flag.number("cooldown", 1, "Seconds between runs.", "COOLDOWN"),
  arms: Flag.text("arms", "ceiling,native-pipelined,native-multiplexed,portable-pipelined,portable-multiplexed", "Arms: ceiling or PLANE-MODE, comma-separated.", "ARMS"),
  loops: Flag.number("loops", 1, "Worker --loops.", "LOOPS"),
  size: Flag.size("size", "64M", "Object size.", "SIZE"),
  serverCpu: Flag.text("server-cpu", "0", "CPUs the servers are pinned to.", "SERVER_CPU"),
  clientCpu: Flag.text("client-cpu", "1", "CPUs the load generator (this process) is pinned to.", "CLIENT_CPU"),
  startupTimeout: Flag.number("startup-timeout", 180, "Seconds a server gets to say it listens.", "STARTUP_TIMEOUT"),
  machine: Flag.text("machine", DEFAULT_MACHINE, "Machine description recorded in the data file.", "MACHINE"),
  noWrite: Flag.bool("no-write", "Print only; do not write bench/data/dataplane_loadtest.json (or set NO_WRITE=1).")
})
const orDie = <A>(e: Either.Either<A, string>): A =>
  Either.getOrElse(e, (msg) => {
    console.error(msg)
    return process.exit(2)
  })
const CONNS = orDie(parseIntList("--conns", flags.conns))
const DEPTH = flags.depth
const SECONDS = flags.seconds
const WARMUP = flags.warmup
const ROUNDS = flags.rounds
const COOLDOWN = flags.cooldown
const LOOPS = flags.loops
const SIZE = flags.size
const SERVER_CPU = flags.serverCpu
const CLIENT_CPU = flags.clientCpu
const ARMS = flags.arms.split(",")
const NO_WRITE = flags.noWrite || (process.env["NO_WRITE"] ?? "") !== ""
const RANGE = 65536
const STARTUP_TIMEOUT_S = flags.startupTimeout
const BUCKET = "bench"
const KEY = "dataplane/blob"
const OBJECT = `s3://${BUCKET}/${KEY}`

class BenchFailed extends Data.TaggedError("BenchFailed")<{ readonly message: string }> {}

interface Server {
  readonly name: string
  readonly addr: string
  readonly pids: ReadonlyArray<number>
  readonly plane: string
  readonly mode: string
}


/** Starts a pinned child (stopped with the driver's scope) and returns the first match of `ready` in its output. */
const startChild = (label: string, cmd: ReadonlyArray<string>, ready: RegExp, extraEnv: Record<string, string> = {}) =>
  Effect.gen(function* () {
    const child = yield* Proc.spawn(label, cmd, { cpus: SERVER_CPU, env: extraEnv })
    // A child that never says it is ready (a changed log line, a hang) must not hang the bench.
    const match = yield* child.waitFor(ready, `${STARTUP_TIMEOUT_S} seconds`)
    return { child, match }
  })

/** Reads the whole object through a worker, so every later read is a hit. */
const warm = (addr: string): Effect.Effect<void, BenchFailed> =>
  warmObject(addr.slice(0, addr.lastIndexOf(":")), Number(addr.slice(addr.lastIndexOf(":") + 1)), BUCKET, KEY, SIZE).pipe(
    Effect.mapError((message) => new BenchFailed({ message: `warming ${addr}: ${message}` }))
  )

interface Result {
  readonly rps: number
  readonly p50_us: number
  readonly p90_us: number
  readonly p99_us: number
  readonly p999_us: number
  readonly max_us: number
  readonly cpu_percent: number
  readonly kernel_share: number
  readonly cpu_us_per_req: number
  readonly rss_kb: number
  readonly client_cores: number
  readonly samples: number
  readonly errors: number
}

const OBJECT_ID = orDie(parseObject("object", OBJECT, "s3", undefined))

/** One run of the Loadgen service against `server`; a run with errors fails the bench. */
const loadgen = (server: Server, conns: number): Effect.Effect<Result, BenchFailed, Loadgen> =>
  Effect.gen(function* () {
    const [host, port] = [server.addr.slice(0, server.addr.lastIndexOf(":")), Number(server.addr.slice(server.addr.lastIndexOf(":") + 1))]
    const spec = loadSpec({ host, port, object: OBJECT_ID, size: SIZE, conns, depth: DEPTH, range: RANGE, seconds: SECONDS, warmup: WARMUP, serverPids: server.pids })
    const r = yield* (yield* Loadgen).runChecked(spec).pipe(
      Effect.mapError((e) => new BenchFailed({ message: `loadgen against ${server.name} (${conns} conns) failed: ${e.message}` }))
    )
    const n = (v: number | null) => v ?? NaN
    return {
      rps: r.rps,
      p50_us: n(r.p50_us),
      p90_us: n(r.p90_us),
      p99_us: n(r.p99_us),
      p999_us: n(r.p999_us),
      max_us: n(r.max_us),
      cpu_percent: n(r.cpu_percent),
      kernel_share: n(r.kernel_share),
      cpu_us_per_req: n(r.cpu_us_per_req),
      rss_kb: n(r.rss_kb),
      client_cores: r.client_cores,
      samples: r.samples,
      errors: r.errors
    }
  })

const r2 = (x: number) => Math.round(x * 100) / 100

const main = Effect.gen(function* () {
  buildDist()
  // Loadgen threads start later and inherit the affinity of the thread that creates them.
  execFileSync("taskset", ["-a", "-pc", CLIENT_CPU, String(process.pid)], { stdio: "ignore" })
  const dir = mkdtempSync(join(tmpdir(), "dataplane-loadtest-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  const originRoot = join(dir, "origin")
  mkdirSync(join(originRoot, BUCKET, "dataplane"), { recursive: true })
  const blob = join(originRoot, BUCKET, "dataplane", "blob")
  writeFileSync(blob, randomBytes(SIZE))

  const origin = yield* startChild("origin", [...talonBin(), "origin", "--root", originRoot, "--port", "0"], /listening on (http:\/\/[\d.]+:\d+)/)
  const backendEnv = stubBackendEnv(origin.match[1]!)
  const coordinator = yield* startChild(
    "coordinator",
    [...talonBin("coordinator"), "coordinator", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"],
    /coordinator control on ([\d.]+:\d+)/,
    backendEnv
  )
  const coord = coordinator.match[1]!
  console.log(`origin ${origin.match[1]}, coordinator ${coord}; object ${OBJECT} (${SIZE} bytes)`)

  const servers: Array<Server> = []
  for (const arm of ARMS) {
    if (arm === "ceiling") {
      const tools = buildCeiling(join(dir, "ceiling-bin"))
      const c = yield* startChild("ceiling", [tools.ceiling, "--listen", "127.0.0.1:0", "--file", blob], /listening on ([\d.]+:\d+) pid (\d+)/)
      servers.push({ name: "ceiling", addr: c.match[1]!, pids: [Number(c.match[2])], plane: "C epoll+sendfile", mode: "pipelined" })
      continue
    }
    const [plane, mode] = arm.split("-")
    if (!plane || !mode) return yield* Effect.fail(new BenchFailed({ message: `ARMS: ${arm} is not ceiling or PLANE-MODE` }))
    const w = yield* startChild(
      arm,
      [
        ...talonBin("worker"), "worker", "--id", `bench-${arm}`, "--data-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
        "--coordinator", coord, "--cache-dir", join(dir, `cache-${arm}`), "--data-plane", plane, "--serve-mode", mode,
        "--loops", String(LOOPS)
      ],
      /worker data listener on ([\d.]+:\d+) \((\w+) plane, (\w+) mode(?:[^)]*pids ([\d, ]+))?\)/,
      backendEnv
    )
    if (w.match[2] !== plane) {
      return yield* Effect.fail(new BenchFailed({ message: `${arm}: the worker runs the ${w.match[2]} plane, not ${plane}` }))
    }
    const pids = (w.match[4] ?? "").split(",").filter((p) => p.trim() !== "").map((p) => Number(p.trim()))
    servers.push({ name: arm, addr: w.match[1]!, pids: [...new Set([w.child.pid, ...pids])], plane, mode })
  }
  for (const s of servers) {
    yield* warm(s.addr)
    console.log(`${s.name}: ${s.addr} (pids ${s.pids.join(", ")}) warmed`)
  }

  const baseline = servers.some((s) => s.name === "ceiling") ? "ceiling" : servers[0]!.name
  const runs: Array<Row> = []
  const summary: Array<Row> = []
  const ratios: Array<Row> = []
  for (const conns of CONNS) {
    const arms: Array<Arm<Result, BenchFailed, Loadgen>> = servers.map((s) => ({ name: s.name, run: () => loadgen(s, conns) }))
    const report = yield* runRounds(arms, {
      rounds: ROUNDS,
      coolDown: `${COOLDOWN} seconds`,
      baseline,
      onRun: (r) =>
        Effect.sync(() =>
          console.log(`${conns}×${DEPTH} round ${r.round} ${r.arm.padEnd(21)} rps ${r.result.rps.toFixed(0).padStart(7)}  p99 ${r.result.p99_us} µs  srv ${r.result.cpu_us_per_req} µs/req`)
        )
    })
    for (const r of report.runs) runs.push({ conns, depth: DEPTH, round: r.round, position: r.position, arm: r.arm, ...(r.result as unknown as Row) })
    for (const s of servers) {
      const m = report.summary[s.name]!
      summary.push({
        conns,
        depth: DEPTH,
        arm: s.name,
        plane: s.plane,
        mode: s.mode,
        rounds: m["rps"]!.n,
        rps: Math.round(m["rps"]!.median),
        rps_min: Math.round(m["rps"]!.min),
        rps_max: Math.round(m["rps"]!.max),
        p50_us: m["p50_us"]!.median,
        p99_us: m["p99_us"]!.median,
        max_us: m["max_us"]!.median,
        cpu_percent: r2(m["cpu_percent"]!.median),
        kernel_share: r2(m["kernel_share"]!.median),
        cpu_us_per_req: r2(m["cpu_us_per_req"]!.median),
        rss_mib: r2(m["rss_kb"]!.median / 1024),
        client_cores: r2(m["client_cores"]!.median)
      })
      const q = report.ratios[s.name]
      if (q) {
        ratios.push({
          conns,
          depth: DEPTH,
          arm: s.name,
          baseline,
          rps_ratio: r2(q["rps"]!.median),
          cpu_per_req_ratio: r2(q["cpu_us_per_req"]!.median),
          p99_ratio: r2(q["p99_us"]!.median),
          rps_ratio_per_round: q["rps"]!.perRound.map((v) => v.toFixed(3)).join(" ")
        })
      }
    }
  }

  console.log("\n| conns | arm | plane | mode | rps | p50 µs | p99 µs | CPU % | kernel | µs/req | RSS MiB |")
  console.log("|--:|---|---|---|--:|--:|--:|--:|--:|--:|--:|")
  for (const s of summary) {
    console.log(`| ${s["conns"]} | ${s["arm"]} | ${s["plane"]} | ${s["mode"]} | ${s["rps"]} | ${s["p50_us"]} | ${s["p99_us"]} | ${s["cpu_percent"]} | ${s["kernel_share"]} | ${s["cpu_us_per_req"]} | ${s["rss_mib"]} |`)
  }
  if (ratios.length > 0) {
    console.log(`\n| conns | arm | rps / ${baseline} | CPU per req / ${baseline} | p99 / ${baseline} |`)
    console.log("|--:|---|--:|--:|--:|")
    for (const r of ratios) console.log(`| ${r["conns"]} | ${r["arm"]} | ${r["rps_ratio"]} | ${r["cpu_per_req_ratio"]} | ${r["p99_ratio"]} |`)
  }

  const data: BenchData = {
    schema: BENCH_DATA_SCHEMA,
    id: "dataplane_loadtest",
    title: `Worker data plane: ${SIZE / 2 ** 20} MiB object, 64 KiB ranges, all hits, depth ${DEPTH}`,
    measures:
      "GetRange throughput, latency percentiles and server CPU/RSS of one worker per data plane × serve mode, against the C ceiling server, " +
      "server pinned to CPU 0 and talon loadgen to CPU 1, all reads hitting the worker's cache. It does not measure misses, the origin, placement, or more than one worker.",
    caveats: [
      "On a 2-core machine the client core can be the limit at 64+ connections: compare server CPU per request as well as rps.",
      "The VM is shared with other work; arms are compared per round (ratios to the ceiling), never across rounds.",
      "CPU is sampled from /proc in 10 ms ticks; short windows make CPU numbers coarse."
    ],
    command: `npx tsx bench/dataplane-loadtest.ts --conns ${CONNS.join(",")} --depth ${DEPTH} --seconds ${SECONDS} --rounds ${ROUNDS} --loops ${LOOPS}`,
    date: today(),
    machine: describeMachine(flags.machine),
    params: { depth: DEPTH, range: RANGE, object_size: SIZE, seconds: SECONDS, warmup: WARMUP, rounds: ROUNDS, loops: LOOPS, baseline },
    runs,
    summary,
    ratios,
    charts: [
      { id: "rps", title: "rps by connections", data: "summary", mark: "line", x: { field: "conns", title: "connections", type: "ordinal" }, y: { field: "rps", title: "requests / s" }, color: "arm" },
      { id: "cpu", title: "server CPU per request", data: "summary", mark: "line", x: { field: "conns", title: "connections", type: "ordinal" }, y: { field: "cpu_us_per_req", title: "µs of server CPU / request" }, color: "arm" },
      { id: "p99", title: "p99 latency", data: "summary", mark: "line", x: { field: "conns", title: "connections", type: "ordinal" }, y: { field: "p99_us", title: "p99 µs", scale: "log" }, color: "arm" }
    ],
    tables: [
      {
        id: "summary",
        title: "Medians over rounds",
        data: "summary",
        columns: [
          ...tableColumns({ conns: "conns", arm: "arm", rps: "rps", p50_us: "p50 µs", p99_us: "p99 µs" }),
          ...tableColumns({ cpu_percent: "CPU %" }, 1),
          ...tableColumns({ kernel_share: "kernel" }, 2),
          ...tableColumns({ cpu_us_per_req: "µs/req", rss_mib: "RSS MiB" }, 1)
        ]
      },
      {
        id: "ratios",
        title: `Per-round ratios to ${baseline} (median)`,
        data: "ratios",
        columns: [
          ...tableColumns({ conns: "conns", arm: "arm" }),
          ...tableColumns({ rps_ratio: "rps", cpu_per_req_ratio: "CPU/req", p99_ratio: "p99" }, 2),
          ...tableColumns({ rps_ratio_per_round: "rps per round" })
        ]
      }
    ]
  }
  if (!NO_WRITE) {
    const path = join(root, "bench", "data", "dataplane_loadtest.json")
    writeFileSync(path, JSON.stringify(data, null, 2) + "\n")
    console.log(`wrote ${path}`)
  }
})

runDriver(Effect.provide(main, Loadgen.layer))
