/**
 * Data-plane speed against the C yardstick (issue 5, "Targets"): the same C
 * `pound` client drives the C `ceiling` server and `talon worker` arms
 * (native | portable plane × pipelined | multiplexed mode × 1 | 2 loops) on one
 * 64 MiB object, 64 KiB ranges, all hits, in paired order-swapped rounds.
 *
 *   npx tsx bench/dataplane-bench.ts [--rounds 4] [--seconds 5] [--warmup 1] [--cooldown 1]
 *       [--configs 64x16,1x1,64x1,1024x1] [--arms ceiling,native-pipelined,...] [--spin]
 *       [--rounds-for 64x16=N] [--no-write] [--out bench/data/dataplane.json]   (--help lists them)
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
 * Writes bench/data/dataplane.json (BenchData shape, bench/lib/chartsData.ts). Every server is a
 * scoped process (bench/lib/proc.ts): stopped when the driver ends, fails or is interrupted.
 *
 *   npx tsx bench/dataplane-bench.ts --alloc [--seconds 5] [--configs 16x16]
 *
 * instead measures JS heap allocation per request on the hit path: a worker in
 * this process (pinned to CPU 0) per plane × mode, driven by pound (CPU 1),
 * with v8.GCProfiler over the window: bytes allocated = growth of the used heap
 * between collections plus what each collection freed, divided by the hits
 * the worker counted in the window.
 */
import type { CommandExecutor } from "@effect/platform"
import { randomBytes } from "node:crypto"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { Duration, Effect, HashMap, Option } from "effect"
import { OriginStub } from "../src/origin/OriginStub.js"
import { allocMain } from "./dataplane/alloc.js"
import { allArmNames, BUCKET, KEY, OBJECT_URI, startCeiling, startWorker, type Target, WORKER_ARMS, warmObject } from "./dataplane/arms.js"
import { failedRun, fmt, measure, type MeasureEnv, type Metrics } from "./dataplane/measure.js"
import { type Config, writeReport } from "./dataplane/report.js"
import { repoRoot } from "./lib/args.js"
import { buildDist } from "./lib/build.js"
import { buildCeiling } from "./lib/ceiling.js"
import type { Row } from "./lib/chartsData.js"
import { Flag, parseFlags, runDriver } from "./lib/driver.js"
import * as Proc from "./lib/proc.js"
import { rssKb } from "./lib/procStats.js"
import { type Arm, type RoundsReport, runRounds } from "./lib/rounds.js"

const defaultArms = allArmNames.filter((a) => a !== "native-pipelined-x2-shared" && a !== "native-pipelined-x2-rr" && a !== "native-pipelined-semi-default" && a !== "native-pipelined-drain1" && a !== "native-pipelined-x2-js" && a !== "native-pipelined-x2-dealt").join(",")
const flags = await parseFlags("dataplane-bench", "talon worker arms vs the C ceiling server, driven by the C pound client in paired order-swapped rounds.", {
  rounds: Flag.number("rounds", 4, "Measured rounds per config."),
  roundsFor: Flag.map("rounds-for", "Rounds for one config, e.g. --rounds-for 64x16=6 (repeatable)."),
  seconds: Flag.number("seconds", 5, "Measured window per run, seconds."),
  warmup: Flag.number("warmup", 1, "Warmup per run, seconds."),
  cooldown: Flag.number("cooldown", 1, "Pause between runs, seconds."),
  spin: Flag.bool("spin", "pound busy-polls instead of sleeping in epoll_wait."),
  configs: Flag.text("configs", "64x16,1x1,64x1,1024x1", "Connection × depth configs, comma-separated CONNSxDEPTH."),
  arms: Flag.text("arms", defaultArms, `Arms, comma-separated, from: ${allArmNames.join(", ")}.`),
  out: Flag.text("out", "bench/data/dataplane.json", "Data file to write."),
  noWrite: Flag.bool("no-write", "Print only; write no data file."),
  alloc: Flag.bool("alloc", "Measure JS heap allocation per hit request instead (a worker in this process per plane × mode)."),
  allocSites: Flag.bool("alloc-sites", "With --alloc: bytes per request by allocation site."),
  cpuSites: Flag.bool("cpu-sites", "With --alloc: user CPU per request by function."),
  machine: Flag.machine()
})
const { rounds, seconds, warmup, cooldown, spin } = flags
const configs: ReadonlyArray<Config> = flags.configs.split(",").map((c) => {
  const [conns, depth] = c.split("x").map(Number)
  if (!(conns! > 0 && depth! > 0)) throw new Error(`--configs: expected CONNSxDEPTH, got ${c}`)
  return { name: c, conns: conns!, depth: depth! }
})
const roundsFor = (config: string): number => {
  const given = Option.flatMap(flags.roundsFor, (m) => HashMap.get(m, config))
  if (Option.isNone(given)) return rounds
  const n = Number(given.value)
  if (!Number.isInteger(n) || n < 1) throw new Error(`--rounds-for ${config}=${given.value}: want a positive integer`)
  return n
}
const armNames = flags.arms.split(",")
for (const a of armNames) if (!allArmNames.includes(a)) throw new Error(`--arms: unknown arm ${a} (known: ${allArmNames.join(", ")})`)
const outPath = flags.noWrite ? undefined : resolve(repoRoot, flags.out)

