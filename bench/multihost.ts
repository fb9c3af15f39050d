/**
 * Talon across hosts, with network namespaces for hosts (root, Linux; `just multihost`).
 * Each compose service (deploy/docker-compose.yml) runs its `command` and `environment` on a
 * host of its own name; hosts meet on a bridge whose ports are shaped with tc. Scenarios:
 *
 *   throughput        worker on one host, loadgen on another, vs the C reference server (tools/ref)
 *   coordinator-kill  kill -9 a coordinator under load             (bench/multihost/ha.ts)
 *   etcd-cut          cut a coordinator off from etcd under load
 *   worker-kill       kill -9 a worker under load
 *
 * Flags: USAGE below (`--help` prints it and starts nothing).
 *
 * Everything it creates (namespaces, links, processes, /etc/netns/<ns>, its temp dir) is
 * removed on success, failure and Ctrl-C; a run killed outright is cleaned by the next one.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import { buildRefTools } from "../tools/ref/build.js"
import { buildNetdelay, userDelay, userDelayUnavailable } from "./multihost/delay.js"
import { repoRoot, scriptArgs } from "./lib/args.js"
import { buildDist, talonBin } from "./lib/build.js"
import { DATASET_ID, TARGET_RATIO, throughputData } from "./multihost/charts.js"
import { readCompose } from "./kit/multihost/compose.js"
import { haHosts, haScenarios } from "./multihost/ha.js"
import { qdiscAvailable, topology, unavailableReason } from "./kit/multihost/netns.js"
import { THROUGHPUT_HOSTS, throughput } from "./kit/multihost/throughput.js"
import { printTable, type ScenarioRow } from "./multihost/report.js"

const USAGE = `usage: npx tsx bench/multihost.ts [--scenarios throughput,coordinator-kill,etcd-cut,worker-kill]
    [--rate GBIT] [--delay-us US] [--conns 4,32] [--depths 1,16] [--seconds 4] [--warmup 1] [--rounds 2]
    [--range 64K] [--settle 4] [--prefix tmh] [--compose deploy/docker-compose.yml] [--machine NAME] [--no-write]
Needs root on Linux: hosts are network namespaces named <prefix>-*, on a bridge shaped with tc.`

const args = scriptArgs()
if (args.has("help")) {
  console.log(USAGE)
  process.exit(0)
}
const list = (name: string, def: string) =>
  args.string(name, def).split(",").map((s) => {
    const n = Number(s)
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name}: expected a comma list of positive integers, got ${JSON.stringify(s)}`)
    return n
  })
const ALL = ["throughput", "coordinator-kill", "etcd-cut", "worker-kill"]
const scenarios = args.string("scenarios", ALL.join(",")).split(",")
for (const s of scenarios) if (!ALL.includes(s)) throw new Error(`--scenarios: unknown scenario ${JSON.stringify(s)} (known: ${ALL.join(", ")})`)
const settle = args.number("settle", 4)
const rateGbit = args.number("rate", 2)
const askedDelayUs = args.number("delay-us", 500)
const conns = list("conns", "4,32")
const depths = list("depths", "1,16")
const seconds = args.number("seconds", 4)
const warmup = args.number("warmup", 1)
const rounds = args.number("rounds", 2)
const range = args.size("range", "64K")
const prefix = args.string("prefix", "tmh")
const composeFile = args.string("compose", join(repoRoot, "deploy", "docker-compose.yml"))
const loadavg = (): number => Number(readFileSync("/proc/loadavg", "utf8").split(" ")[0])

const main = Effect.gen(function* () {
  const reason = unavailableReason()
  if (reason !== undefined) return yield* Effect.fail(new Error(`multihost: ${reason}`))
  const runDir = mkdtempSync(join(tmpdir(), "talon-multihost-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(runDir, { recursive: true, force: true })))
  const ref = buildRefTools(join(runDir, "bin"))
  buildDist()
  const talonArgv = talonBin()
  const compose = readCompose(composeFile)
  let delayUs = askedDelayUs
  // netem at the switch ports where the kernel has it; else NFQUEUE + talon-netdelay on every host.
  let delayVia: "netem" | "nfqueue" | "none" = delayUs > 0 ? "netem" : "none"
  let netdelay = ""
  if (delayUs > 0 && !qdiscAvailable(prefix, "netem")) {
    const why = userDelayUnavailable()
    if (why === undefined) {
      netdelay = buildNetdelay(join(runDir, "bin"))
      delayVia = "nfqueue"
      console.log(`this kernel has no netem qdisc: ${delayUs} µs one-way delay from talon-netdelay (iptables NFQUEUE) on every host`)
    } else {
      console.warn(`\n*** no netem qdisc in this kernel and ${why}: links get their rate (tbf) but NO added delay; --delay-us ${delayUs} is ignored ***\n`)
      delayUs = 0
      delayVia = "none"
    }
  }
  const shape = { rateBps: rateGbit * 1e9, delayUs: delayVia === "netem" ? delayUs : 0 }
  const withDelay = (hosts: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const topo = yield* topology({ prefix, hosts, shape })
      if (delayVia === "nfqueue") yield* userDelay(topo, delayUs, netdelay, join(runDir, "logs"))
      return topo
    })
  const rows: Array<ScenarioRow> = []

  if (scenarios.includes("throughput")) {
    const before = loadavg()
    const result = yield* Effect.scoped(
      Effect.gen(function* () {
        const topo = yield* withDelay(THROUGHPUT_HOSTS)
        return yield* throughput(topo, compose, { conns, depths, range, seconds, warmup, rounds, refServer: ref.server, talonArgv, runDir })
      })
    )
    const after = loadavg()
    const data = throughputData(result, {
      machine: args.machine(),
      command: `npx tsx bench/multihost.ts --scenarios throughput --rate ${rateGbit} --delay-us ${delayUs} --conns ${conns.join(",")} --depths ${depths.join(",")} --seconds ${seconds} --warmup ${warmup} --rounds ${rounds}`,
      rateBps: shape.rateBps,
      delayUs,
      delayVia,
      range,
      seconds,
      warmup,
      rounds,
      loadavgBefore: before,
      loadavgAfter: after
    })
    console.log(`\nlink ${rateGbit} Gbit/s, ${delayUs} µs each way; ${range / 1024} KiB ranges; medians of ${rounds} rounds`)
    console.log("| conns | depth | talon Gbit/s | ref Gbit/s | talon/ref (median of rounds) | talon vs depth 1 | ref vs depth 1 |")
    console.log("|--:|--:|--:|--:|--:|--:|--:|")
    for (const c of result.cases) {
      console.log(`| ${c.conns} | ${c.depth} | ${c.talon_gbit_s} | ${c.ref_gbit_s} | ${c.ratio_median} (${c.per_round}) | ${c.talon_vs_depth1 ?? "-"} | ${c.ref_vs_depth1 ?? "-"} |`)
    }
    console.log(`talon/ref at depth ${data.params["depth_of_target"]}: worst case median ${data.params["worst_ratio_at_target_depth"]} (target ≥ ${TARGET_RATIO}): ${data.params["verdict"]}`)
    const errors = result.report.runs.reduce((a, r) => a + r.result.errors, 0)
    const wrong = result.report.runs.reduce((a, r) => a + r.result.wrong_replies, 0)
    for (const c of result.cases) {
      rows.push({
        scenario: `throughput c${c.conns} d${c.depth}`,
        errors,
        wrongBytes: wrong,
        recovery: "-",
        throughput: `${c.talon_gbit_s} Gbit/s = ${Math.round((c.talon_gbit_s / rateGbit) * 100)} % of link, ${c.ratio_median}× ref`
      })
    }
    if (!args.has("no-write")) {
      const path = join(repoRoot, "bench", "data", `${DATASET_ID}.json`)
      writeFileSync(path, JSON.stringify(data, null, 2) + "\n")
      console.log(`wrote ${path} (render with \`just bench-charts\`)`)
    }
  }
  const ha = scenarios.filter((s) => s !== "throughput")
  if (ha.length > 0) {
    const haRows = yield* Effect.scoped(
      Effect.gen(function* () {
        const topo = yield* withDelay(haHosts(compose))
        return yield* haScenarios(topo, compose, {
          runDir,
          talonArgv,
          tsArgv: [process.execPath, "--import", "tsx"],
          readerScript: join(repoRoot, "bench", "multihost", "reader.ts"),
          settleSeconds: settle,
          scenarios: ha
        })
      })
    )
    rows.push(...haRows)
  }
  printTable(rows)
})

NodeRuntime.runMain(Effect.scoped(main))
