/**
 * Data-plane speed against the C yardstick (issue 5, "Targets"): the same C
 * `pound` client drives the C `ceiling` server and `talon worker` arms
 * (native | portable plane × pipelined | multiplexed mode × 1 | 2 loops) on one
 * 64 MiB object, 64 KiB ranges, all hits, in paired order-swapped rounds.
 *
 *   npx tsx bench/dataplane-bench.ts [--rounds 4] [--seconds 5] [--warmup 1] [--cooldown 1]
 *       [--configs 64x16,1x1,64x1,1024x1] [--arms ceiling,native-pipelined,...] [--spin]
 *       [--rounds-64x16 N] [--no-write] [--out bench/data/dataplane.json]
 *
 * Pinning: every server (ceiling, single-loop workers) on CPU 0 and pound on
 * CPU 1 (`taskset`); a `--loops 2` worker gets CPUs 0 and 1, so it shares CPU 1
 * with the client — the only way to give two loops two cores on this machine.
 *
 * CPU and RSS of every arm are sampled by this script over pound's measured
 * window from /proc/<pid>/stat and /proc/<pid>/status, summed over all the
 * arm's processes (a loops=2 worker is a primary and two loops), so all arms
 * are measured the same way; pound's own `--server-pid` numbers (one process)
 * are kept as `pound_*` for a cross-check.
 *
 * Writes bench/data/dataplane.json (BenchData shape, bench/lib/chartsData.ts).
 *
 *   npx tsx bench/dataplane-bench.ts --alloc [--seconds 5] [--configs 16x16]
 *
 * instead measures JS heap allocation per request on the hit path: a worker in
 * this process (pinned to CPU 0) per plane × mode, driven by pound (CPU 1),
 * with v8.GCProfiler over the window: bytes allocated = growth of the used heap
 * between collections plus what each collection freed, divided by the hits
 * the worker counted in the window.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import * as inspector from "node:inspector"
import * as v8 from "node:v8"
import { Effect, Layer, ManagedRuntime } from "effect"
import {
  type BenchData,
  BENCH_DATA_SCHEMA,
  type ChartSpec,
  describeMachine,
  ratioTable,
  type Row,
  rowsFromRounds,
  summaryTable,
  today
} from "./lib/chartsData.js"
import { type Arm, type RoundsReport, runRounds, summarise } from "./lib/rounds.js"
import { Backend } from "../src/core/ids.js"
import { OriginStub } from "../src/origin/OriginStub.js"
import { encodeGetRangeFrame, Flags, FrameDecoder, RESPONSE_CAPS } from "../src/protocol/index.js"
import * as Router from "../src/backend/Router.js"
import { WorkerConfig } from "../src/worker/config.js"
import { nativeCounters } from "../src/worker/plane/Native.js"
import { Sendfile } from "../src/worker/plane/Sendfile.js"
import { ServeMode } from "../src/worker/server/ServeMode.js"
import { Worker } from "../src/worker/Worker.js"
import { repoRoot, scriptArgs } from "./lib/args.js"
import { buildDist, talonBin } from "./lib/build.js"
import { buildCeiling, type CeilingTools } from "./lib/ceiling.js"

const root = repoRoot

// ------------------------------------------------------------------------ options

const args = scriptArgs()
const flag = args.string
const has = args.has
const rounds = args.number("rounds", 4)
const seconds = args.number("seconds", 5)
const warmup = args.number("warmup", 1)
const cooldown = args.number("cooldown", 1)
const spin = has("spin")
const configs = flag("configs", "64x16,1x1,64x1,1024x1")
  .split(",")
  .map((c) => {
    const [conns, depth] = c.split("x").map(Number)
    if (!(conns! > 0 && depth! > 0)) throw new Error(`--configs: expected CONNSxDEPTH, got ${c}`)
    return { name: c, conns: conns!, depth: depth! }
  })
const roundsFor = (config: string) => args.number(`rounds-${config}`, rounds)
const outPath = resolve(root, flag("out", "bench/data/dataplane.json"))
const machineName = args.machine()

const SIZE = 64 * 1024 * 1024
const RANGE = 64 * 1024
const BUCKET = "bench"
const KEY = "blob"
const OBJECT_URI = `s3://${BUCKET}/${KEY}`
const CLK_TCK = 100

interface WorkerArmSpec {
  readonly name: string
  readonly plane: "native" | "portable"
  readonly mode: "pipelined" | "multiplexed"
  readonly loops: 1 | 2
  readonly scheduling?: "rr" | "none"
  /** false: run with --no-hit-table. */
  readonly hitTable?: boolean
  readonly env?: Record<string, string>
}

