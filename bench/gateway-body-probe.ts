/**
 * What the gateway's body path could cost: a bare node:http server answering warm Range GETs
 * of a 64 MiB file, the body copied through JavaScript (read into a buffer, written) against
 * sent with the native addon's sendfile on the HTTP socket's fd. No routing, no auth, no cache
 * lookup: the floor under the gateway's own per-request work, to set beside nginx's numbers in
 * gateway-nginx-bench. Server on CPU 0, this client on CPU 1, paired order-swapped rounds, every
 * byte checked. Prints only. Arm `effect` (`--arms copy,effect`) is the copy on @effect/platform's
 * HttpServer + HttpRouter instead of a bare node:http handler: what that front end costs per request.
 *
 *   npx tsx bench/gateway-body-probe.ts [--size 1M] [--rounds 4] [--seconds 3] [--arms copy,sendfile,effect]
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { parseSize } from "../src/core/size.js"
import { sampleBytes } from "../src/origin/seed.js"
import { defaultAddonPath } from "../src/worker/plane/NativeAddon.js"
import { plainPlanner, runArm, type Target } from "./gateway-nginx/client.js"
import { repoRoot } from "./lib/args.js"
import { Flag, parseFlags, runDriver } from "./lib/driver.js"
import * as Proc from "./lib/proc.js"
import { runRounds } from "./lib/rounds.js"

const flags = await parseFlags("gateway-body-probe", "node:http serving warm ranges of a file: body copied through JS vs sendfile by the native addon.", {
  size: Flag.text("size", "1M", "Range size (divides 64 MiB)."),
  rounds: Flag.number("rounds", 4, "Measured rounds."),
  seconds: Flag.number("seconds", 3, "Seconds per run."),
  concurrency: Flag.number("concurrency", 8, "Connections, one request in flight each."),
  arms: Flag.text("arms", "copy,sendfile", "Arms, comma-separated, of copy (the baseline), sendfile, effect (the copy on @effect/platform's HttpServer) and raw (net.Server, head parsed by hand, head + range by one sendfile).")
})
const SIZE = 64 * 1024 * 1024

const main = Effect.gen(function* () {
  const parsed = parseSize(flags.size)
  if (parsed._tag === "Left" || SIZE % parsed.right !== 0) return yield* Effect.fail(new Error(`--size ${flags.size} must divide 64 MiB`))
  const size = parsed.right
  const dir = mkdtempSync(join(tmpdir(), "gateway-body-probe-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  execFileSync("taskset", ["-pc", "1", String(process.pid)], { stdio: "ignore" })
  const object = sampleBytes(0, SIZE)
  const file = join(dir, "object.bin")
  writeFileSync(file, object)
  const server = (mode: string) =>
    Effect.gen(function* () {
      const argv =
        mode === "effect"
          ? [process.execPath, join(repoRoot, "bench/gateway-nginx/httpServerProbe.mjs"), file]
          : [process.execPath, join(repoRoot, "bench/gateway-nginx/bodyProbeServer.mjs"), file, mode, defaultAddonPath]
      const p = yield* Proc.spawn(`probe-${mode}`, argv, { cpus: "0", grace: "2 seconds" })
      const port = Number((yield* p.waitFor(/port (\d+)/, "30 seconds"))[1])
      const target: Target = { host: "127.0.0.1", port, plan: plainPlanner(SIZE), front: () => [p.pid], pids: () => [p.pid], memPids: () => [p.pid] }
      return target
    })
  const names = flags.arms.split(",").map((a) => a.trim())
  if (!names.includes("copy") || names.some((a) => !["copy", "sendfile", "effect", "raw"].includes(a))) {
    return yield* Effect.fail(new Error(`--arms ${flags.arms}: copy (the baseline) and any of sendfile, effect, raw`))
  }
  const targets = new Map<string, Target>()
  for (const name of names) targets.set(name, yield* server(name))
  let seed = 1
  const nextOffset = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0), ((seed >>> 8) % (SIZE / size)) * size)
  const opts = { object, size, concurrency: flags.concurrency, seconds: flags.seconds, nextOffset, originGets: async () => 0 }
  const report = yield* runRounds(
    names.map((name) => ({ name, run: () => runArm(targets.get(name)!, opts) })),
    {
      rounds: flags.rounds,
      warmupRound: true,
      baseline: "copy",
      onRun: (r) => Effect.sync(() => console.log(`${r.warmup ? "warmup " : `round ${r.round}`} ${r.arm.padEnd(8)} rps ${r.result.rps}  CPU ${r.result.server_cpu_ms_per_req} ms/req  p50 ${r.result.p50_ms} ms  p99 ${r.result.p99_ms} ms  RSS ${r.result.rss_mib} MiB`))
    }
  )
  console.log("")
  for (const name of names.filter((n) => n !== "copy")) {
    const r = report.ratios[name]!
    console.log(`${name} / copy per round: rps ${r["rps"]!.perRound.map((x) => x.toFixed(2)).join(" ")}; CPU per request ${r["server_cpu_ms_per_req"]!.perRound.map((x) => x.toFixed(2)).join(" ")}`)
  }
})

runDriver(main)
