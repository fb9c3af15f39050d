/**
 * Cross-node throughput: a worker (the compose `local` profile's worker-a, with its origin stub
 * and coordinator) on one host and `talon loadgen` on another, across a shaped link; the C
 * reference server (tools/ref) on the worker's host, serving the same object, is the ceiling.
 * Every run verifies every payload byte against the object as the origin serves it. Arms are
 * server × connections × depth, in order-swapped rounds (src/bench/rounds.ts).
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect, type Scope } from "effect"
import { type Arm, type RoundsReport, runRounds, spread } from "../../lib/rounds.js"
import { bringUp, NotReady } from "./cluster.js"
import { type ComposeService, profile } from "./compose.js"
import type { Topology } from "./netns.js"
import { type ProcessFailed, runToEnd, start } from "./procs.js"

export const OBJECT_KEY = "datasets/sample-64m.bin"
export const OBJECT_SIZE = 64 * 1024 * 1024
const REF_PORT = 7101

export interface ThroughputOptions {
  readonly conns: ReadonlyArray<number>
  readonly depths: ReadonlyArray<number>
  readonly range: number
  readonly seconds: number
  readonly warmup: number
  readonly rounds: number
  readonly refServer: string
  readonly talonArgv: ReadonlyArray<string>
  readonly runDir: string
}

/** One loadgen run, as the data file records it. */
export interface Run {
  readonly server: "talon" | "ref"
  readonly conns: number
  readonly depth: number
  readonly rps: number
  readonly mib_s: number
  readonly gbit_s: number
  readonly link_share: number
  readonly p50_us: number
  readonly p99_us: number
  readonly errors: number
  readonly wrong_replies: number
  readonly server_cpu_percent: number | null
  readonly client_cores: number
}

export interface ThroughputResult {
  /** Median TCP connect time client → worker host, µs: the round trip the link really has. */
  readonly rttUs: number
  readonly report: RoundsReport<Run>
  readonly cases: ReadonlyArray<Case>
}

/** Per connections × depth: medians of both servers and the per-round talon/ref ratio. */
export interface Case {
  readonly conns: number
  readonly depth: number
  readonly talon_gbit_s: number
  readonly ref_gbit_s: number
  readonly ratio_median: number
  readonly ratio_min: number
  readonly ratio_max: number
  readonly per_round: string
  /** This depth over depth 1 at the same connections (talon), median of per-round ratios; null at depth 1. */
  readonly talon_vs_depth1: number | null
  readonly ref_vs_depth1: number | null
}

export const THROUGHPUT_HOSTS = ["origin", "coordinator", "worker-a", "client-1"]

const r3 = (x: number) => Math.round(x * 1000) / 1000

const armName = (server: string, conns: number, depth: number) => `${server} c${conns} d${depth}`

/** Parses loadgen's `--json` line (the last line that is a JSON object). */
export const lastJson = (out: string): Record<string, unknown> => {
  const line = out.trim().split("\n").reverse().find((l) => l.startsWith("{"))
  if (line === undefined) throw new Error(`no JSON result line in loadgen output:\n${out.slice(-2000)}`)
  return JSON.parse(line) as Record<string, unknown>
}

