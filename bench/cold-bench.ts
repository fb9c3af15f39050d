/**
 * `just cold-bench`: the first epoch through the cache against the origin directly (issue #22).
 * An origin stub in its own process with a per-response first-byte latency and bandwidth cap
 * (S3-like: 30 ms, 100 MB/s per response), a coordinator, workers and a cache-route gateway,
 * each its own process; the readers and an in-process TalonClient run in this process.
 *
 * Workloads per object size: sequential (the object cut into one contiguous slice per reader)
 * and random (the object tiled into 1–8 MiB ranges, shuffled, drained by the readers), by 1, 8
 * and 32 readers; every byte is read once per run and checked against the expected content.
 * Arms: origin directly (one GET per slice/range; for one sequential reader also 8 MiB parts 8
 * in flight), TalonClient cold and warm, the gateway cold and warm (one GET; for one sequential
 * reader also the aws CLI's 8 MiB parts 10 in flight). Cold = an object key the cluster has
 * never seen (a fresh hard link to the same file per cold run); warm = one object read through
 * the cluster before the rounds. Paired, order-swapped rounds per workload (bench/lib/rounds.ts).
 *
 *   npx tsx bench/cold-bench.ts [--quick] [--sizes 256M,1G] [--readers 1,8,32] [--rounds 3]
 *       [--latency-ms 30] [--bandwidth 100M] [--workers 2] [--arms client-cold,origin-8x]
 *       [--profile DIR] [--worker-node-flags "--trace-gc"] [--no-write]
 *
 * Writes bench/data/cold.json (unless --no-write): runs, medians, per-round ratios to the direct
 * origin read, CPU ns per byte read by process (origin stub, workers, gateway, this process), and
 * each target of the issue stated as met / not met from the data.
 */
import { linkSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Duration, Effect, Either } from "effect"
import { makeTalonClient, type TalonClientShape } from "../src/client/TalonClient.js"
import { parseIntList } from "../src/loadgen/options.js"
import { sampleBytes } from "../src/origin/seed.js"
import { type BenchData, BENCH_DATA_SCHEMA, describeMachine, type Row, tableColumns, today } from "./lib/chartsData.js"
import { type Arm, runRounds, spread } from "./lib/rounds.js"
import { repoRoot } from "./lib/args.js"
import { buildDist, stubBackendEnv, talonBin } from "./lib/build.js"
import { Flag, parseFlags, runDriver } from "./lib/driver.js"
import * as Proc from "./lib/proc.js"
import { loadavg } from "./gateway-proxy/client.js"
import { type ColdResult, coldResult, cpuPerByte, judge, MiB, type Piece, sequentialSlices, shuffledRanges, targetsFor, type TargetVerdict, type Workload, workloadName } from "./cold/plan.js"
import { clientInto, clientRead, clientStream, ColdBenchFailed, oneGet, partedGet, type ReadPiece, runReaders, staleSocketRetries } from "./cold/readers.js"
import { originSettled, type OriginCounters } from "./cold/origin.js"
import { cpuDelta, cpuSnapshot } from "./cold/cpu.js"

const flags = await parseFlags("cold-bench", "Cold and warm reads through TalonClient and the gateway against the origin directly, paired order-swapped rounds.", {
  quick: Flag.bool("quick", "A few minutes: 256 MiB only, 1 and 8 readers, 2 rounds (explicit flags still win)."),
  sizes: Flag.text("sizes", "", "Object sizes, comma-separated (default 256M,1G; --quick 256M)."),
  readers: Flag.text("readers", "", "Reader counts, comma-separated (default 1,8,32; --quick 1,8)."),
  patterns: Flag.text("patterns", "seq,rand", "Access patterns: seq (contiguous slice per reader), rand (shuffled 1–8 MiB ranges)."),
  rounds: Flag.number("rounds", 0, "Measured rounds per workload (default 3; --quick 2)."),
  latencyMs: Flag.number("latency-ms", 30, "Origin first-byte latency per request, ms."),
  bandwidth: Flag.size("bandwidth", "100M", "Origin bandwidth cap per response, bytes/s."),
  workers: Flag.number("workers", 2, "Workers in the cluster."),
  arms: Flag.text("arms", "", "Only these arms, comma-separated (default: all; origin is always kept as the baseline)."),
  cooldown: Flag.number("cooldown", 1, "Pause between runs, seconds."),
  runTimeout: Flag.number("run-timeout", 0, "Seconds one run may take before the bench fails (default: at 5 MB/s, plus 60 s)."),
  profile: Flag.text("profile", "", "Write V8 CPU profiles (.cpuprofile) of the origin stub, workers and gateway into this directory."),
  workerNodeFlags: Flag.text("worker-node-flags", "", "Extra node flags for the workers, space-separated (e.g. --trace-gc)."),
  noWrite: Flag.bool("no-write", "Print only; do not write bench/data/cold.json."),
  machine: Flag.machine()
})