/** Builds the C tools and writes the object into a scratch origin stub's directory (all removed with the scope). */
const prepare = (prefix: string) =>
  Effect.gen(function* () {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), prefix))),
      (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
    )
    const yardstick = buildCeiling(dir)
    // The stub's layout is <root>/<bucket>/<key>: the object IS this file, which ceiling serves too.
    const originRoot = join(dir, "origin")
    mkdirSync(join(originRoot, BUCKET), { recursive: true })
    const blob = join(originRoot, BUCKET, KEY)
    writeFileSync(blob, randomBytes(64 * 1024 * 1024))
    const stub = yield* OriginStub.make({ root: originRoot })
    const env: MeasureEnv = { pound: yardstick.pound, seconds, warmup, spin }
    return { dir, yardstick, blob, stub, env }
  })

const main = Effect.gen(function* () {
  const { dir, yardstick, blob, stub, env } = yield* prepare("dataplane-bench-")
  buildDist()
  console.log(`origin stub ${stub.url}; object ${OBJECT_URI} = ${blob} (64 MiB)`)

  const wanted = WORKER_ARMS.filter((a) => armNames.includes(a.name))
  const targets = new Map<string, Target>()
  if (armNames.includes("ceiling")) targets.set("ceiling", yield* startCeiling(yardstick.ceiling, blob))
  // Started one at a time: each start loads the worker (slow on a loaded machine).
  for (const spec of wanted) {
    const t = yield* startWorker(spec, stub.url, join(dir, "cache"))
    targets.set(spec.name, t)
    console.log(`  ${spec.name}: port ${t.port}, pids ${t.pids().join(",")}, CPUs ${t.cpus}`)
  }
  // Two connections per loop: round-robin gives each loop its share; a loop's first touch of a page
  // (a lease from the owner) must not happen inside a measured window, nor reorder a multiplexed reply.
  for (const spec of wanted) yield* warmObject(targets.get(spec.name)!.port, 2 * spec.loops)
  const afterWarm = yield* stub.stats()
  console.log(`warmed: origin served ${afterWarm.requests.get} GETs, ${(afterWarm.bytesServed / 2 ** 20).toFixed(0)} MiB`)
  // Every arm must return the file's exact bytes before any number counts.
  for (const t of targets.values()) {
    yield* Proc.run(`pound --verify against ${t.name}`, [
      yardstick.pound, "--addr", `127.0.0.1:${t.port}`, "--conns", "4", "--depth", "4", "--seconds", "1", "--warmup", "0.5",
      "--range", "64K", "--object", OBJECT_URI, "--size", "64M", "--verify", blob, "--json"
    ], { cpus: "1" })
  }
  console.log("verified: every arm returns the file's bytes (pound --verify)")
  // Resident memory with no connections open, so the 1024-connection RSS can be read as a per-connection cost.
  yield* Effect.sleep(Duration.seconds(1))
  const idle: Array<Row> = [...targets.values()].map((t) => ({
    arm: t.name,
    processes: t.pids().length,
    rss_idle_mib: Math.round((t.pids().reduce((a, p) => a + rssKb(p), 0) / 1024) * 10) / 10
  }))
  yield* stub.resetStats()

  const reports: Array<{ config: Config; report: RoundsReport<Metrics> }> = []
  const report = (originTotal: number, final: boolean) =>
    writeReport(
      { reports, idle, rounds, seconds, warmup, cooldown, spin, configs, arms: armNames, yardstick: yardstick.source, machine: flags.machine, argv: flags.argv, out: outPath },
      originTotal,
      final
    )
  for (const config of configs) {
    const arms: Array<Arm<Metrics, never, CommandExecutor.CommandExecutor>> = armNames.map((name) => ({
      name,
      // A failed run is recorded (NaN numbers, errors 1) and the rounds go on: one bad run must not cost the whole bench.
      run: () =>
        measure(env, targets.get(name)!, config.conns, config.depth).pipe(
          Effect.catchAll((e) => Effect.sync(() => (console.error(`  ! ${name} ${config.name}: ${e.message}`), failedRun)))
        )
    }))
    const n = roundsFor(config.name)
    console.log(`\n== ${config.conns}x${config.depth}: ${n} rounds x ${armNames.length} arms x ${seconds} s (+${warmup} s warmup)`)
    const rep = yield* runRounds(arms, {
      rounds: n,
      coolDown: `${cooldown} seconds`,
      baseline: armNames[0],
      onRun: (r) =>
        Effect.sync(() =>
          console.log(
            `  r${r.round} ${r.arm.padEnd(26)} rps ${fmt(r.result.rps).padStart(6)}  p99 ${fmt(r.result.p99_us).padStart(6)} µs  max ${fmt(r.result.max_us).padStart(7)} µs  ` +
              `cpu ${fmt(r.result.cpu_us_per_req, 1).padStart(5)} µs/req  kern ${fmt(r.result.kernel_share, 2)}  ` +
              `srv ${fmt(r.result.server_cores, 2)}  cli ${fmt(r.result.client_cores, 2)}  rss ${fmt(r.result.rss_mib, 0)} MiB` +
              (r.result.errors > 0 ? `  ERRORS ${r.result.errors}` : "")
          )
        )
    })
    reports.push({ config, report: rep })
    // A long run that dies later still leaves every finished config on disk.
    report((yield* stub.stats()).total, false)
  }
  report((yield* stub.stats()).total, true)
})

const alloc = Effect.gen(function* () {
  const { dir, stub, env } = yield* prepare("dataplane-alloc-")
  yield* allocMain({ measure: env, config: configs[0]!, stubUrl: stub.url, dir, allocSites: flags.allocSites, cpuSites: flags.cpuSites })
})

runDriver(flags.alloc ? alloc : main)