export const throughput = (
  topo: Topology,
  compose: ReadonlyArray<ComposeService>,
  o: ThroughputOptions
): Effect.Effect<ThroughputResult, ProcessFailed | NotReady | Error, Scope.Scope> =>
  Effect.gen(function* () {
    const services = profile(compose, "local").filter((s) => ["origin", "coordinator", "worker-a"].includes(s.name))
    const up = yield* bringUp(topo, services, o.runDir, o.talonArgv)
    const originIp = topo.host("origin").ip
    const copy = join(o.runDir, "object.bin")
    const body = yield* Effect.tryPromise({
      try: () => fetch(`http://${originIp}:9100/talon/${OBJECT_KEY}`).then((r) => (r.ok ? r.arrayBuffer() : Promise.reject(new Error(`origin answered ${r.status}`)))),
      catch: (e) => new NotReady({ what: "origin", detail: `GET talon/${OBJECT_KEY}: ${String(e)}` })
    })
    if (body.byteLength !== OBJECT_SIZE) return yield* Effect.fail(new Error(`origin served ${body.byteLength} bytes of ${OBJECT_KEY}, expected ${OBJECT_SIZE}`))
    writeFileSync(copy, Buffer.from(body))

    const workerHost = topo.host("worker-a")
    const ref = yield* start(workerHost, { name: "ref-server", argv: [o.refServer, "--listen", `0.0.0.0:${REF_PORT}`, "--file", copy] }, join(o.runDir, "logs", "ref-server.log"))
    const worker = up.proc("worker-a")
    const client = topo.host("client-1")
    const linkGbit = topo.shape.rateBps / 1e9
    let runNo = 0
    const loadgen = (server: "talon" | "ref", conns: number, depth: number, seconds: number, warmup: number) =>
      Effect.gen(function* () {
        const port = server === "talon" ? 7001 : REF_PORT
        const pid = server === "talon" ? worker.pid : ref.pid
        const out = yield* runToEnd(
          client,
          {
            name: `loadgen ${armName(server, conns, depth)}`,
            argv: [
              ...o.talonArgv, "loadgen", "--addr", `worker-a:${port}`, "--object", `s3://talon/${OBJECT_KEY}`, "--size", String(OBJECT_SIZE),
              "--range", String(o.range), "--conns", String(conns), "--depth", String(depth), "--seconds", String(seconds),
              "--warmup", String(warmup), "--verify", copy, "--server-pid", String(pid), "--json"
            ]
          },
          join(o.runDir, "logs", `loadgen-${++runNo}.log`)
        )
        const j = lastJson(out)
        const num = (k: string) => (typeof j[k] === "number" ? (j[k] as number) : NaN)
        const errors = num("errors")
        const first = typeof j["first_error"] === "string" ? (j["first_error"] as string) : ""
        const gbit = (num("mib_s") * 1048576 * 8) / 1e9
        const run: Run = {
          server, conns, depth,
          rps: num("rps"),
          mib_s: num("mib_s"),
          gbit_s: r3(gbit),
          link_share: linkGbit > 0 ? r3(gbit / linkGbit) : NaN,
          p50_us: num("p50_us"),
          p99_us: num("p99_us"),
          errors,
          wrong_replies: first.includes("mismatch") ? errors : 0,
          server_cpu_percent: typeof j["cpu_percent"] === "number" ? (j["cpu_percent"] as number) : null,
          client_cores: num("client_cores")
        }
        return run
      })

    const rttOut = yield* runToEnd(
      client,
      {
        name: "rtt",
        argv: [
          process.execPath, "-e",
          `const net=require("net");const ts=[];const one=()=>{const t=process.hrtime.bigint();const s=net.connect(${REF_PORT},"worker-a",()=>{ts.push(Number(process.hrtime.bigint()-t)/1e3);s.destroy();ts.length<20?one():(ts.sort((a,b)=>a-b),console.log(Math.round(ts[10])))})};one()`
        ]
      },
      join(o.runDir, "logs", "rtt.log")
    )
    const rttUs = Number(rttOut.trim().split("\n").pop())
    console.log(`TCP connect round trip client-1 -> worker-a: ${rttUs} µs (median of 20)`)

    // Fill the worker's cache (and open TCP windows) before anything is measured.
    const fill = yield* loadgen("talon", 8, 16, 4, 1)
    console.log(`cache filled: ${fill.rps} rps over the fill run, ${fill.errors} errors`)

    const arms: Array<Arm<Run, ProcessFailed>> = []
    for (const c of o.conns) for (const d of o.depths) for (const s of ["talon", "ref"] as const) {
      arms.push({ name: armName(s, c, d), run: () => loadgen(s, c, d, o.seconds, o.warmup) })
    }
    const report = yield* runRounds(arms, {
      rounds: o.rounds,
      coolDown: "500 millis",
      onRun: (r) =>
        Effect.sync(() =>
          console.log(
            `round ${r.round} ${r.arm.padEnd(14)} ${r.result.gbit_s.toFixed(3).padStart(7)} Gbit/s (${(r.result.link_share * 100).toFixed(0)} % of link)  ` +
              `${r.result.rps.toFixed(0).padStart(6)} rps  p50 ${r.result.p50_us} µs  errors ${r.result.errors}`
          )
        )
    })

    const perRound = (arm: string) => report.byArm[arm]!.map((r) => r.gbit_s)
    const ratioSeries = (a: string, b: string) => perRound(a).map((x, i) => x / perRound(b)[i]!)
    const cases: Array<Case> = []
    for (const c of o.conns) for (const d of o.depths) {
      const ratios = ratioSeries(armName("talon", c, d), armName("ref", c, d))
      const s = spread(ratios)
      const d1 = o.depths.includes(1) && d !== 1
      cases.push({
        conns: c,
        depth: d,
        talon_gbit_s: r3(spread(perRound(armName("talon", c, d))).median),
        ref_gbit_s: r3(spread(perRound(armName("ref", c, d))).median),
        ratio_median: r3(s.median),
        ratio_min: r3(s.min),
        ratio_max: r3(s.max),
        per_round: ratios.map((x) => x.toFixed(3)).join(" "),
        talon_vs_depth1: d1 ? r3(spread(ratioSeries(armName("talon", c, d), armName("talon", c, 1))).median) : null,
        ref_vs_depth1: d1 ? r3(spread(ratioSeries(armName("ref", c, d), armName("ref", c, 1))).median) : null
      })
    }
    return { rttUs, report, cases }
  })
