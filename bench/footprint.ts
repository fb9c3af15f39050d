/**
 * `just footprint`: what each component costs in memory and how fast the CLI starts, the way a
 * user runs them (bin/talon.mjs from the build, each component its own process):
 *
 *   idle          origin stub, coordinator, worker, gateway, a few seconds after start
 *   load          the worker under 64 connections × depth 16, then 1024 connections × depth 1
 *                 (peak RSS over the run, and RSS after it)
 *   abuse         rounds of fuzzed frames, a Ping flood and a connection storm against the
 *                 worker's data port, fuzzed frames against the coordinator's control port;
 *                 RSS after each round against the post-warm-up level (target: within 25 %)
 *   start-up      `talon --version`, `talon --help`, a 64-byte `talon read`: median wall time
 *
 * Every RSS is split into file-backed pages, V8 heap, buffers and the rest (bench/footprint/memory.ts).
 * Writes bench/data/footprint.json (charted by bench/bench-charts.ts).
 */
import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { performance } from "node:perf_hooks"
import { Data, Duration, Effect, Fiber } from "effect"
import { Loadgen, loadSpec } from "../src/loadgen/Loadgen.js"
import { parseObject } from "../src/loadgen/options.js"
import { sampleBytes } from "../src/origin/seed.js"
import { repoRoot } from "./lib/args.js"
import { buildDist, stubBackendEnv, talonBin, talonEnv } from "./lib/build.js"
import { type BenchData, BENCH_DATA_SCHEMA, describeMachine, type Row, tableColumns, today } from "./lib/chartsData.js"
import { Flag, parseFlags, runDriver } from "./lib/driver.js"
import * as Proc from "./lib/proc.js"
import { rssKb } from "./lib/procStats.js"
import { warmObject } from "./lib/warm.js"
import { connectionStorm, fuzzFrames, pingFlood } from "./footprint/abuse.js"
import { type Memory, memoryOf } from "./footprint/memory.js"

const flags = await parseFlags("footprint", "RSS per process idle, under load and after abuse, and CLI start-up times; writes bench/data/footprint.json.", {
  quick: Flag.bool("quick", "Shorter load runs and fewer abuse rounds."),
  seconds: Flag.number("seconds", 5, "Measured seconds per load run (--quick: 2)."),
  rounds: Flag.number("rounds", 3, "Abuse rounds (--quick: 2)."),
  frames: Flag.number("frames", 200_000, "Fuzzed frames per abuse round against the worker (--quick: 50000)."),
  settle: Flag.number("settle", 12, "Seconds a process is left alone after a load run or abuse round before its RSS is read (the memory reducer gives memory back ~8 s after a burst)."),
  startupRuns: Flag.number("startup-runs", 10, "Runs of each start-up command (the median is reported)."),
  startupOnly: Flag.bool("startup-only", "Measure the CLI's start-up only (origin, coordinator and one worker; no RSS phases) and replace the start-up rows of bench/data/footprint.json."),
  gc: Flag.bool("gc", "Start the processes with --expose-gc and record the heap live after a full GC at each measurement (the GC changes what follows: diagnosis, not the numbers to report)."),
  machine: Flag.machine()
})
const gcProbe = flags.gc
const quick = flags.quick
const seconds = quick ? Math.min(flags.seconds, 2) : flags.seconds
const rounds = quick ? Math.min(flags.rounds, 2) : flags.rounds
const frames = quick ? Math.min(flags.frames, 50_000) : flags.frames

class FootprintFailed extends Data.TaggedError("FootprintFailed")<{ readonly message: string }> {}

const BUCKET = "footprint"
const KEY = "hot.bin"
const SIZE = 64 * 1024 * 1024
const PROBE = join(repoRoot, "bench/footprint/probe.mjs")

/** The issue's targets, MiB (idle; the worker also under 1024 connections). */
const TARGETS: Record<string, number> = { "worker/idle": 64, "worker/1024 conns": 96, "coordinator/idle": 64, "gateway/idle": 64, "origin/idle": 96 }
const STARTUP_TARGETS: Record<string, number> = { "talon --version": 0.3, "talon read (64 B)": 0.5 }

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}

