/**
 * talon gateway (cache route) against nginx as a caching reverse proxy (`proxy_cache` +
 * `slice 1m`), both in front of the same origin stub, on the same object, with the same client
 * and the same cores: warm reads of random aligned 64 KiB, 1 MiB and 8 MiB ranges and of the
 * whole 64 MiB object, paired order-swapped rounds per size. Arms: the gateway with auth off,
 * the gateway with SigV4 on, and nginx. Every byte of every response is checked. Not a CI gate.
 *
 *   npx tsx bench/gateway-nginx-bench.ts [--rounds 4] [--seconds 4] [--concurrency 8] [--sizes 64K,1M,8M,64M] [--no-write] [--mem-probe DIR]
 *
 * Processes: origin stub, coordinator, one worker, two gateways (auth off, auth on), two
 * co-located gateways (`talon gateway --colocate`: a worker in the gateway's process, each with
 * its own coordinator; auth off and on) and nginx (master + one worker), all pinned to CPU 0; this client pins itself to CPU 1. Without nginx
 * the nginx arm is skipped with a loud message saying how to install it, and no data is written.
 * Writes bench/data/gateway_nginx.json.
 *
 * Each talon process runs with the launcher's Node flags and environment for its role
 * (bin/talon.mjs: e.g. MALLOC_ARENA_MAX=2 for the gateway), as `talon ROLE` runs it.
 *
 * Diagnostics: --mem-probe DIR splits each gateway's RSS by mapping and V8 space after every run
 * (bench/gateway-nginx/memProbe.mjs; it allocates itself, so report RSS from runs without it).
 * Environment: GW_NODE_FLAGS adds Node flags to both gateways (e.g.
 * `--cpu-prof --cpu-prof-dir=/tmp/prof`; they then get 20 s to write their files at exit).
 * Arm `colocated-alt` (ask for it in --arms) is a second auth-off co-located gateway whose Node
 * flags are GW_ALT_NODE_FLAGS instead of the launcher's gateway flags: a paired, order-swapped
 * A/B of a flag (e.g. a semi-space size) against `colocated` in the same rounds; GW_ALT_ENV
 * ("NAME=value ...") adds environment to that arm only (e.g. `TALON_WORKER_SCRUB_RATE=0`);
 * GW_ALT_TALON runs that arm from another checkout's built `bin/talon.mjs` (a before/after A/B).
 */
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import {
  BENCH_DATA_SCHEMA,
  type BenchData,
  describeMachine,
  type Row,
  rowsFromRounds,
  today
} from "./lib/chartsData.js"
import { type Arm, runRounds } from "./lib/rounds.js"
import { sampleBytes } from "../src/origin/seed.js"
import { parseSize } from "../src/core/size.js"
import { AZ_KEY, BenchFailed, BLOCK, BUCKET, get, KEY, MiB, S3_CREDS, SIZE } from "./gateway-proxy/client.js"
import { type Metrics, plainPlanner, type Planned, rssMiB, runArm, sigv4Planner, type Target } from "./gateway-nginx/client.js"
import { childrenOf, findNginx, INSTALL_HINT, nginxCommand } from "./gateway-nginx/nginx.js"
import { repoRoot } from "./lib/args.js"
import { buildDist, stubBackendEnv, talonBin, talonEnv } from "./lib/build.js"
import { Flag, parseFlags, runDriver } from "./lib/driver.js"
import * as Proc from "./lib/proc.js"

