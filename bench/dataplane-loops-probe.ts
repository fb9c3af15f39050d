/**
 * Where a `--loops N` worker's latency tail comes from: one pound run per arm (pinned as in
 * dataplane-bench) while this script takes, over the measured window, a per-connection and
 * per-process breakdown:
 *
 * - per connection: bytes the server sent (`ss -ti` bytes_acked deltas), so how evenly the loops
 *   and their connections were served (min/max per-connection rate, each loop's share);
 * - per process (primary and each loop): CPU cores, kernel share, voluntary and involuntary
 *   context switches per second, and the CPUs it ran on (sampled every 50 ms).
 *
 *   npx tsx bench/dataplane-loops-probe.ts [--arms native-pipelined,native-pipelined-x2] [--conns 64] [--depth 16]
 *       [--seconds 3] [--warmup 1] [--rounds 2]
 *
 * Prints only; nothing is written.
 */
import { execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Duration, Effect } from "effect"
import { OriginStub } from "../src/origin/OriginStub.js"
import { allArmNames, BUCKET, KEY, OBJECT_URI, RANGE, startWorker, type Target, WORKER_ARMS, warmObject } from "./dataplane/arms.js"
import { buildDist } from "./lib/build.js"
import { buildCeiling } from "./lib/ceiling.js"
import { Flag, parseFlags, runDriver } from "./lib/driver.js"
import * as Proc from "./lib/proc.js"

const flags = await parseFlags("dataplane-loops-probe", "Per-loop and per-connection breakdown of a multi-loop worker under pound.", {
  arms: Flag.text("arms", "native-pipelined,native-pipelined-x2", `Worker arms, from: ${allArmNames.filter((a) => a !== "ceiling").join(", ")}.`),
  conns: Flag.number("conns", 64, "Connections."),
  depth: Flag.number("depth", 16, "Requests in flight per connection."),
  seconds: Flag.number("seconds", 3, "Measured window, seconds."),
  warmup: Flag.number("warmup", 1, "Warmup, seconds."),
  rounds: Flag.number("rounds", 2, "Rounds (arms in order, then reversed, alternately).")
})

const CLK_TCK = 100

interface ProcSample {
  readonly user: number
  readonly sys: number
  readonly vol: number
  readonly invol: number
}

const procSample = (pid: number): ProcSample => {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8")
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ")
    let vol = 0
    let invol = 0
    // Every thread: libuv's pool and V8's helpers count too.
    for (const t of readdirSync(`/proc/${pid}/task`)) {
      const st = readFileSync(`/proc/${pid}/task/${t}/status`, "utf8")
      vol += Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(st)?.[1] ?? 0)
      invol += Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(st)?.[1] ?? 0)
    }
    return { user: Number(f[11]) / CLK_TCK, sys: Number(f[12]) / CLK_TCK, vol, invol }
  } catch {
    return { user: 0, sys: 0, vol: 0, invol: 0 }
  }
}

/** The CPU `pid`'s main thread last ran on. */
const lastCpu = (pid: number): number => {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8")
    return Number(s.slice(s.lastIndexOf(")") + 2).split(" ")[36])
  } catch {
    return -1
  }
}

/** bytes_acked per established server-side connection on `port`, keyed by peer address, with its owning pid. */
const connBytes = (port: number): Map<string, { pid: number; bytes: number }> => {
  const out = execFileSync("ss", ["-tinpH", "state", "established", `sport = :${port}`], { encoding: "utf8" })
  const lines = out.split("\n")
  const m = new Map<string, { pid: number; bytes: number }>()
  for (let i = 0; i < lines.length; i++) {
    const head = lines[i]!
    const peer = /\s(\S+:\d+)\s+users:/.exec(head)?.[1] ?? /^\s*\d+\s+\d+\s+\S+\s+(\S+)/.exec(head)?.[1]
    if (peer === undefined || !head.includes(`:${port} `)) continue
    const pid = Number(/pid=(\d+)/.exec(head)?.[1] ?? -1)
    const info = lines[i + 1] ?? ""
    const bytes = Number(/bytes_acked:(\d+)/.exec(info)?.[1] ?? /bytes_sent:(\d+)/.exec(info)?.[1] ?? 0)
    m.set(peer, { pid, bytes })
  }
  return m
}

/** System-wide TCP counters that show drops and retransmit timeouts (the box's other users count too). */
const TCP_COUNTERS = ["TCPTimeouts", "TCPLossProbes", "TCPBacklogDrop", "TCPRcvQDrop", "TCPZeroWindowDrop", "ListenOverflows", "TCPRetransFail", "TCPSynRetrans"]
const tcpCounters = (): Map<string, number> => {
  const lines = readFileSync("/proc/net/netstat", "utf8").split("\n")
  const m = new Map<string, number>()
  for (let i = 0; i + 1 < lines.length; i += 2) {
    const names = lines[i]!.split(" ")
    const values = lines[i + 1]!.split(" ")
    names.forEach((n, k) => m.set(n, Number(values[k])))
  }
  return m
}