const WORKER_ARMS: ReadonlyArray<WorkerArmSpec> = [
  { name: "native-pipelined", plane: "native", mode: "pipelined", loops: 1 },
  // Every request through the JS serve loop (no hit table): what the table itself is worth.
  { name: "native-pipelined-js", plane: "native", mode: "pipelined", loops: 1, hitTable: false },
  // One epoll_wait per loop wakeup instead of up to four while the hit table answers everything (native/sendfile.c).
  { name: "native-pipelined-drain1", plane: "native", mode: "pipelined", loops: 1, env: { TALON_NATIVE_DRAIN_ROUNDS: "1" } },
  { name: "portable-pipelined", plane: "portable", mode: "pipelined", loops: 1 },
  { name: "native-multiplexed", plane: "native", mode: "multiplexed", loops: 1 },
  { name: "portable-multiplexed", plane: "portable", mode: "multiplexed", loops: 1 },
  { name: "native-pipelined-x2", plane: "native", mode: "pipelined", loops: 2, scheduling: "rr" },
  { name: "portable-pipelined-x2", plane: "portable", mode: "pipelined", loops: 2, scheduling: "rr" },
  { name: "native-multiplexed-x2", plane: "native", mode: "multiplexed", loops: 2, scheduling: "rr" },
  { name: "portable-multiplexed-x2", plane: "portable", mode: "multiplexed", loops: 2, scheduling: "rr" },
  { name: "native-pipelined-x2-shared", plane: "native", mode: "pipelined", loops: 2, scheduling: "none" }
]
const allArmNames = ["ceiling", ...WORKER_ARMS.map((a) => a.name)]
const armNames = flag("arms", allArmNames.filter((a) => a !== "native-pipelined-x2-shared" && a !== "native-pipelined-drain1").join(",")).split(",")
for (const a of armNames) if (!allArmNames.includes(a)) throw new Error(`--arms: unknown arm ${a} (known: ${allArmNames.join(", ")})`)

// ------------------------------------------------------------------------ processes

const children: Array<ChildProcess> = []
const cleanupDirs: Array<string> = []
const stopAll = () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGTERM")
  for (const d of cleanupDirs) rmSync(d, { recursive: true, force: true })
}
process.on("exit", stopAll)
for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => process.exit(130))

/** Starts a process and resolves with the first match of `re` in its output (stdout + stderr). */
const startServer = (cmd: string, argv: ReadonlyArray<string>, re: RegExp, env: Record<string, string> = {}, ms = 300_000) =>
  new Promise<{ child: ChildProcess; match: RegExpExecArray }>((res, rej) => {
    const child = spawn(cmd, argv, { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] })
    children.push(child)
    let out = ""
    let done = false
    const timer = setTimeout(() => fail(`no ${re} within ${ms} ms`), ms)
    const fail = (why: string) => {
      if (done) return
      done = true
      clearTimeout(timer)
      rej(new Error(`${cmd} ${argv.join(" ")}: ${why}\n${out.slice(-4000)}`))
    }
    const onData = (d: Buffer) => {
      out += d.toString()
      if (done) return
      const m = re.exec(out)
      if (m !== null) {
        done = true
        clearTimeout(timer)
        res({ child, match: m })
      }
      if (out.length > 1_000_000) out = out.slice(-100_000)
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.once("exit", (code, signal) => fail(`exited (${signal ?? code})`))
  })

/** Runs a command to completion: stdout, stderr and the exit code. */
const runCmd = (cmd: string, argv: ReadonlyArray<string>) =>
  new Promise<{ code: number | null; out: string; err: string }>((res) => {
    const child = spawn(cmd, argv, { cwd: root, stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    let err = ""
    child.stdout.on("data", (d: Buffer) => (out += d.toString()))
    child.stderr.on("data", (d: Buffer) => (err += d.toString()))
    child.on("exit", (code) => res({ code, out, err }))
  })

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

// ------------------------------------------------------------------------ /proc sampling

const cpuTicks = (pid: number): { user: number; sys: number } => {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8")
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ")
    return { user: Number(f[11]), sys: Number(f[12]) }
  } catch {
    return { user: 0, sys: 0 }
  }
}

const rssKb = (pid: number): number => {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return m === null ? 0 : Number(m[1])
  } catch {
    return 0
  }
}

const sumTicks = (pids: ReadonlyArray<number>) =>
  pids.reduce(
    (a, p) => {
      const t = cpuTicks(p)
      return { user: a.user + t.user, sys: a.sys + t.sys }
    },
    { user: 0, sys: 0 }
  )

/** CPU (user/sys ticks) and peak summed RSS of `pids` over [now + startMs, now + startMs + lenMs]. */
const sampleWindow = async (pids: () => ReadonlyArray<number>, startMs: number, lenMs: number) => {
  await sleep(startMs)
  const t0 = sumTicks(pids())
  const w0 = performance.now()
  let peak = 0
  const end = w0 + lenMs
  while (performance.now() < end) {
    peak = Math.max(peak, pids().reduce((a, p) => a + rssKb(p), 0))
    await sleep(Math.min(100, Math.max(1, end - performance.now())))
  }
  const t1 = sumTicks(pids())
  const wall = (performance.now() - w0) / 1000
  return { user: (t1.user - t0.user) / CLK_TCK, sys: (t1.sys - t0.sys) / CLK_TCK, wall, rssKb: peak }
}

// ------------------------------------------------------------------------ a tiny client (warming)

/**
 * Reads the whole object through `port` in 1 MiB ranges on each of `conns` parallel connections (every
 * connection reads all of it, so every loop of a multi-loop worker holds every page); checks lengths.
 */