const flags = await parseFlags("gateway-nginx-bench", "talon gateway's cache route vs nginx proxy_cache + slice in front of the same origin, warm ranges of 64 KiB to the whole object, paired order-swapped rounds.", {
  rounds: Flag.number("rounds", 4, "Measured rounds per range size."),
  seconds: Flag.number("seconds", 4, "Length of each measured run, seconds."),
  warmupSeconds: Flag.number("warmup-seconds", 4, "Length of each run of the discarded warmup round (the gateway's JIT), seconds."),
  concurrency: Flag.number("concurrency", 8, "Connections, one request in flight each."),
  sizes: Flag.text("sizes", "64K,1M,8M,64M", "Range sizes, comma-separated; the object's size means whole-object GETs (no Range header)."),
  cooldown: Flag.number("cooldown", 1, "Pause between runs, seconds."),
  noPin: Flag.bool("no-pin", "Do not pin servers to CPU 0 and this client to CPU 1."),
  noWrite: Flag.bool("no-write", "Print only; do not write bench/data/gateway_nginx.json."),
  arms: Flag.text("arms", "gateway,gateway-sigv4,colocated,colocated-sigv4,nginx", "Arms to run, comma-separated (nginx always runs: it is the baseline)."),
  memProbe: Flag.text("mem-probe", "", "Directory: preload bench/gateway-nginx/memProbe.mjs into every gateway (RSS by kind of mapping, V8 spaces, every second) and print the gateway's breakdown after each run."),
  machine: Flag.machine()
})
const pin = !flags.noPin
/** Downstream version caches (client stat, worker version) trusted this long, as in gateway-proxy-bench. */
const VERSION_TTL_MS = 30_000
const sizes = flags.sizes.split(",").map((s) => {
  const n = parseSize(s.trim())
  if (n._tag === "Left" || n.right <= 0 || n.right > SIZE || SIZE % n.right !== 0) throw new Error(`--sizes: ${s} must divide the ${SIZE / MiB} MiB object`)
  return n.right
})
const sizeName = (n: number) => (n === SIZE ? "whole64M" : n >= MiB ? `${n / MiB}M` : `${n / 1024}K`)

const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const s = net.createServer()
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port
      s.close(() => resolve(port))
    })
  })