const orDie = <A>(e: Either.Either<A, string>): A =>
  Either.getOrElse(e, (msg) => {
    console.error(msg)
    return process.exit(2)
  })
const mode = flags.quick ? "quick" : "full"
const sizes = (flags.sizes || (flags.quick ? "256M" : "256M,1G")).split(",").map((s) => {
  const m = /^(\d+)([MG])$/i.exec(s.trim())
  if (m === null) {
    console.error(`--sizes: want sizes like 256M or 1G, got ${JSON.stringify(s)}`)
    return process.exit(2)
  }
  return Number(m[1]) * (m[2]!.toUpperCase() === "G" ? 1024 * MiB : MiB)
})
const readerCounts = orDie(parseIntList("--readers", flags.readers || (flags.quick ? "1,8" : "1,8,32")))
const patterns = flags.patterns.split(",").map((p) => p.trim())
if (patterns.some((p) => p !== "seq" && p !== "rand")) {
  console.error(`--patterns: want seq and/or rand, got ${JSON.stringify(flags.patterns)}`)
  process.exit(2)
}
const rounds = flags.rounds || (flags.quick ? 2 : 3)
const BUCKET = "coldbench"
const sizeLabel = (n: number) => (n >= 1024 * MiB ? `${n / (1024 * MiB)} GiB` : `${n / MiB} MiB`)

const onlyArms = flags.arms === "" ? undefined : new Set(["origin", ...flags.arms.split(",").map((a) => a.trim())])
/** Arms of a workload (those of --arms, if given): the parted ones only where one reader streams the whole object. */
const armsOf = (w: Workload): ReadonlyArray<string> =>
  (w.pattern === "seq" && w.readers === 1
    ? ["origin", "origin-8x", "client-cold", "client-warm", "client-into-warm", "gateway-cold", "gateway-warm", "gateway-par-cold", "gateway-par-warm"]
    : ["origin", "client-cold", "client-warm", "client-into-warm", "gateway-cold", "gateway-warm"]
  ).filter((a) => onlyArms === undefined || onlyArms.has(a))

const getJson = <A>(url: string): Promise<A> =>
  new Promise((resolve, reject) => {
    http
      .get(url, (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () => {
          try {
            resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")) as A)
          } catch (e) {
            reject(e)
          }
        })
        res.on("error", reject)
      })
      .on("error", reject)
  })