const warmObject = async (port: number, conns: number) => {
  const object = { backend: Backend.S3, bucket: BUCKET, objectPath: KEY }
  const step = 1024 * 1024
  const offsets: Array<number> = []
  for (let o = 0; o < SIZE; o += step) offsets.push(o)
  const one = (list: ReadonlyArray<number>) =>
    new Promise<void>((res, rej) => {
      const socket = net.connect({ port, host: "127.0.0.1" })
      const decoder = new FrameDecoder(RESPONSE_CAPS)
      let i = 0
      const next = () => {
        if (i === list.length) {
          socket.end()
          return res()
        }
        socket.write(encodeGetRangeFrame(i + 1, { object, offset: list[i]!, len: step }))
      }
      socket.on("connect", next)
      socket.on("error", rej)
      socket.on("data", (chunk: Buffer) => {
        decoder.push(chunk)
        for (;;) {
          const f = decoder.next()
          if (f === undefined) break
          if ("_tag" in f) return rej(new Error(`bad frame: ${f.message}`))
          if ((f.header.flags & Flags.Error) !== 0) return rej(new Error(`warm read failed: ${f.payload.toString("utf8")}`))
          if (f.payload.length !== step) return rej(new Error(`warm read: ${f.payload.length} bytes, expected ${step}`))
          i++
          next()
        }
      })
    })
  await Promise.all(Array.from({ length: conns }, () => one(offsets)))
}

// ------------------------------------------------------------------------ arms

interface Target {
  readonly name: string
  readonly port: number
  /** Every process of the arm (a loops=2 worker: primary and loops). */
  readonly pids: () => ReadonlyArray<number>
  /** The process pound's --server-pid watches. */
  readonly mainPid: number
  readonly cpus: string
}

interface Metrics {
  readonly rps: number
  readonly mib_s: number
  readonly p50_us: number
  readonly p99_us: number
  readonly p999_us: number
  readonly max_us: number
  readonly samples: number
  readonly errors: number
  readonly client_cores: number
  /** From this script's /proc sampling over all the arm's processes. */
  readonly server_cores: number
  readonly cpu_us_per_req: number
  readonly kernel_share: number
  readonly rss_mib: number
  /** pound's --server-pid numbers (main process only). */
  readonly pound_cpu_us_per_req: number
  readonly pound_kernel_share: number
}

const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : NaN)

let yardstick: CeilingTools = { ceiling: "", pound: "", source: "" }
let poundPath = ""
let blobPath = ""

const measure = async (t: Target, conns: number, depth: number): Promise<Metrics> => {
  const argv = [
    "-c", "1", poundPath,
    "--addr", `127.0.0.1:${t.port}`, "--conns", String(conns), "--depth", String(depth),
    "--seconds", String(seconds), "--warmup", String(warmup), "--range", "64K",
    "--object", OBJECT_URI, "--size", "64M", "--server-pid", String(t.mainPid), "--json",
    ...(spin ? ["--spin"] : [])
  ]
  const run = runCmd("taskset", argv)
  // pound connects, warms up for `warmup` s, then measures `seconds` s; sample the same window.
  const window = sampleWindow(t.pids, warmup * 1000 + 30, seconds * 1000 - 60)
  const [r, w] = await Promise.all([run, window])
  const line = r.out.trim().split("\n").pop() ?? ""
  let j: Record<string, unknown> = {}
  try {
    j = JSON.parse(line) as Record<string, unknown>
  } catch {
    throw new Error(`pound against ${t.name} printed no result (exit ${r.code}): ${r.err.trim()}`)
  }
  if (r.code !== 0) console.error(`  ! ${t.name} ${conns}x${depth}: pound exit ${r.code}: ${r.err.trim().split("\n")[0]}`)
  const rps = num(j["rps"])
  const cpu = w.user + w.sys
  return {
    rps,
    mib_s: num(j["mib_s"]),
    p50_us: num(j["p50_us"]),
    p99_us: num(j["p99_us"]),
    p999_us: num(j["p999_us"]),
    max_us: num(j["max_us"]),
    samples: num(j["samples"]),
    errors: r.code === 0 ? num(j["errors"]) : Math.max(1, num(j["errors"]) || 0),
    client_cores: num(j["client_cores"]),
    server_cores: Math.round((cpu / w.wall) * 1000) / 1000,
    cpu_us_per_req: rps > 0 ? Math.round(((cpu * 1e6) / (rps * w.wall)) * 100) / 100 : NaN,
    kernel_share: cpu > 0 ? Math.round((w.sys / cpu) * 1000) / 1000 : NaN,
    rss_mib: Math.round((w.rssKb / 1024) * 10) / 10,
    pound_cpu_us_per_req: num(j["server_cpu_us_per_req"]),
    pound_kernel_share: num(j["server_kernel_share"])
  }
}

const failedRun: Metrics = {
  rps: NaN, mib_s: NaN, p50_us: NaN, p99_us: NaN, p999_us: NaN, max_us: NaN, samples: 0, errors: 1, client_cores: NaN,
  server_cores: NaN, cpu_us_per_req: NaN, kernel_share: NaN, rss_mib: NaN, pound_cpu_us_per_req: NaN, pound_kernel_share: NaN
}

const startCeiling = async (): Promise<Target> => {
  const { match } = await startServer(
    "taskset",
    ["-c", "0", yardstick.ceiling, "--listen", "127.0.0.1:0", "--file", blobPath],
    /listening on 127\.0\.0\.1:(\d+) pid (\d+)/
  )
  const pid = Number(match[2])
  return { name: "ceiling", port: Number(match[1]), pids: () => [pid], mainPid: pid, cpus: "0" }
}