const listening = /listening on (http:\/\/127\.0\.0\.1:\d+)/
const registered = async (adminPort: number): Promise<void> => {
  for (let i = 0; ; i++) {
    const r = await get(`http://127.0.0.1:${adminPort}`, "/api/v1/cluster", {}).catch(() => undefined)
    const members = r ? (JSON.parse(r.body.toString()) as { members: Array<unknown> }).members : []
    if (members.length >= 1) return
    if (i > 1800) throw new Error("the worker did not register")
    await new Promise((res) => setTimeout(res, 100))
  }
}
const gatewayNodeFlags = (process.env.GW_NODE_FLAGS ?? "").split(" ").filter((f) => f !== "")
const probeFlags = flags.memProbe === "" ? [] : ["--import", join(repoRoot, "bench/gateway-nginx/memProbe.mjs")]
const start = (name: string, argv: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Proc.spawn(name, argv, {
    env: flags.memProbe === "" ? env : { ...env, GW_MEM_PROBE_DIR: flags.memProbe },
    grace: gatewayNodeFlags.length > 0 ? "20 seconds" : "3 seconds",
    ...(pin ? { cpus: "0" } : {})
  })
/** The mem probe's latest line for `pid` (bench/gateway-nginx/memProbe.mjs), or "". */
const probeLine = (pid: number): string => {
  try {
    const lines = readFileSync(join(flags.memProbe, `${pid}.jsonl`), "utf8").trimEnd().split("\n")
    return lines[lines.length - 1] ?? ""
  } catch {
    return ""
  }
}

const main = Effect.gen(function* () {
  const nginx = findNginx()
  if ("missing" in nginx) {
    const bar = "!".repeat(78)
    console.error(`${bar}\n!! nginx arm SKIPPED: ${nginx.missing}.\n!! ${INSTALL_HINT}\n!! Nothing to compare against: no data written.\n${bar}`)
    process.exitCode = 3
    return
  }
  const dir = mkdtempSync(join(tmpdir(), "gateway-nginx-bench-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  if (pin) execFileSync("taskset", ["-pc", "1", String(process.pid)], { stdio: "ignore" })

  const object = sampleBytes(0, SIZE)
  mkdirSync(join(dir, "origin", BUCKET), { recursive: true })
  writeFileSync(join(dir, "origin", BUCKET, KEY), object)

  buildDist()
  // Each process with the launcher's flags for its role, as `talon ROLE` runs it.
  const [node, ...talon] = talonBin()
  const as = (role: string) => talonBin(role).slice(1)
  const altNodeFlags = (process.env.GW_ALT_NODE_FLAGS ?? "").split(" ").filter((f) => f !== "")
  // GW_ALT_TALON: another checkout's bin/talon.mjs (built) for the alt arm: an A/B of two builds in the same rounds.
  const altTalon = process.env.GW_ALT_TALON === undefined || process.env.GW_ALT_TALON === "" ? undefined : process.env.GW_ALT_TALON
  // GW_ALT_ENV: "NAME=value NAME=value" set for the alt arm only (e.g. TALON_WORKER_SCRUB_RATE=0).
  const altEnv = Object.fromEntries(
    (process.env.GW_ALT_ENV ?? "").split(" ").filter((f) => f.includes("=")).map((f) => [f.slice(0, f.indexOf("=")), f.slice(f.indexOf("=") + 1)])
  )
  const originPort = yield* Effect.promise(freePort)
  const originUrl = `http://127.0.0.1:${originPort}`
  const origin = yield* start("origin", [node!, ...talon, "origin", "--root", join(dir, "origin"), "--port", String(originPort)])
  const controlPort = yield* Effect.promise(freePort)
  const adminPort = yield* Effect.promise(freePort)
  const backend = stubBackendEnv(originUrl)
  const coordinator = yield* start("coordinator", [node!, ...as("coordinator"), "coordinator", "--listen", `127.0.0.1:${controlPort}`, "--admin-listen", `127.0.0.1:${adminPort}`], { ...talonEnv("coordinator"), ...backend })
  const worker = yield* start("worker", [node!, ...as("worker"), "worker", "--cache-dir", join(dir, "worker")], {
    ...talonEnv("worker"),
    ...backend,
    TALON_WORKER_ID: "worker-1",
    TALON_WORKER_COORDINATOR: `127.0.0.1:${controlPort}`,
    TALON_WORKER_DATA_ADDR: "127.0.0.1:0",
    TALON_WORKER_ADMIN_ADDR: "127.0.0.1:0",
    TALON_WORKER_CACHE_DIRS: join(dir, "worker"),
    TALON_WORKER_BLOCK_SIZE: String(BLOCK),
    TALON_WORKER_PAGE_SIZE: String(MiB),
    TALON_WORKER_VERSION_TTL_MS: String(VERSION_TTL_MS)
  })
  const gatewayEnv = {
    ...talonEnv("gateway"),
    ...backend,
    TALON_GATEWAY_ACCESS_KEY_ID: S3_CREDS.accessKeyId,
    TALON_GATEWAY_SECRET_ACCESS_KEY: S3_CREDS.secretAccessKey,
    TALON_GATEWAY_AZURE_ACCOUNT: "gatewaybench",
    TALON_GATEWAY_AZURE_KEY: AZ_KEY,
    TALON_CLIENT_STAT_TTL_MS: String(VERSION_TTL_MS)
  }
  const gateway = (auth: "on" | "off") =>
    start(`gateway-auth-${auth}`, [node!, ...probeFlags, ...gatewayNodeFlags, ...as("gateway"), "gateway", "--listen", "127.0.0.1:0", "--route", "cache", "--auth", auth, "--coordinator", `127.0.0.1:${controlPort}`, "--block-size", String(BLOCK)], gatewayEnv)
  const gwOff = yield* gateway("off")
  const gwOn = yield* gateway("on")
  // The separate gateway with the splice relay off: worker bodies through the cluster client's buffers.
  const gwPortable = flags.arms.split(",").some((a) => a.trim() === "gateway-portable")
    ? yield* start("gateway-portable", [node!, ...gatewayNodeFlags, ...talon, "gateway", "--listen", "127.0.0.1:0", "--route", "cache", "--auth", "off", "--coordinator", `127.0.0.1:${controlPort}`, "--block-size", String(BLOCK)], { ...gatewayEnv, TALON_GATEWAY_REMOTE_SPLICE: "off" })
    : undefined
  // Co-located: `talon gateway --colocate`, the worker in the gateway's process, each with a
  // coordinator of its own (one worker in its cluster, as the separate arms' worker is in theirs).
  const colocated = (auth: "on" | "off", alt = false) =>
    Effect.gen(function* () {
      const control = yield* Effect.promise(freePort)
      const admin = yield* Effect.promise(freePort)
      const coord = yield* start(`coordinator-colocated-${auth}`, [node!, ...as("coordinator"), "coordinator", "--listen", `127.0.0.1:${control}`, "--admin-listen", `127.0.0.1:${admin}`], { ...talonEnv("coordinator"), ...backend })
      const launch = alt ? [...altNodeFlags, ...(altTalon === undefined ? talon : [...talon.slice(0, -1), altTalon])] : as("gateway")
      const gw = yield* start(`colocated-auth-${auth}${alt ? "-alt" : ""}`, [node!, ...probeFlags, ...gatewayNodeFlags, ...launch, "gateway", "--colocate", "--listen", "127.0.0.1:0", "--route", "cache", "--auth", auth, "--coordinator", `127.0.0.1:${control}`, "--block-size", String(BLOCK)], {
        ...gatewayEnv,
        TALON_WORKER_ID: `colocated-${auth}${alt ? "-alt" : ""}`,
        TALON_WORKER_COORDINATOR: `127.0.0.1:${control}`,
        TALON_WORKER_DATA_ADDR: "127.0.0.1:0",
        TALON_WORKER_ADMIN_ADDR: "127.0.0.1:0",
        TALON_WORKER_CACHE_DIRS: join(dir, `colocated-${auth}${alt ? "-alt" : ""}`),
        TALON_WORKER_BLOCK_SIZE: String(BLOCK),
        TALON_WORKER_PAGE_SIZE: String(MiB),
        TALON_WORKER_VERSION_TTL_MS: String(VERSION_TTL_MS),
        ...(alt ? altEnv : {})
      })
      yield* coord.waitFor(/coordinator control on/, "180 seconds")
      const url = new URL((yield* gw.waitFor(listening, "180 seconds"))[1]!)
      yield* Effect.tryPromise({ catch: (e) => new BenchFailed({ message: (e as Error).message }), try: () => registered(admin) })
      return { gw, coord, url }
    })
  const nginxPort = yield* Effect.promise(freePort)
  const ngx = yield* start("nginx", nginxCommand(nginx.bin, join(dir, "nginx"), nginxPort, originPort))

  const [, offUrl, onUrl] = yield* Effect.all(
    [origin.waitFor(listening, "180 seconds"), gwOff.waitFor(listening, "180 seconds"), gwOn.waitFor(listening, "180 seconds"), coordinator.waitFor(/coordinator control on/, "180 seconds")],
    { concurrency: "unbounded" }
  ).pipe(Effect.map(([, a, b]) => [undefined, new URL(a[1]!), new URL(b[1]!)] as const))
  const portableUrl = gwPortable === undefined ? undefined : new URL((yield* gwPortable.waitFor(listening, "180 seconds"))[1]!)
  yield* Effect.tryPromise({ catch: (e) => new BenchFailed({ message: (e as Error).message }), try: () => registered(adminPort) })
  const wanted = new Set(flags.arms.split(",").map((a) => a.trim()))
  const coOff = wanted.has("colocated") ? yield* colocated("off") : undefined
  const coOn = wanted.has("colocated-sigv4") ? yield* colocated("on") : undefined
  const coAlt = wanted.has("colocated-alt") ? yield* colocated("off", true) : undefined
  const originGets = () => get(originUrl, "/_talon/stats", {}).then((r) => (JSON.parse(r.body.toString()) as { requests: { get: number } }).requests.get)

  // Arms: the server processes each one costs. The origin is in every arm (the gateway's stat
  // refreshes are HEADs to it; warm nginx sends it nothing).
  const sigv4 = yield* Effect.promise(() => sigv4Planner(onUrl.origin, SIZE))
  const all: Record<string, Target | undefined> = {
    "colocated": coOff && { host: "127.0.0.1", port: Number(coOff.url.port), plan: plainPlanner(SIZE), front: () => [coOff.gw.pid], pids: () => [coOff.gw.pid, coOff.coord.pid, origin.pid], memPids: () => [coOff.gw.pid] },
    "colocated-alt": coAlt && { host: "127.0.0.1", port: Number(coAlt.url.port), plan: plainPlanner(SIZE), front: () => [coAlt.gw.pid], pids: () => [coAlt.gw.pid, coAlt.coord.pid, origin.pid], memPids: () => [coAlt.gw.pid] },
    "colocated-sigv4": coOn && { host: "127.0.0.1", port: Number(coOn.url.port), plan: yield* Effect.promise(() => sigv4Planner(coOn.url.origin, SIZE)), front: () => [coOn.gw.pid], pids: () => [coOn.gw.pid, coOn.coord.pid, origin.pid], memPids: () => [coOn.gw.pid] },
    "gateway": { host: "127.0.0.1", port: Number(offUrl.port), plan: plainPlanner(SIZE), front: () => [gwOff.pid], pids: () => [gwOff.pid, worker.pid, coordinator.pid, origin.pid], memPids: () => [gwOff.pid, worker.pid] },
    "gateway-portable": gwPortable && portableUrl && { host: "127.0.0.1", port: Number(portableUrl.port), plan: plainPlanner(SIZE), front: () => [gwPortable.pid], pids: () => [gwPortable.pid, worker.pid, coordinator.pid, origin.pid], memPids: () => [gwPortable.pid, worker.pid] },
    "gateway-sigv4": { host: "127.0.0.1", port: Number(onUrl.port), plan: sigv4, front: () => [gwOn.pid], pids: () => [gwOn.pid, worker.pid, coordinator.pid, origin.pid], memPids: () => [gwOn.pid, worker.pid] },
    "nginx": { host: "127.0.0.1", port: nginxPort, plan: plainPlanner(SIZE), front: () => childrenOf(ngx.pid), pids: () => [ngx.pid, ...childrenOf(ngx.pid), origin.pid], memPids: () => [ngx.pid, ...childrenOf(ngx.pid)] }
  }
  const targets: Record<string, Target> = {}
  for (const [name, t] of Object.entries(all)) if (t !== undefined && (name === "nginx" || wanted.has(name))) targets[name] = t
  // nginx answers once its worker is up; poll with a real request.
  yield* Effect.tryPromise({
    catch: (e) => new BenchFailed({ message: `nginx did not come up: ${(e as Error).message}` }),
    try: async () => {
      for (let i = 0; ; i++) {
        const ok = await get(`http://127.0.0.1:${nginxPort}`, `/${BUCKET}/${KEY}`, { range: "bytes=0-0" }).then((r) => r.status === 206, () => false)
        if (ok) return
        if (i > 300) throw new Error("no 206 from nginx after 30 s")
        await new Promise((res) => setTimeout(res, 100))
      }
    }
  })

  // Warm pass: every range of every size through every arm, in order, each body's SHA-256
  // checked against the object's. Fills both caches, so measured reads are hits.
  const idleRss: Record<string, number> = {}
  for (const [name, t] of Object.entries(targets)) {
    idleRss[name] = Math.round(rssMiB(t.memPids()) * 10) / 10
    for (const size of sizes) {
      yield* Effect.tryPromise({
        catch: (e) => new BenchFailed({ message: `warm pass, ${name}, ${sizeName(size)}: ${(e as Error).message}` }),
        try: () => warmPass(t, object, size)
      })
    }
  }
  const warmGets = yield* Effect.promise(originGets)
  console.log(
    `nginx ${nginx.version} on :${nginxPort}; gateways auth off ${offUrl.origin}, auth on ${onUrl.origin}; origin ${originUrl} served ${warmGets} GETs while warming; ` +
      `idle RSS MiB ${JSON.stringify(idleRss)}; pids ${JSON.stringify(Object.fromEntries(Object.entries(targets).map(([n, t]) => [n, t.memPids()])))}; ${flags.concurrency} connections, ${flags.rounds} rounds × ${flags.seconds} s per size${pin ? "; servers on CPU 0, client on CPU 1" : ""}`
  )

  let seed = 1
  const allRuns: Array<Row> = []
  const allSummary: Array<Row> = []
  const allRatios: Array<Row> = []
  const verdicts: Array<string> = []
  for (const size of sizes) {
    const slots = SIZE / size
    const nextOffset = () => {
      seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0
      return ((seed >>> 8) % slots) * size
    }
    const arms: Array<Arm<Metrics, BenchFailed>> = Object.entries(targets).map(([name, target]) => ({
      name: `${name} ${sizeName(size)}`,
      run: (ctx) => runArm(target, { object, size, concurrency: flags.concurrency, seconds: ctx.warmup ? flags.warmupSeconds : flags.seconds, nextOffset, originGets })
    }))
    const report = yield* runRounds(arms, {
      rounds: flags.rounds,
      warmupRound: true,
      coolDown: `${flags.cooldown} seconds`,
      baseline: `nginx ${sizeName(size)}`,
      onRun: (r) =>
        Effect.sync(() =>
          console.log(
            `${r.warmup ? "warmup " : `round ${r.round}`} ${r.arm.padEnd(22)} rps ${String(r.result.rps).padStart(7)}  MiB/s ${String(r.result.mib_s).padStart(7)}  p50 ${String(r.result.p50_ms).padStart(7)} ms  p99 ${String(r.result.p99_ms).padStart(7)} ms  ` +
              `server ${r.result.server_cpu_ms_per_req} ms/req (${r.result.server_cores} cores, front ${r.result.front_cpu_ms_per_req})  client ${r.result.client_cores} cores  RSS ${r.result.rss_mib} MiB  origin GETs ${r.result.origin_gets}` +
              (flags.memProbe === "" || r.arm.startsWith("nginx") ? "" : `\n    mem ${probeLine(targets[r.arm.slice(0, r.arm.lastIndexOf(" "))]!.memPids()[0]!)}`)
          )
        )
    })
    const rows = rowsFromRounds(report, (m) => ({ ...m }))
    const tag = (r: Row): Row => ({ ...r, size: sizeName(size) })
    allRuns.push(...rows.runs.map(tag))
    allSummary.push(...rows.summary.map(tag))
    allRatios.push(...rows.ratios.map(tag))
    const ratio = (arm: string, metric: string) => report.ratios[`${arm} ${sizeName(size)}`]?.[metric]?.median ?? NaN
    const rpsTarget = size === 64 * 1024 ? 0.8 : 1.0
    for (const arm of Object.keys(targets).filter((a) => a !== "nginx")) {
      const target = arm.endsWith("-sigv4") && size === MiB ? 0.9 : rpsTarget
      const rps = ratio(arm, "rps")
      const cpu = ratio(arm, "server_cpu_ms_per_req")
      const p99 = ratio(arm, "p99_ms")
      verdicts.push(
        `${sizeName(size).padEnd(8)} ${arm.padEnd(15)} rps × ${rps.toFixed(3)} of nginx (target ≥ ${target}: ${rps >= target ? "MET" : "NOT MET"}), ` +
          `CPU/req × ${cpu.toFixed(2)}${size === MiB && !arm.endsWith("-sigv4") ? ` (target ≤ 1.25: ${cpu <= 1.25 ? "MET" : "NOT MET"})` : ""}, p99 × ${p99.toFixed(2)} (target ≤ 1.5: ${p99 <= 1.5 ? "MET" : "NOT MET"})`
      )
    }
    for (const arm of ["gateway", "colocated", "colocated-alt"].filter((a) => a in targets)) {
      const g = report.summary[`${arm} ${sizeName(size)}`]?.["rss_mib"]?.max ?? NaN
      verdicts.push(`${sizeName(size).padEnd(8)} ${arm} RSS under load: peak ${g} MiB (gateway + worker), idle ${idleRss[arm]} MiB: growth ${(g - idleRss[arm]!).toFixed(1)} MiB (target ≤ 32)`)
    }
  }
  console.log("\n" + verdicts.join("\n"))

  if (flags.noWrite) return
  const data: BenchData = {
    schema: BENCH_DATA_SCHEMA,
    id: "gateway_nginx",
    title: `talon gateway (cache route) vs nginx proxy_cache + slice 1m, warm reads, ${flags.concurrency} connections`,
    measures:
      `Warm GETs of random aligned ranges (${sizes.map(sizeName).join(", ")}) of one ${SIZE / MiB} MiB object, ${flags.concurrency} keep-alive connections with one request in flight each, ${flags.seconds} s per run, ` +
      `through talon gateway's cache route (one worker; auth off, and SigV4 on) and through nginx ${nginx.version} (proxy_cache, slice 1m, one worker process) in front of the same origin stub. ` +
      "rps, MiB/s, latency percentiles, CPU per request and peak RSS of each arm's server processes. Every byte of every response is compared with the object.",
    caveats: [
      "All servers share CPU 0 and the client has CPU 1 of a 2-vCPU VM shared with other work; absolute numbers are this box on that day, compare the per-round ratios (arms of one size run in the same round, order swapped).",
      "Server CPU per arm: gateway = gateway + worker + coordinator + origin stub; nginx = master + worker + origin stub. RSS per arm: gateway + worker; nginx master + worker. Warm, the origin serves no GETs (origin_gets); the gateway still sends it a HEAD per object per stat TTL (1 s, refreshed ahead), nginx nothing (proxy_cache_valid 1h: it never revalidates within the hour).",
      "nginx runs with tcp_nopush off (its default; Debian's sample nginx.conf turns it on): with it on, ranges ending inside a cached slice stalled ~40-50 ms each on keep-alive connections.",
      `Talon's version caches downstream of the gateway were trusted for ${VERSION_TTL_MS / 1000} s (TALON_CLIENT_STAT_TTL_MS, TALON_WORKER_VERSION_TTL_MS), as in gateway-proxy-bench.`,
      "The measured client compares every body byte with the object (memcmp) instead of hashing: SHA-256 at ~1 GiB/s on one core would cap the fastest arm. The warm pass checked the SHA-256 of every range of every size through every arm.",
      `The discarded warmup round (${flags.warmupSeconds} s per arm and size) brings the gateway's JIT up; client_cores near 1 would mean the client, not the server, set the pace.`,
      ...(coAlt === undefined ? [] : [`Arm colocated-alt is the auth-off co-located gateway started with Node flags "${altNodeFlags.join(" ")}" instead of the launcher's gateway flags: an A/B of those flags against colocated in the same rounds.`])
    ],
    command: `${coAlt === undefined ? "" : `GW_ALT_NODE_FLAGS="${altNodeFlags.join(" ")}" `}npx tsx bench/gateway-nginx-bench.ts --arms ${flags.arms} --rounds ${flags.rounds} --seconds ${flags.seconds} --concurrency ${flags.concurrency} --sizes ${flags.sizes}${pin ? "" : " --no-pin"}`,
    date: today(),
    machine: describeMachine(flags.machine),
    params: {
      object_size: SIZE,
      sizes: sizes.map(sizeName).join(","),
      concurrency: flags.concurrency,
      rounds: flags.rounds,
      seconds_per_run: flags.seconds,
      nginx: nginx.version,
      nginx_slice: MiB,
      block_size: BLOCK,
      page_size: MiB,
      workers: 1,
      version_ttl_ms: VERSION_TTL_MS,
      pinned: pin,
      idle_rss_mib: JSON.stringify(idleRss)
    },
    runs: allRuns,
    summary: allSummary,
    ratios: allRatios,
    charts: [
      {
        id: "rps-ratio",
        title: "Gateway rps ÷ nginx rps per range size (median of per-round ratios, min–max)",
        data: "ratios",
        mark: "bar",
        filter: { metric: "rps" },
        x: { field: "arm", title: "arm and range size", type: "nominal" },
        y: { field: "median", title: "× nginx rps" },
        errorBars: { low: "min", high: "max" },
        rule: { y: 1, label: "nginx" }
      },
      {
        id: "cpu",
        title: "Server CPU per request (ms, median of rounds, min–max)",
        data: "summary",
        mark: "bar",
        filter: { metric: "server_cpu_ms_per_req" },
        x: { field: "arm", title: "arm and range size", type: "nominal" },
        y: { field: "median", title: "CPU ms / request", scale: "log" },
        errorBars: { low: "min", high: "max" }
      }
    ],
    tables: [
      {
        id: "summary",
        title: "Per arm and size, median over rounds (min–max)",
        data: "summary",
        filter: { metric: ["rps", "mib_s", "p50_ms", "p99_ms", "server_cpu_ms_per_req", "front_cpu_ms_per_req", "rss_mib", "client_cores"] },
        columns: [
          { field: "arm", title: "arm" },
          { field: "metric", title: "metric" },
          { field: "median", title: "median", digits: 2 },
          { field: "min", title: "min", digits: 2 },
          { field: "max", title: "max", digits: 2 }
        ]
      },
      {
        id: "ratios",
        title: "Per-round ratios to nginx at the same size",
        data: "ratios",
        filter: { metric: ["rps", "p99_ms", "server_cpu_ms_per_req", "rss_mib"] },
        columns: [
          { field: "arm", title: "arm" },
          { field: "metric", title: "metric" },
          { field: "median", title: "median", digits: 3 },
          { field: "min", title: "min", digits: 3 },
          { field: "max", title: "max", digits: 3 },
          { field: "per_round", title: "per round" }
        ]
      }
    ]
  }
  const out = join(repoRoot, "bench/data/gateway_nginx.json")
  writeFileSync(out, JSON.stringify(data, null, 2) + "\n")
  console.log(`wrote ${out}`)
})

/** Every `size` range of the object, one request at a time, each body's SHA-256 checked. */
const warmPass = async (t: Target, object: Buffer, size: number): Promise<void> => {
  for (let off = 0; off < SIZE; off += size) {
    const req: Planned = await t.plan(off, size)
    const r = await get(`http://${t.host}:${t.port}`, req.path, req.headers)
    if (r.status !== req.status) throw new Error(`HTTP ${r.status} for [${off}, ${off + size}): ${r.body.toString().slice(0, 300)}`)
    const want = createHash("sha256").update(object.subarray(off, off + size)).digest("hex")
    const got = createHash("sha256").update(r.body).digest("hex")
    if (got !== want) throw new Error(`SHA-256 of [${off}, ${off + size}) is ${got}, want ${want}`)
  }
}
runDriver(main)