const main = Effect.gen(function* () {
  const dir = mkdtempSync(join(tmpdir(), "cold-bench-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  buildDist()
  const talon = talonBin()
  const profiling = (name: string) => (flags.profile === "" ? [] : ["--cpu-prof", `--cpu-prof-dir=${flags.profile}`, `--cpu-prof-name=${name}.cpuprofile`])
  const nodeFlags = (name: string) => [...profiling(name), ...(name.startsWith("worker") ? flags.workerNodeFlags.split(" ").filter((f) => f !== "") : [])]
  const start = (name: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
    Proc.spawn(name, [talon[0]!, ...nodeFlags(name), ...talon.slice(1), ...args], { env, grace: "3 seconds", echoStderr: true })

  // The expected content: one deterministic stream; the object of each size is its prefix.
  const maxSize = Math.max(...sizes)
  console.log(`generating ${sizeLabel(maxSize)} of expected content…`)
  const expected = sampleBytes(0, maxSize)
  const originRoot = join(dir, "origin")
  mkdirSync(join(originRoot, BUCKET, "base"), { recursive: true })
  const baseFile = (size: number) => join(originRoot, BUCKET, "base", `${size}.bin`)
  for (const size of sizes) writeFileSync(baseFile(size), expected.subarray(0, size))
  // A cold object is a new key for the same file: nothing is copied, the cluster has never seen it.
  let links = 0
  const freshKey = (size: number, arm: string): string => {
    const key = `cold/${size}/${arm}-${++links}.bin`
    mkdirSync(join(originRoot, BUCKET, "cold", String(size)), { recursive: true })
    linkSync(baseFile(size), join(originRoot, BUCKET, key))
    return key
  }
  const warmKey = (size: number): string => {
    const key = `warm/${size}.bin`
    mkdirSync(join(originRoot, BUCKET, "warm"), { recursive: true })
    linkSync(baseFile(size), join(originRoot, BUCKET, key))
    return key
  }

  const origin = yield* start("origin", [
    "origin", "--root", originRoot, "--port", "0",
    "--latency-ms", String(flags.latencyMs), "--bandwidth", String(flags.bandwidth)
  ])
  const originUrl = (yield* origin.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)/, "180 seconds"))[1]!
  const backendEnv = stubBackendEnv(originUrl)
  const coordinator = yield* start("coordinator", ["coordinator", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"], backendEnv)
  const coord = (yield* coordinator.waitFor(/coordinator control on ([\d.]+:\d+)/, "180 seconds"))[1]!
  const workers = yield* Effect.forEach(Array.from({ length: flags.workers }, (_, i) => `worker-${i + 1}`), (id) =>
    start(id, ["worker", "--id", id, "--data-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--coordinator", coord, "--cache-dir", join(dir, id)], backendEnv)
  )
  yield* Effect.forEach(workers, (w) => w.waitFor(/worker data listener on/, "180 seconds"), { discard: true })
  const gateway = yield* start("gateway", ["gateway", "--listen", "127.0.0.1:0", "--route", "cache", "--auth", "off", "--coordinator", coord], backendEnv)
  const gatewayUrl = (yield* gateway.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)/, "180 seconds"))[1]!

  const client: TalonClientShape = yield* makeTalonClient({ coordinator: coord })
  // Every worker placed before the first read, or the first blocks all go to the first worker.
  yield* Effect.gen(function* () {
    for (let i = 0; ; i++) {
      const members = yield* client.members(true).pipe(Effect.orElseSucceed(() => []))
      if (members.length >= flags.workers) return
      if (i > 600) return yield* Effect.fail(new ColdBenchFailed({ message: `only ${members.length} of ${flags.workers} workers registered with the coordinator` }))
      yield* Effect.sleep("100 millis")
    }
  })

  const roles = { origin: [origin.pid], workers: workers.map((w) => w.pid), gateway: [gateway.pid], coordinator: [coordinator.pid] }
  const counters = (): Promise<OriginCounters> => getJson<OriginCounters>(`${originUrl}/_talon/stats`)
  const settle = originSettled(counters)
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 })
  yield* Effect.addFinalizer(() => Effect.sync(() => agent.destroy()))
  const originBase = new URL(originUrl)
  const gatewayBase = new URL(gatewayUrl)
  console.log(
    `${mode} run: origin ${originUrl} (${flags.latencyMs} ms first byte, ${flags.bandwidth / 1e6} MB/s per response), ${flags.workers} workers, gateway ${gatewayUrl}, ` +
      `TalonClient in this process; sizes ${sizes.map(sizeLabel).join(", ")}, readers ${readerCounts.join(", ")}, ${rounds} rounds`
  )

  const runs: Array<Row> = []
  const summary: Array<Row> = []
  const ratios: Array<Row> = []
  const verdicts: Array<TargetVerdict & { readonly size: string }> = []

  for (const size of sizes) {
    const warm = warmKey(size)
    const obj = expected.subarray(0, size)
    // Warm the warm object through the cluster (checked like every read).
    const warming = yield* runReaders(sequentialSlices(size, 8), 8, clientStream(client, `s3://${BUCKET}/${warm}`, obj))
    yield* Effect.promise(() => settle())
    console.log(`${sizeLabel(size)}: warm object read into the cache in ${warming.seconds.toFixed(1)} s`)
    const timeout = Duration.seconds(flags.runTimeout || size / 5e6 + 60)

    for (const pattern of patterns as ReadonlyArray<"seq" | "rand">) {
      for (const readers of readerCounts) {
        const w: Workload = { pattern, readers }
        const wname = workloadName(w)
        const pieces: ReadonlyArray<Piece> = pattern === "seq" ? sequentialSlices(size, readers) : shuffledRanges(size, 7 + readers)
        const reader = (arm: string): { readonly key: string; readonly read: ReadPiece } => {
          const cold = arm.endsWith("-cold")
          const key = arm.startsWith("origin") ? `base/${size}.bin` : cold ? freshKey(size, arm) : warm
          const path = `/${BUCKET}/${key}`
          const target = `s3://${BUCKET}/${key}`
          const read: ReadPiece =
            arm === "origin" ? oneGet(agent, originBase, path, obj)
            : arm === "origin-8x" ? partedGet(agent, originBase, path, obj, 8)
            : arm.startsWith("client-into-") ? clientInto(client, target, obj)
            : arm.startsWith("client-") ? (pattern === "seq" ? clientStream(client, target, obj) : clientRead(client, target, obj))
            : arm.startsWith("gateway-par-") ? partedGet(agent, gatewayBase, path, obj, 10)
            : oneGet(agent, gatewayBase, path, obj)
          return { key, read }
        }
        const measure = (arm: string): Effect.Effect<ColdResult, ColdBenchFailed> =>
          Effect.gen(function* () {
            const { key, read } = reader(arm)
            const before = yield* Effect.promise(() => settle())
            const cpu0 = cpuSnapshot(roles)
            const out = yield* runReaders(pieces, readers, read).pipe(
              Effect.timeoutFail({
                duration: timeout,
                onTimeout: () => new ColdBenchFailed({ message: `${sizeLabel(size)} ${wname} ${arm} (${key}) took longer than ${Duration.format(timeout)}` })
              })
            )
            // Read-ahead may still be fetching: its bytes belong to this run.
            const after = yield* Effect.promise(() => settle())
            const cpu = cpuDelta(cpu0, cpuSnapshot(roles))
            return coldResult({
              cpu,
              bytes: out.bytes,
              seconds: out.seconds,
              originBytes: after.bytesServed - before.bytesServed,
              originGets: after.requests.get - before.requests.get,
              originHeads: after.requests.head - before.requests.head,
              firstByteMs: out.firstByteMs,
              load1: loadavg()
            })
          })
        const arms: Array<Arm<ColdResult, ColdBenchFailed>> = armsOf(w).map((name) => ({ name, run: () => measure(name) }))
        const report = yield* runRounds(arms, {
          rounds,
          coolDown: `${flags.cooldown} seconds`,
          baseline: "origin",
          metrics: { mb_s: (r) => r.mb_s, origin_ratio: (r) => r.origin_ratio, first_byte_ms: (r) => r.first_byte_ms },
          onRun: (r) =>
            Effect.sync(() =>
              console.log(
                `${sizeLabel(size).padEnd(8)} ${wname.padEnd(8)} round ${r.round} ${r.arm.padEnd(17)} ${r.result.mb_s.toFixed(1).padStart(7)} MB/s  ` +
                  `origin ${r.result.origin_ratio.toFixed(3)}× (${r.result.origin_gets} GETs, ${r.result.origin_heads} HEADs)  first byte ${r.result.first_byte_ms.toFixed(0)} ms  load ${r.result.load1}  ` +
                  `cpu s: origin ${r.result.cpu_origin_s} workers ${r.result.cpu_workers_s} gateway ${r.result.cpu_gateway_s} client ${r.result.cpu_client_s}`
              )
            )
        })
        const common = { size: sizeLabel(size), object_bytes: size, workload: wname, pattern, readers, case: `${sizeLabel(size)} ${wname}` }
        for (const r of report.runs) runs.push({ ...common, round: r.round, position: r.position, arm: r.arm, ...r.result })
        for (const arm of report.arms) {
          for (const [metric, s] of Object.entries(report.summary[arm]!)) {
            summary.push({ ...common, arm, metric, n: s.n, median: s.median, min: s.min, max: s.max })
          }
        }
        for (const [arm, metrics] of Object.entries(report.ratios)) {
          const q = metrics["mb_s"]!
          ratios.push({
            ...common,
            kind: "ratio",
            arm,
            baseline: "origin",
            metric: "mb_s",
            median: Math.round(q.median * 1000) / 1000,
            min: Math.round(q.min * 1000) / 1000,
            max: Math.round(q.max * 1000) / 1000,
            per_round: q.perRound.map((v) => (Number.isFinite(v) ? v.toFixed(3) : "-")).join(" ")
          })
        }
        for (const arm of report.arms) {
          const cpu = cpuPerByte(report.byArm[arm] ?? [])
          if (cpu !== undefined) ratios.push({ ...common, kind: "cpu", arm, ...cpu })
        }
        for (const t of targetsFor([wname], () => report.arms)) {
          const v = judge(t, report.byArm)
          verdicts.push({ ...v, size: sizeLabel(size) })
          ratios.push({ ...common, kind: "target", ...v })
        }
      }
    }
  }

  if (flags.workerNodeFlags.includes("--trace-gc")) {
    for (const w of workers) {
      const out = yield* w.stdout
      const count = (re: RegExp) => out.split("\n").filter((l) => re.test(l)).length
      console.log(`${w.name}: ${count(/Mark-Compact/)} mark-compact, ${count(/Scavenge/)} scavenges (--trace-gc)`)
      console.log(out.split("\n").filter((l) => /Mark-Compact/.test(l)).slice(-5).join("\n"))
    }
  }
  console.log("\n| size | workload | target | measure | value | per round | bound | verdict |")
  console.log("|---|---|---|---|--:|---|---|---|")
  for (const v of verdicts) console.log(`| ${v.size} | ${v.workload} | ${v.target} | ${v.measure} | ${v.median ?? "-"} | ${v.per_round} | ${v.bound} | ${v.verdict} |`)
  const met = verdicts.filter((v) => v.verdict === "met").length
  console.log(`\n${met} of ${verdicts.length} targets met`)
  if (staleSocketRetries.count > 0) console.log(`${staleSocketRetries.count} GETs sent again: their kept-alive socket had been closed by the server while idle`)

  if (flags.noWrite) return
  const ratioSpread = spread(ratios.filter((r) => r["kind"] === "ratio").map((r) => r["median"] as number))
  const data: BenchData = {
    schema: BENCH_DATA_SCHEMA,
    id: "cold",
    title: `The first epoch: cold and warm reads through the cache vs the origin directly (${mode} run)`,
    measures:
      `Verified MB/s (10^6 bytes/s) of reading whole objects (${sizes.map(sizeLabel).join(", ")}) sequentially (one contiguous slice per reader) and as shuffled 1–8 MiB ranges, by ${readerCounts.join(", ")} readers, ` +
      `from an origin stub with ${flags.latencyMs} ms first-byte latency and ${flags.bandwidth / 1e6} MB/s per response: directly, through TalonClient (in the bench process) and through the gateway (cache route), cold and warm; ` +
      "and origin bytes sent per byte read. Every byte of every arm is compared with the expected content.",
    caveats: [
      `Mode ${mode}: ${rounds} paired order-swapped rounds per workload; the machine (2 vCPUs) was shared with other work, so compare per-round ratios, not absolute MB/s across runs.`,
      "All processes (origin stub, coordinator, workers, gateway) and the readers with the in-process TalonClient share the same two cores: the origin stub's own CPU caps what any arm can reach, the direct arms included.",
      "Cold = a key the cluster never saw (a fresh hard link to the same file per cold run); warm = one object read through TalonClient before the rounds, then read by the warm arms of every round.",
      "origin_ratio counts the origin's response body bytes from the run's start until its GETs drained after the run (read-ahead still in flight belongs to the run that caused it); direct arms read 1.0 by construction.",
      "Speed targets are judged on the median of per-round ratios; fetch targets on the worst round.",
      "CPU per byte: utime+stime from /proc/PID/stat of each server process (with its children) and process.cpuUsage() of the bench process (readers, checks, TalonClient), from the run's start until the origin drained, over the bytes read."
    ],
    command: `npx tsx bench/cold-bench.ts${flags.quick ? " --quick" : ""} --sizes ${sizes.map((s) => (s >= 1024 * MiB ? `${s / (1024 * MiB)}G` : `${s / MiB}M`)).join(",")} --readers ${readerCounts.join(",")} --rounds ${rounds} --latency-ms ${flags.latencyMs} --bandwidth ${flags.bandwidth} --workers ${flags.workers}`,
    date: today(),
    machine: describeMachine(flags.machine),
    params: {
      mode,
      sizes: sizes.join(","),
      readers: readerCounts.join(","),
      patterns: patterns.join(","),
      rounds,
      origin_latency_ms: flags.latencyMs,
      origin_bandwidth_bytes_per_s: flags.bandwidth,
      workers: flags.workers,
      client: "in-process TalonClient, default settings",
      targets_met: met,
      targets: verdicts.length,
      ratio_median_of_medians: ratioSpread.median
    },
    runs,
    summary,
    ratios,
    charts: [
      {
        id: "mbs",
        title: "Verified MB/s by workload and arm (median of rounds, min–max)",
        data: "summary",
        mark: "bar",
        filter: { metric: "mb_s" },
        x: { field: "case", title: "object size, pattern-readers", type: "nominal" },
        y: { field: "median", title: "MB/s", scale: "log" },
        color: "arm",
        errorBars: { low: "min", high: "max" }
      },
      {
        id: "origin-ratio",
        title: "Origin bytes ÷ bytes read, cold arms (median of rounds, min–max)",
        data: "summary",
        mark: "bar",
        filter: { metric: "origin_ratio", arm: ["client-cold", "gateway-cold", "gateway-par-cold"] },
        x: { field: "case", title: "object size, pattern-readers", type: "nominal" },
        y: { field: "median", title: "origin bytes / bytes read" },
        color: "arm",
        errorBars: { low: "min", high: "max" },
        rule: { y: 1.1, label: "1.1 (random target; sequential 1.25)" }
      }
    ],
    tables: [
      {
        id: "targets",
        title: "Targets of issue #22, from this run",
        data: "ratios",
        filter: { kind: "target" },
        columns: [
          ...tableColumns({ size: "size", workload: "workload", target: "target", measure: "measure" }),
          ...tableColumns({ median: "value" }, 3),
          ...tableColumns({ bound: "bound", verdict: "verdict", per_round: "per round" })
        ]
      },
      {
        id: "mbs",
        title: "Verified MB/s per arm (median over rounds, min–max)",
        data: "summary",
        filter: { metric: "mb_s" },
        columns: [...tableColumns({ size: "size", workload: "workload", arm: "arm" }), ...tableColumns({ median: "MB/s", min: "min", max: "max" }, 1)]
      },
      {
        id: "ratios",
        title: "Per-round MB/s ratios to the direct origin read by the same readers",
        data: "ratios",
        filter: { kind: "ratio" },
        columns: [
          ...tableColumns({ size: "size", workload: "workload", arm: "arm" }),
          ...tableColumns({ median: "median", min: "min", max: "max" }, 3),
          ...tableColumns({ per_round: "per round" })
        ]
      },
      {
        id: "cpu",
        title: "CPU ns per byte read, by process (median over rounds; all on the same 2 cores)",
        data: "ratios",
        filter: { kind: "cpu" },
        columns: [
          ...tableColumns({ size: "size", workload: "workload", arm: "arm" }),
          ...tableColumns({ origin: "origin stub", workers: "workers", gateway: "gateway", client: "reader + TalonClient", total: "total" }, 2)
        ]
      },
      {
        id: "origin",
        title: "Origin bytes ÷ bytes read (median over rounds, min–max)",
        data: "summary",
        filter: { metric: "origin_ratio" },
        columns: [...tableColumns({ size: "size", workload: "workload", arm: "arm" }), ...tableColumns({ median: "median", min: "min", max: "max" }, 3)]
      }
    ]
  }
  const out = join(repoRoot, "bench/data/cold.json")
  writeFileSync(out, JSON.stringify(data, null, 2) + "\n")
  console.log(`wrote ${out}`)
})

runDriver(main)