const startWorker = async (spec: WorkerArmSpec, stubUrl: string, cacheRoot: string): Promise<Target> => {
  const cache = join(cacheRoot, spec.name)
  mkdirSync(cache, { recursive: true })
  const cpus = spec.loops === 2 ? "0,1" : "0"
  const argv = [
    "-c", cpus, ...talonBin(), "worker",
    "--coordinator", "", "--data-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
    "--cache-dir", cache, "--capacity", "1G",
    "--data-plane", spec.plane, "--serve-mode", spec.mode, "--loops", String(spec.loops),
    // All hits for the whole run: no version re-check (a HEAD) in the middle of a window.
    "--version-ttl-ms", "86400000",
    "--max-inflight", "4096",
    ...(spec.hitTable === false ? ["--no-hit-table"] : [])
  ]
  const env: Record<string, string> = {
    TALON_S3_ENDPOINT: stubUrl,
    TALON_S3_ACCESS_KEY_ID: "bench",
    TALON_S3_SECRET_ACCESS_KEY: "bench-secret"
  }
  if (spec.scheduling !== undefined) env["NODE_CLUSTER_SCHED_POLICY"] = spec.scheduling
  Object.assign(env, spec.env)
  const re =
    spec.loops === 1
      ? new RegExp(`worker data listener on 127\\.0\\.0\\.1:(\\d+) \\(${spec.plane} plane, ${spec.mode} mode\\)`)
      : /worker data listener on 127\.0\.0\.1:(\d+) \([a-z]+ plane, [a-z]+ mode, \d+ loops, ([a-z-]+); pids ([\d, ]+)\)/
  const { child, match } = await startServer("taskset", argv, re, env)
  const loopPids = spec.loops === 1 ? [] : match[3]!.split(",").map((s) => Number(s.trim()))
  const mainPid = child.pid!
  return { name: spec.name, port: Number(match[1]), pids: () => [mainPid, ...loopPids], mainPid, cpus }
}

// ------------------------------------------------------------------------ main

/** Builds the C tools and writes the object into a scratch origin stub's directory. */
const prepare = async (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  cleanupDirs.push(dir)
  yardstick = buildCeiling(dir)
  poundPath = yardstick.pound
  // The stub's layout is <root>/<bucket>/<key>: the object IS this file, which ceiling serves too.
  const originRoot = join(dir, "origin")
  mkdirSync(join(originRoot, BUCKET), { recursive: true })
  blobPath = join(originRoot, BUCKET, KEY)
  writeFileSync(blobPath, randomBytes(SIZE))
  const stubRuntime = ManagedRuntime.make(OriginStub.layer({ root: originRoot }))
  return { dir, stubRuntime, stub: await stubRuntime.runPromise(OriginStub) }
}

const fmt = (v: number, d = 0) => (Number.isFinite(v) ? v.toFixed(d) : "-")