const q = (xs: ReadonlyArray<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(p * (s.length - 1)))] ?? NaN
}

const probe = (pound: string, t: Target) =>
  Effect.scoped(
    Effect.gen(function* () {
      const argv = [
        pound, "--addr", `127.0.0.1:${t.port}`, "--conns", String(flags.conns), "--depth", String(flags.depth),
        "--seconds", String(flags.seconds), "--warmup", String(flags.warmup), "--range", "64K",
        "--object", OBJECT_URI, "--size", "64M", "--json"
      ]
      const p = yield* Proc.spawn("pound", argv, { cpus: "1" })
      yield* Effect.sleep(Duration.millis(flags.warmup * 1000 + 50))
      const pids = t.pids()
      const n0 = tcpCounters()
      const c0 = connBytes(t.port)
      const s0 = pids.map(procSample)
      const t0 = performance.now()
      const cpus = pids.map(() => new Map<number, number>())
      // Well inside pound's window: its connections must still be open for the second snapshot.
      const end = t0 + flags.seconds * 700
      while (performance.now() < end) {
        pids.forEach((pid, i) => {
          const c = lastCpu(pid)
          cpus[i]!.set(c, (cpus[i]!.get(c) ?? 0) + 1)
        })
        yield* Effect.sleep(Duration.millis(50))
      }
      const c1 = connBytes(t.port)
      const n1 = tcpCounters()
      const s1 = pids.map(procSample)
      const wall = (performance.now() - t0) / 1000
      yield* p.exitCode
      const j = JSON.parse((yield* p.stdout).trim().split("\n").pop() ?? "{}") as Record<string, number>
      console.log(`  ${t.name}: rps ${j["rps"]?.toFixed(0)} p50 ${j["p50_us"]} µs p99 ${j["p99_us"]} µs max ${j["max_us"]} µs; ${c0.size}/${c1.size} conns seen`)
      console.log(`    tcp (system-wide): ${TCP_COUNTERS.map((k) => `${k} ${(n1.get(k) ?? 0) - (n0.get(k) ?? 0)}`).join(" ")}`)
      pids.forEach((pid, i) => {
        const a = s0[i]!
        const b = s1[i]!
        const cpu = b.user - a.user + b.sys - a.sys
        const conns = [...c0.entries()].filter(([, v]) => v.pid === pid)
        const rates = conns.map(([k, v]) => ((c1.get(k)?.bytes ?? v.bytes) - v.bytes) / RANGE / wall)
        const reqs = rates.reduce((x, y) => x + y, 0)
        const where = [...cpus[i]!.entries()].sort((x, y) => x[0] - y[0]).map(([c, n]) => `cpu${c}:${n}`).join(" ")
        console.log(
          `    pid ${pid}${i === 0 ? " (primary)" : ""}: cores ${(cpu / wall).toFixed(2)} kern ${cpu > 0 ? ((b.sys - a.sys) / cpu).toFixed(2) : "-"} ` +
            `vcsw/s ${((b.vol - a.vol) / wall).toFixed(0)} ivcsw/s ${((b.invol - a.invol) / wall).toFixed(0)} on ${where}` +
            (conns.length > 0
              ? `; ${conns.length} conns, ${reqs.toFixed(0)} req/s, per conn min ${q(rates, 0).toFixed(0)} p50 ${q(rates, 0.5).toFixed(0)} max ${q(rates, 1).toFixed(0)}`
              : "")
        )
      })
    })
  )

const main = Effect.gen(function* () {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "loops-probe-"))),
    (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
  )
  const tools = buildCeiling(dir)
  const originRoot = join(dir, "origin")
  mkdirSync(join(originRoot, BUCKET), { recursive: true })
  writeFileSync(join(originRoot, BUCKET, KEY), randomBytes(64 * 1024 * 1024))
  const stub = yield* OriginStub.make({ root: originRoot })
  buildDist()
  const names = flags.arms.split(",")
  const targets: Array<Target> = []
  for (const name of names) {
    const spec = WORKER_ARMS.find((a) => a.name === name)
    if (spec === undefined) throw new Error(`--arms: unknown worker arm ${name}`)
    const t = yield* startWorker(spec, stub.url, join(dir, "cache"))
    yield* warmObject(t.port, 2 * spec.loops)
    console.log(`${name}: port ${t.port}, pids ${t.pids().join(",")}, CPUs ${t.cpus}`)
    targets.push(t)
  }
  for (let r = 0; r < flags.rounds; r++) {
    console.log(`round ${r + 1}`)
    for (const t of r % 2 === 0 ? targets : [...targets].reverse()) {
      yield* probe(tools.pound, t)
      yield* Effect.sleep(Duration.seconds(1))
    }
  }
})

runDriver(main)