/** The data in `file` (a full run's) with its start-up rows replaced by those of `fresh` (a --startup-only run's). */
const withStartupOf = (file: string, fresh: BenchData): BenchData => {
  if (!existsSync(file)) return fresh
  const old = JSON.parse(readFileSync(file, "utf8")) as BenchData
  const isStartup = (r: Row) => r["command"] !== undefined
  return {
    ...old,
    params: { ...old.params, startup_runs: flags.startupRuns },
    caveats: [...old.caveats.filter((c) => !c.startsWith("Start-up rows from")), `Start-up rows from a later run (${today()}, \`${fresh.command}\`).`],
    runs: [...old.runs.filter((r) => !isStartup(r)), ...fresh.runs.filter(isStartup)],
    summary: [...old.summary.filter((r) => !isStartup(r)), ...fresh.summary.filter(isStartup)]
  }
}

const main = Effect.gen(function* () {
  buildDist()
  const dir = mkdtempSync(join(tmpdir(), "footprint-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  const probeDir = join(dir, "probe")
  mkdirSync(probeDir)
  const originRoot = join(dir, "origin")
  mkdirSync(join(originRoot, BUCKET), { recursive: true })
  const hotFile = join(originRoot, BUCKET, KEY)
  writeFileSync(hotFile, sampleBytes(0, SIZE))

  const [node, ...talonArgs] = talonBin()
  // Each process with the launcher's flags for its role (args[0], the subcommand).
  const start = (name: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
    Proc.spawn(name, [node!, "--import", PROBE, ...(gcProbe ? ["--expose-gc"] : []), ...talonBin(args[0]).slice(1), ...args], { env: { ...talonEnv(args[0]), ...env, TALON_FOOTPRINT_DIR: probeDir }, grace: "3 seconds" })
  const origin = yield* start("origin", ["origin", "--root", originRoot, "--port", "0"])
  const originUrl = (yield* origin.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)/, "180 seconds"))[1]!
  const backendEnv = stubBackendEnv(originUrl)
  const coordinator = yield* start("coordinator", ["coordinator", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"], backendEnv)
  const coord = (yield* coordinator.waitFor(/coordinator control on ([\d.]+:\d+)/, "180 seconds"))[1]!
  const worker = yield* start(
    "worker",
    ["worker", "--id", "footprint", "--data-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--coordinator", coord, "--cache-dir", join(dir, "cache")],
    backendEnv
  )
  const wm = yield* worker.waitFor(/worker data listener on ([\d.]+):(\d+)/, "180 seconds")
  const host = wm[1]!
  const port = Number(wm[2])
  const rows: Array<Row> = []
  // RSS: idle, under load, after abuse (the gateway only here; --startup-only skips it all).
  const memoryPhases = Effect.gen(function* () {
    const gateway = yield* start("gateway", ["gateway", "--listen", "127.0.0.1:0", "--auth", "off", "--coordinator", coord], backendEnv)
    yield* gateway.waitFor(/http:\/\/127\.0\.0\.1:\d+/, "180 seconds")
    const procs = { origin, coordinator, worker, gateway }
    console.log(`footprint: origin ${originUrl}, coordinator ${coord}, worker ${host}:${port}; ${quick ? "quick" : "full"} run`)

    const measure = (name: keyof typeof procs, phase: string, extra: Row = {}) =>
      Effect.gen(function* () {
        const m: Memory = yield* memoryOf(procs[name].pid, probeDir).pipe(Effect.mapError((message) => new FootprintFailed({ message })))
        const target = TARGETS[`${name}/${phase}`] ?? null
        const row: Row = { process: name, phase, ...m, ...extra, target_mib: target, met: target === null ? null : m.rss_mib <= target ? "met" : "not met" }
        rows.push(row)
        console.log(`${name.padEnd(11)} ${phase.padEnd(22)} RSS ${m.rss_mib} MiB (file ${m.file_mib}, heap ${m.heap_total_mib}/${m.heap_used_mib} used${m.heap_live_mib === null ? "" : `/${m.heap_live_mib} live`}, buffers ${m.buffers_mib}, native ${m.native_mib})`)
        return m
      })

    yield* Effect.sleep(Duration.seconds(flags.settle))
    for (const name of ["origin", "coordinator", "worker", "gateway"] as const) yield* measure(name, "idle")

    const failed = (what: string) => (e: { readonly message: string } | string) =>
      new FootprintFailed({ message: `${what}: ${typeof e === "string" ? e : e.message}` })
    yield* warmObject(host, port, BUCKET, KEY, SIZE).pipe(Effect.mapError(failed("warming the worker")))
    const loadgen = yield* Loadgen
    const object = parseObject("object", `s3://${BUCKET}/${KEY}`, "s3", undefined)
    if (object._tag === "Left") return yield* Effect.fail(new FootprintFailed({ message: object.left }))
    const load = (conns: number, depth: number, secs: number) =>
      Effect.gen(function* () {
        let peak = 0
        const sampler = yield* Effect.fork(
          Effect.forever(Effect.zipRight(Effect.sync(() => (peak = Math.max(peak, rssKb(worker.pid)))), Effect.sleep("100 millis")))
        )
        const r = yield* loadgen
          .runChecked(loadSpec({ host, port, object: object.right, size: SIZE, conns, depth, range: 65536, seconds: secs, warmup: 1, verify: hotFile, threads: 1 }))
          .pipe(Effect.mapError(failed(`loadgen ${conns} × ${depth}`)))
        yield* Fiber.interrupt(sampler)
        return { rps: Math.round(r.rps), peak_mib: Math.round((peak / 1024) * 10) / 10 }
      })
    // Warm-up: one short run at each shape, so the post-warm-up level includes what load leaves behind by design.
    yield* load(64, 16, 1)
    yield* load(1024, 1, 1)
    yield* Effect.sleep(Duration.seconds(flags.settle))
    const warm = yield* measure("worker", "post-warm-up")
    const coordWarm = yield* measure("coordinator", "post-warm-up")
    const l1 = yield* load(64, 16, seconds)
    yield* measure("worker", "64 × 16 (after)", { peak_mib: l1.peak_mib, rps: l1.rps })
    const l2 = yield* load(1024, 1, seconds)
    rows.push({ process: "worker", phase: "1024 conns", rss_mib: l2.peak_mib, peak_mib: l2.peak_mib, rps: l2.rps, target_mib: 96, met: l2.peak_mib <= 96 ? "met" : "not met" })
    console.log(`worker      1024 conns peak RSS ${l2.peak_mib} MiB at ${l2.rps} rps`)
    yield* measure("worker", "1024 conns (after)", { peak_mib: l2.peak_mib, rps: l2.rps })

    const [chost, cport] = coord.split(":")
    for (let round = 1; round <= rounds; round++) {
      yield* Effect.promise(() => fuzzFrames(host, port, frames, round))
      yield* Effect.promise(() => pingFlood(host, port, frames))
      yield* Effect.promise(() => connectionStorm(host, port, 2000))
      yield* Effect.promise(() => fuzzFrames(chost!, Number(cport), Math.ceil(frames / 4), round))
      yield* Effect.sleep(Duration.seconds(flags.settle))
      const w = yield* measure("worker", `after abuse ${round}`)
      const c = yield* measure("coordinator", `after abuse ${round}`)
      rows[rows.length - 2] = { ...rows[rows.length - 2]!, vs_warm: Math.round((w.rss_mib / warm.rss_mib) * 1000) / 1000, target_mib: Math.round(warm.rss_mib * 1.25 * 10) / 10, met: w.rss_mib <= warm.rss_mib * 1.25 ? "met" : "not met" }
      rows[rows.length - 1] = { ...rows[rows.length - 1]!, vs_warm: Math.round((c.rss_mib / coordWarm.rss_mib) * 1000) / 1000, target_mib: Math.round(coordWarm.rss_mib * 1.25 * 10) / 10, met: c.rss_mib <= coordWarm.rss_mib * 1.25 ? "met" : "not met" }
    }
    for (const name of ["origin", "gateway"] as const) yield* measure(name, "end")
  })
  if (!flags.startupOnly) yield* memoryPhases

  // Start-up: wall time of the whole command, as a script calling it sees it.
  const startup: Array<Row> = []
  const commands: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
    ["talon --version", ["--version"]],
    ["talon --help", ["--help"]],
    ["talon read (64 B)", ["read", `s3://${BUCKET}/${KEY}`, "--offset", "0", "--length", "64", "--coordinator", coord]],
    // The same from its script bundle with V8's code cache off: the cache's share, paired by run.
    ["talon read (64 B, no code cache)", ["read", `s3://${BUCKET}/${KEY}`, "--offset", "0", "--length", "64", "--coordinator", coord]]
  ]
  // A code cache of the bench's own (src/core/scriptBundle.mjs): run 1 of `talon read` starts cold, and makes it.
  const codeCacheEnv = (label: string) =>
    label.includes("no code cache") ? { TALON_CODE_CACHE: "0" } : { TALON_CODE_CACHE_DIR: join(dir, "code-cache") }
  // The command's own CPU (user + system, GNU time) as well: on a shared machine the wall time
  // includes waiting for a core, the CPU time does not.
  const timeBin = existsSync("/usr/bin/time") ? "/usr/bin/time" : undefined
  for (let run = 1; run <= flags.startupRuns; run++) {
    for (const [label, args] of commands) {
      const argv = [node!, ...talonArgs, ...args]
      const t0 = performance.now()
      const r = timeBin === undefined
        ? spawnSync(argv[0]!, argv.slice(1), { cwd: repoRoot, env: { ...process.env, ...backendEnv, ...codeCacheEnv(label) }, encoding: "buffer" })
        : spawnSync(timeBin, ["-f", "talon-cpu %U %S", ...argv], { cwd: repoRoot, env: { ...process.env, ...backendEnv, ...codeCacheEnv(label) }, encoding: "buffer" })
      const s = (performance.now() - t0) / 1000
      if (r.status !== 0) return yield* Effect.fail(new FootprintFailed({ message: `${label} exited with ${r.status}: ${r.stderr.toString().slice(-500)}` }))
      if (label.startsWith("talon read") && r.stdout.length !== 64) return yield* Effect.fail(new FootprintFailed({ message: `${label} printed ${r.stdout.length} bytes, not 64` }))
      const cpu = /talon-cpu ([\d.]+) ([\d.]+)\s*$/.exec(r.stderr.toString())
      startup.push({ command: label, run, seconds: Math.round(s * 1000) / 1000, cpu_s: cpu === null ? null : Math.round((Number(cpu[1]) + Number(cpu[2])) * 100) / 100 })
    }
  }
  const startupSummary = commands.map(([label]) => {
    const rs = startup.filter((r) => r["command"] === label)
    const xs = rs.map((r) => r["seconds"] as number)
    const cpus = rs.map((r) => r["cpu_s"]).filter((c): c is number => typeof c === "number")
    const m = Math.round(median(xs) * 1000) / 1000
    const cpu = cpus.length === 0 ? null : Math.round(median(cpus) * 100) / 100
    const target = STARTUP_TARGETS[label] ?? null
    console.log(`${label.padEnd(20)} median ${m} s (min ${Math.min(...xs)}, max ${Math.max(...xs)}); CPU median ${cpu ?? "-"} s`)
    return { command: label, median_s: m, min_s: Math.min(...xs), max_s: Math.max(...xs), median_cpu_s: cpu, target_s: target, met: target === null ? null : m <= target ? "met" : "not met" }
  })

  const data: BenchData = {
    schema: BENCH_DATA_SCHEMA,
    id: "footprint",
    title: `Memory per process and CLI start-up${quick ? " (quick run)" : ""}`,
    measures:
      "Each component as its own process started by bin/talon.mjs from the build (the CLI bundle): RSS from /proc/PID/smaps_rollup split into file-backed pages (node's code, shared libraries) and anonymous memory, and that into V8's heap (heap_total), buffers (memoryUsage().arrayBuffers) and the rest (native: V8 code space and zones, libuv, malloc). " +
      `Idle ${flags.settle} s after start; the worker ${flags.settle} s after warm-up (one short run at each load shape), after ${seconds} s of 64 connections × depth 16 and of 1024 connections × depth 1 (64 KiB GetRanges of a warmed 64 MiB object, peak RSS sampled every 100 ms), ` +
      `and after each of ${rounds} abuse rounds (${frames} fuzzed frames, ${frames} Pings over 16 connections, a storm of 2000 connections opened and reset, and ${Math.ceil(frames / 4)} fuzzed frames at the coordinator's control port). Start-up: wall time of each command, ${flags.startupRuns} runs, median.`,
    caveats: [
      "The 2-vCPU machine was shared with other work while this ran: start-up times include waiting for a core; RSS does not depend on it.",
      "The load generator runs in the bench process, not in the measured ones.",
      "RSS is the process's alone (a worker without --loops is one process).",
      "Start-up CPU (user + system of the command, GNU time) does not include waiting for a core; on a busy machine it is the figure to compare."
    ],
    command: `npx tsx bench/footprint.ts ${flags.argv.join(" ")}`.trim(),
    date: today(),
    machine: describeMachine(flags.machine),
    params: { seconds, rounds, frames, startup_runs: flags.startupRuns },
    runs: [...rows, ...startup],
    summary: [...rows.filter((r) => r["target_mib"] !== null && r["target_mib"] !== undefined), ...startupSummary],
    ratios: rows.filter((r) => r["vs_warm"] !== undefined),
    charts: [
      {
        id: "rss",
        title: "RSS by process and phase (MiB)",
        data: "runs",
        mark: "bar",
        filter: { phase: ["idle", "post-warm-up", "1024 conns", `after abuse ${rounds}`] },
        x: { field: "process", title: "process", type: "nominal" },
        y: { field: "rss_mib", title: "RSS (MiB)" },
        color: "phase"
      }
    ],
    tables: [
      {
        id: "memory",
        title: "What each process's RSS is made of (MiB)",
        data: "runs",
        filter: { phase: ["idle", "post-warm-up", "64 × 16 (after)", "1024 conns (after)", `after abuse ${rounds}`, "end"] },
        columns: [
          ...tableColumns({ process: "process", phase: "phase" }),
          ...tableColumns({ rss_mib: "RSS", file_mib: "file-backed", heap_total_mib: "V8 heap", heap_used_mib: "heap used", buffers_mib: "buffers", native_mib: "native" }, 1)
        ]
      },
      {
        id: "targets",
        title: "The issue's targets: RSS (MiB) and start-up (s, median)",
        data: "summary",
        columns: [
          ...tableColumns({ process: "process", phase: "phase", command: "command" }),
          ...tableColumns({ rss_mib: "RSS MiB", target_mib: "target MiB", median_s: "median s", median_cpu_s: "CPU s", target_s: "target s" }, 2),
          ...tableColumns({ met: "verdict" })
        ]
      },
      {
        id: "abuse",
        title: "RSS after each abuse round ÷ post-warm-up (target ≤ 1.25)",
        data: "ratios",
        columns: [...tableColumns({ process: "process", phase: "round", rss_mib: "RSS MiB", vs_warm: "÷ post-warm-up" }), ...tableColumns({ met: "verdict" })]
      }
    ]
  }
  const out = join(repoRoot, "bench/data/footprint.json")
  writeFileSync(out, JSON.stringify(flags.startupOnly ? withStartupOf(out, data) : data, null, 2) + "\n")
  console.log(`wrote ${out}`)
})

runDriver(Effect.provide(main, Loadgen.layer))