const main = async () => {
  const { dir, stubRuntime, stub } = await prepare("dataplane-bench-")
  buildDist()
  console.log(`origin stub ${stub.url}; object ${OBJECT_URI} = ${blobPath} (64 MiB)`)

  const wanted = WORKER_ARMS.filter((a) => armNames.includes(a.name))
  const targets = new Map<string, Target>()
  if (armNames.includes("ceiling")) targets.set("ceiling", await startCeiling())
  // Started one at a time: each start transpiles and loads the worker (slow on a loaded machine).
  for (const spec of wanted) {
    const t = await startWorker(spec, stub.url, join(dir, "cache"))
    targets.set(spec.name, t)
    console.log(`  ${spec.name}: port ${t.port}, pids ${t.pids().join(",")}, CPUs ${t.cpus}`)
  }
  // Two connections per loop: round-robin gives each loop its share; a loop's first touch of a page
  // (a lease from the owner) must not happen inside a measured window, nor reorder a multiplexed reply.
  for (const spec of wanted) await warmObject(targets.get(spec.name)!.port, 2 * spec.loops)
  const afterWarm = await Effect.runPromise(stub.stats())
  console.log(`warmed: origin served ${afterWarm.requests.get} GETs, ${(afterWarm.bytesServed / 2 ** 20).toFixed(0)} MiB`)
  // Every arm must return the file's exact bytes before any number counts.
  for (const t of targets.values()) {
    const r = await runCmd("taskset", [
      "-c", "1", poundPath, "--addr", `127.0.0.1:${t.port}`, "--conns", "4", "--depth", "4", "--seconds", "1", "--warmup", "0.5",
      "--range", "64K", "--object", OBJECT_URI, "--size", "64M", "--verify", blobPath, "--json"
    ])
    if (r.code !== 0) throw new Error(`--verify against ${t.name} failed: ${r.err.trim()}`)
  }
  console.log("verified: every arm returns the file's bytes (pound --verify)")
  // Resident memory with no connections open, so the 1024-connection RSS can be read as a per-connection cost.
  await sleep(1000)
  const idle: Array<Row> = [...targets.values()].map((t) => ({
    arm: t.name,
    processes: t.pids().length,
    rss_idle_mib: Math.round((t.pids().reduce((a, p) => a + rssKb(p), 0) / 1024) * 10) / 10
  }))
  await Effect.runPromise(stub.resetStats())

  const reports: Array<{ config: (typeof configs)[number]; report: RoundsReport<Metrics> }> = []
  /** Summaries, comparisons and targets of the configs measured so far; written after every config, printed at the end. */
  const finish = (originTotal: number, final: boolean) => {
    const log = final ? console.log : () => {}
    // ---------------------------------------------------------------- summary, comparisons, targets
    const metrics = ["rps", "cpu_us_per_req", "kernel_share", "p50_us", "p99_us", "max_us", "rss_mib", "client_cores", "server_cores"] as const
    const metricFns = Object.fromEntries(metrics.map((m) => [m, (a: Metrics) => a[m]]))
    const runs: Array<Row> = []
    const summary: Array<Row> = []
    const ratios: Array<Row> = []
    const comparisons: Array<[string, string]> = [
      ["native-pipelined", "portable-pipelined"],
      ["native-multiplexed", "portable-multiplexed"],
      ["native-multiplexed", "native-pipelined"],
      ["portable-multiplexed", "portable-pipelined"],
      ["native-pipelined-x2", "native-pipelined"],
      ["native-multiplexed-x2", "native-multiplexed"],
      ["portable-pipelined-x2", "portable-pipelined"],
      ["portable-multiplexed-x2", "portable-multiplexed"],
      ["native-pipelined-x2-shared", "native-pipelined-x2"]
    ]
    const ratioOf = (config: string, arm: string, baseline: string, metric: string): number => {
      const r = ratios.find((x) => x["config"] === config && x["arm"] === arm && x["baseline"] === baseline && x["metric"] === metric)
      return typeof r?.["median"] === "number" ? r["median"] : NaN
    }
    for (const { config, report } of reports) {
      const rows = rowsFromRounds({ ...report, ...summarise(report.arms, report.byArm, report.baseline, metricFns) }, (m) => ({ ...m }))
      runs.push(...rows.runs.map((r) => ({ config: config.name, ...r })))
      summary.push(...rows.summary.map((r) => ({ config: config.name, ...r })))
      ratios.push(...rows.ratios.map((r) => ({ config: config.name, ...r })))
      for (const [arm, base] of comparisons) {
        if (!report.arms.includes(arm) || !report.arms.includes(base)) continue
        const s = summarise([base, arm], report.byArm, base, metricFns)
        const extra = rowsFromRounds({ ...report, baseline: base, ...s }, (m) => ({ ...m }))
        ratios.push(...extra.ratios.map((r) => ({ config: config.name, ...r })))
      }
    }

    const median = (config: string, arm: string, metric: string): number => {
      const r = summary.find((x) => x["config"] === config && x["arm"] === arm && x["metric"] === metric)
      return typeof r?.["median"] === "number" ? r["median"] : NaN
    }
    type Check = { target: string; measured: number; ok: (v: number) => boolean; bar: string }
    const checks: Array<Check> = [
      { target: "64x16 native-pipelined rps / ceiling", measured: ratioOf("64x16", "native-pipelined", "ceiling", "rps"), ok: (v) => v >= 0.85, bar: "≥ 0.85" },
      { target: "64x16 native-pipelined CPU/req / ceiling", measured: ratioOf("64x16", "native-pipelined", "ceiling", "cpu_us_per_req"), ok: (v) => v <= 1.25, bar: "≤ 1.25" },
      { target: "64x16 native-pipelined kernel share", measured: median("64x16", "native-pipelined", "kernel_share"), ok: (v) => v >= 0.85, bar: "≥ 0.85" },
      { target: "1x1 native-pipelined rps / ceiling", measured: ratioOf("1x1", "native-pipelined", "ceiling", "rps"), ok: (v) => v >= 0.85, bar: "≥ 0.85" },
      { target: "1x1 native-pipelined CPU/req / ceiling", measured: ratioOf("1x1", "native-pipelined", "ceiling", "cpu_us_per_req"), ok: (v) => v <= 2, bar: "≤ 2" },
      { target: "1x1 native-pipelined kernel share", measured: median("1x1", "native-pipelined", "kernel_share"), ok: (v) => v >= 0.85, bar: "≥ 0.85" },
      { target: "64x1 native-pipelined rps / ceiling", measured: ratioOf("64x1", "native-pipelined", "ceiling", "rps"), ok: (v) => v >= 0.85, bar: "≥ 0.85" },
      { target: "64x1 native-pipelined CPU/req / ceiling", measured: ratioOf("64x1", "native-pipelined", "ceiling", "cpu_us_per_req"), ok: (v) => v <= 2, bar: "≤ 2" },
      { target: "64x1 native-pipelined kernel share", measured: median("64x1", "native-pipelined", "kernel_share"), ok: (v) => v >= 0.85, bar: "≥ 0.85" },
      { target: "64x16 native / portable rps (pipelined)", measured: ratioOf("64x16", "native-pipelined", "portable-pipelined", "rps"), ok: (v) => v >= 2, bar: "≥ 2" },
      { target: "64x16 native / portable CPU/req (pipelined)", measured: ratioOf("64x16", "native-pipelined", "portable-pipelined", "cpu_us_per_req"), ok: (v) => v <= 0.5, bar: "≤ 0.5" },
      { target: "1024x1 portable / native p99 (pipelined)", measured: 1 / ratioOf("1024x1", "native-pipelined", "portable-pipelined", "p99_us"), ok: (v) => v >= 5, bar: "≥ 5" }
    ]
    const targetRows: Array<Row> = checks.map((c) => ({
      target: c.target,
      bar: c.bar,
      measured: Number.isFinite(c.measured) ? Math.round(c.measured * 1000) / 1000 : null,
      meets: Number.isFinite(c.measured) ? c.ok(c.measured) : null
    }))
    log("\n| target | bar | measured (median of per-round ratios) | meets |\n|---|---|--:|---|")
    for (const r of targetRows) log(`| ${r["target"]} | ${r["bar"]} | ${r["measured"] ?? "-"} | ${r["meets"] === null ? "not run" : r["meets"] ? "yes" : "NO"} |`)
    log("\n| config | arm | rps | CPU µs/req | kernel share | p99 µs | max µs | RSS MiB | client cores |\n|---|---|--:|--:|--:|--:|--:|--:|--:|")
    for (const { config, report } of reports) {
      for (const arm of report.arms) {
        const m = (k: string, d = 0) => fmt(median(config.name, arm, k), d)
        log(
          `| ${config.name} | ${arm} | ${m("rps")} | ${m("cpu_us_per_req", 1)} | ${m("kernel_share", 3)} | ${m("p99_us")} | ${m("max_us")} | ${m("rss_mib", 1)} | ${m("client_cores", 2)} |`
        )
      }
    }
    const at1024 = reports.find((r) => r.config.conns === 1024)
    if (at1024 !== undefined) {
      log("\n| arm | processes | RSS idle MiB | RSS at 1024 conns MiB | per connection KiB |\n|---|--:|--:|--:|--:|")
      for (const row of idle) {
        const busy = median(at1024.config.name, String(row["arm"]), "rss_mib")
        const idleMib = Number(row["rss_idle_mib"])
        log(`| ${row["arm"]} | ${row["processes"]} | ${fmt(idleMib, 1)} | ${fmt(busy, 1)} | ${fmt(((busy - idleMib) * 1024) / at1024.config.conns, 1)} |`)
      }
    }
    const errors = runs.reduce((n, r) => n + (typeof r["errors"] === "number" ? r["errors"] : 0), 0)
    log(`\norigin requests during the measured rounds: ${originTotal} (all hits when 0); error replies: ${errors}`)

    const barChart = (id: string, config: string, field: string, title: string): ChartSpec => ({
      id,
      title,
      data: "summary",
      mark: "bar",
      x: { field: "arm", title: "arm", type: "nominal" },
      y: { field: "median", title },
      filter: { config, metric: field },
      errorBars: { low: "min", high: "max" }
    })
    const data: BenchData & { readonly targets: ReadonlyArray<Row>; readonly idle: ReadonlyArray<Row> } = {
      schema: BENCH_DATA_SCHEMA,
      id: "dataplane",
      title: "Data plane: talon worker vs the C ceiling server (64 KiB ranges, all hits)",
      measures:
        "Requests per second, server CPU per request, kernel share of server CPU, latency percentiles and RSS of the C ceiling server " +
        "(epoll + sendfile) and of talon worker arms (native sendfile addon | portable copy plane × pipelined | multiplexed serve mode × 1 | 2 loops), " +
        "all driven by the same C pound client over loopback on one 64 MiB object that every worker holds fully resident. " +
        "Ratios are medians of per-round ratios from paired, order-swapped rounds.",
      caveats: [
        "2-vCPU VM shared with other engineers' workloads: single runs drift 20-30 % between minutes, so only per-round ratios are compared.",
        "Single-process servers are pinned to CPU 0 and pound to CPU 1; a --loops 2 worker is pinned to CPUs 0 and 1 and so shares CPU 1 with the client.",
        "CPU and RSS are sampled by the bench from /proc over pound's measured window and summed over every process of an arm (a loops=2 worker is a primary and two loops); pound's single-pid numbers are kept as pound_* fields.",
        "At 64 connections the client core can be the limit (client_cores ≈ 1): then rps is the client's number and CPU per request is the server comparison that counts.",
        spin ? "pound ran with --spin (busy-polling client)." : "pound ran without --spin: 64×16 runs are bistable (see shared/tools/ceiling/README.md).",
        `C server and client: ${yardstick.source}.`,
        "Workers run with --version-ttl-ms 86400000 so no window contains a version re-check; the origin served no requests during the measured rounds when origin_requests_during_rounds is 0."
      ],
      command: `npx tsx bench/dataplane-bench.ts ${args.argv.join(" ")}`.trim(),
      date: today(),
      machine: describeMachine(machineName),
      params: {
        rounds,
        seconds,
        warmup,
        cooldown_s: cooldown,
        configs: configs.map((c) => c.name).join(","),
        arms: armNames.join(","),
        range: RANGE,
        object_size: SIZE,
        pound_spin: spin,
        server_cpus: "0 (loops=2: 0,1)",
        client_cpus: "1",
        origin_requests_during_rounds: originTotal,
        error_replies: errors
      },
      runs,
      summary,
      ratios,
      targets: targetRows,
      idle,
      charts: [
        barChart("rps-64x16", "64x16", "rps", "rps at 64×16 (median, min–max)"),
        barChart("cpu-64x16", "64x16", "cpu_us_per_req", "server CPU µs per request at 64×16"),
        barChart("p99-1024x1", "1024x1", "p99_us", "p99 latency µs at 1024×1"),
        barChart("rss-1024x1", "1024x1", "rss_mib", "server RSS MiB holding 1024 connections")
      ],
      tables: [
        summaryTable({
          id: "medians",
          title: "Medians over rounds",
          lead: [
            { field: "config", title: "conns×depth" },
            { field: "arm", title: "arm" },
            { field: "metric", title: "metric" }
          ]
        }),
        ratioTable({
          title: "Per-round ratios (median, min, max)",
          lead: [
            { field: "config", title: "conns×depth" },
            { field: "arm", title: "arm" },
            { field: "baseline", title: "vs" },
            { field: "metric", title: "metric" }
          ]
        })
      ]
    }
    if (!has("no-write")) {
      writeFileSync(outPath, JSON.stringify(data, null, 2) + "\n")
      log(`wrote ${outPath}`)
    }

  }
  for (const config of configs) {
    const arms: Array<Arm<Metrics>> = armNames.map((name) => ({
      name,
      // A failed run is recorded (NaN numbers, errors 1) and the rounds go on: one bad run must not cost the whole bench.
      run: () =>
        Effect.promise(() =>
          measure(targets.get(name)!, config.conns, config.depth).catch((e: unknown) => {
            console.error(`  ! ${name} ${config.name}: ${e instanceof Error ? e.message : String(e)}`)
            return failedRun
          })
        )
    }))
    const n = roundsFor(config.name)
    console.log(`\n== ${config.conns}x${config.depth}: ${n} rounds x ${armNames.length} arms x ${seconds} s (+${warmup} s warmup)`)
    const report = await Effect.runPromise(
      runRounds(arms, {
        rounds: n,
        coolDown: `${cooldown} seconds`,
        baseline: armNames[0],
        onRun: (r) =>
          Effect.sync(() =>
            console.log(
              `  r${r.round} ${r.arm.padEnd(26)} rps ${fmt(r.result.rps).padStart(6)}  p99 ${fmt(r.result.p99_us).padStart(6)} µs  ` +
                `cpu ${fmt(r.result.cpu_us_per_req, 1).padStart(5)} µs/req  kern ${fmt(r.result.kernel_share, 2)}  ` +
                `srv ${fmt(r.result.server_cores, 2)}  cli ${fmt(r.result.client_cores, 2)}  rss ${fmt(r.result.rss_mib, 0)} MiB` +
                (r.result.errors > 0 ? `  ERRORS ${r.result.errors}` : "")
            )
          )
      })
    )
    reports.push({ config, report })
    // A long run that dies later still leaves every finished config on disk.
    finish((await Effect.runPromise(stub.stats())).total, false)
  }
  const finishAll = async () => {
    const origin = await Effect.runPromise(stub.stats())
    await stubRuntime.dispose()
    finish(origin.total, true)
  }

  await finishAll()
}

/** Where the hit path allocates: V8's sampling heap profiler over one pound window, bytes per request by function. */
const allocationSites = async (target: Target, conns: number, depth: number, hits: () => number) => {
  const session = new inspector.Session()
  session.connect()
  const post = (method: string, params?: object) =>
    new Promise<unknown>((res, rej) => session.post(method, params ?? {}, (e, r) => (e ? rej(e) : res(r))))
  await post("HeapProfiler.startSampling", { samplingInterval: 256, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true })
  const h0 = hits()
  await measure(target, conns, depth)
  const n = hits() - h0
  const { profile } = (await post("HeapProfiler.stopSampling")) as {
    profile: { head: Node }
  }
  interface Node {
    callFrame: { functionName: string; url: string; lineNumber: number }
    selfSize: number
    children: Array<Node>
  }
  const bySite = new Map<string, number>()
  const walk = (node: Node) => {
    if (node.selfSize > 0) {
      const f = node.callFrame
      const site = `${f.functionName || "(anonymous)"} ${f.url.replace(/^.*\/(src|node_modules)\//, "$1/")}:${f.lineNumber + 1}`
      bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize)
    }
    for (const c of node.children) walk(c)
  }
  walk(profile.head)
  session.disconnect()
  const top = [...bySite.entries()].sort((a, b) => b[1] - a[1]).slice(0, 25)
  for (const [site, bytes] of top) console.log(`    ${fmt(bytes / n, 1).padStart(7)} B/req  ${site}`)
}

/** Where the hit path spends user CPU: V8's sampling CPU profiler over one pound window, self µs per request by function. */
const cpuSites = async (target: Target, conns: number, depth: number, hits: () => number) => {
  const session = new inspector.Session()
  session.connect()
  const post = (method: string, params?: object) =>
    new Promise<unknown>((res, rej) => session.post(method, params ?? {}, (e, r) => (e ? rej(e) : res(r))))
  await post("Profiler.enable")
  await post("Profiler.setSamplingInterval", { interval: 100 })
  await post("Profiler.start")
  const h0 = hits()
  await measure(target, conns, depth)
  const n = hits() - h0
  const { profile } = (await post("Profiler.stop")) as {
    profile: { nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number } }>; samples: Array<number>; timeDeltas: Array<number> }
  }
  session.disconnect()
  const byNode = new Map<number, number>()
  profile.samples.forEach((id, i) => byNode.set(id, (byNode.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)))
  const bySite = new Map<string, number>()
  for (const node of profile.nodes) {
    const t = byNode.get(node.id)
    if (t === undefined) continue
    const f = node.callFrame
    const site = `${f.functionName || "(anonymous)"} ${f.url.replace(/^.*\/(src|node_modules)\//, "$1/")}:${f.lineNumber + 1}:${f.columnNumber + 1}`
    bySite.set(site, (bySite.get(site) ?? 0) + t)
  }
  const top = [...bySite.entries()].sort((a, b) => b[1] - a[1]).slice(0, 30)
  for (const [site, us] of top) console.log(`    ${fmt(us / n, 2).padStart(7)} µs/req  ${site}`)
}

/** Allocation per hit request, per plane × mode, in this process. */
const allocMain = async () => {
  execFileSync("taskset", ["-pc", "0", String(process.pid)], { stdio: "ignore" })
  const { dir, stubRuntime, stub } = await prepare("dataplane-alloc-")
  const config = configs[0]!
  console.log(
    `| plane | mode | conns×depth | hits | bytes/req | GCs | scavenges/100k req | rps | user µs/req | sys µs/req |\n|---|---|---|--:|--:|--:|--:|--:|--:|--:|`
  )
  for (const plane of ["native", "portable"] as const) {
    for (const mode of ["pipelined", "multiplexed"] as const) {
      const layer = Worker.layerWith.pipe(
        Layer.provide(
          Layer.mergeAll(
            plane === "native" ? Sendfile.Native : Sendfile.Portable,
            mode === "pipelined" ? ServeMode.Pipelined : ServeMode.Multiplexed,
            Router.layerLocal(stub.url)
          )
        ),
        Layer.provide(
          WorkerConfig.layerOf({
            dataAddress: "127.0.0.1:0",
            adminAddress: "127.0.0.1:0",
            coordinator: "",
            cacheDirs: [join(dir, `cache-${plane}-${mode}`)],
            versionTtlMs: 86_400_000,
            maxInflightPerConnection: 4096
          })
        )
      )
      const rt = ManagedRuntime.make(layer)
      const w = await rt.runPromise(Worker)
      await warmObject(w.dataPort, 1)
      const target: Target = { name: `${plane}-${mode}`, port: w.dataPort, pids: () => [process.pid], mainPid: process.pid, cpus: "0" }
      // JIT warm-up: the hit path should be optimised code before anything is counted.
      await measure(target, config.conns, config.depth)
      const profiler = new v8.GCProfiler()
      const hits0 = w.stats.hits
      const used0 = v8.getHeapStatistics().used_heap_size
      const cpu0 = process.cpuUsage()
      const nc0 = nativeCounters()
      profiler.start()
      const m = await measure(target, config.conns, config.depth)
      const cpu = process.cpuUsage(cpu0)
      const nc1 = nativeCounters()
      const used1 = v8.getHeapStatistics().used_heap_size
      const hits = w.stats.hits - hits0
      const prof = profiler.stop() as unknown as {
        statistics: Array<{ gcType: string; beforeGC: { heapStatistics: { usedHeapSize: number } }; afterGC: { heapStatistics: { usedHeapSize: number } } }>
      }
      let allocated = 0
      let prev = used0
      for (const g of prof.statistics) {
        allocated += g.beforeGC.heapStatistics.usedHeapSize - prev
        prev = g.afterGC.heapStatistics.usedHeapSize
      }
      allocated += used1 - prev
      const scavenges = prof.statistics.filter((g) => g.gcType === "Scavenge").length
      console.log(
        `| ${plane} | ${mode} | ${config.name} | ${hits} | ${fmt(allocated / hits, 0)} | ${prof.statistics.length} | ${fmt((scavenges * 100_000) / hits, 1)} | ${fmt(m.rps)} | ${fmt(cpu.user / hits, 2)} | ${fmt(cpu.system / hits, 2)} |`
      )
      if (plane === "native" && nc0 !== undefined && nc1 !== undefined) {
        const per = (k: keyof typeof nc0) => fmt((nc1[k] - nc0[k]) / hits, 3)
        console.log(
          `    native per request: send ${per("sendCalls")}, sendfile ${per("sendfileCalls")}, eagain ${per("eagain")}, waits ${per("waits")}, wakeups ${per("wakeups")}, pushes ${per("pushes")}, recv ${per("recvCalls")}, hit table ${per("fastHits")}, handoffs ${per("handoffs")}`
        )
      }
      if (has("alloc-sites")) await allocationSites(target, config.conns, config.depth, () => w.stats.hits)
      if (has("cpu-sites")) await cpuSites(target, config.conns, config.depth, () => w.stats.hits)
      await rt.dispose()
    }
  }
  await stubRuntime.dispose()
}

;(has("alloc") ? allocMain() : main()).then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e instanceof Error ? e.message : String(e))
    process.exit(1)
  }
)
