/**
 * The gateway as a proxy, four arms in one run — S3 × {cache, origin} and Azure ×
 * {cache, origin} — plus a control arm straight to the origin, all against one origin
 * stub with a realistic, variable latency (lognormal). 1 MiB ranges (aligned, random)
 * of a 64 MiB object, a fixed number of requests per arm per round at a fixed
 * concurrency, paired order-swapped rounds (bench/lib/rounds.ts). Every response is
 * SHA-256-checked: a wrong byte fails the run. Not a CI gate.
 *
 *   npx tsx bench/gateway-proxy-bench.ts [--rounds 5] [--requests 200] [--warmup-requests 1500] [--concurrency 8]
 *       [--latency-ms 50] [--sigma 0.8] [--cooldown 1] [--no-pin] [--no-write] [--arms s3-cache,azure-cache]
 *
 * Processes: origin stub, coordinator, two workers, and one `talon gateway` per route,
 * all pinned to CPU 0; this script (the client) pins itself to CPU 1. Writes
 * bench/data/gateway_proxy.json (unless --no-write) and prints per-run lines, the
 * summary and the verdicts against the targets (cache ≥ 2× origin rps, ≥ 10× lower p99;
 * S3 and Azure within the run-to-run noise of each other).
 *
 * Diagnostics (environment): GW_SLOW=<ms> prints every request slower than that with its
 * position in the run; GW_TRACE=<file> runs the gateways with --trace-gc and writes the
 * cache gateway's output there at exit; GW_NODE_FLAGS adds Node flags to both gateways;
 * GW_PROF=<dir> writes CPU profiles.
 */
import { spawn, execFileSync, type ChildProcess } from "node:child_process"
import { createHash } from "node:crypto"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Data, Effect } from "effect"
import { sharedKeyAuthorization } from "../src/backend/azureSharedKey.js"
import * as S3Backend from "../src/backend/S3.js"
import {
  type BenchData,
  BENCH_DATA_SCHEMA,
  describeMachine,
  ratioTable,
  rowsFromRounds,
  type Row,
  summaryTable,
  today
} from "./lib/chartsData.js"
import { type Arm, runRounds, spread } from "./lib/rounds.js"
import { clockTicks, parseStat } from "../src/loadgen/procSampler.js"
import { quantile } from "../src/loadgen/quantile.js"
import { sampleBytes } from "../src/origin/seed.js"
import { repoRoot, scriptArgs } from "./lib/args.js"
import { buildDist, talonBin } from "./lib/build.js"

const root = repoRoot
const args = scriptArgs()
const flag = args.string
const has = args.has
const rounds = args.number("rounds", 5)
const requests = args.number("requests", 200)
/**
 * Requests per arm in the discarded warmup round. The gateway's per-request code reaches
 * V8's optimizing tier only after a few thousand requests (measured: gateway CPU 2.4-3.0
 * ms/req after 300 warmup requests, 1.6-1.8 after 3000), so a short warmup would measure
 * the JIT, not the gateway a deployment runs for days.
 */
const warmupRequests = args.number("warmup-requests", 1500)
const concurrency = args.number("concurrency", 8)
const latencyMs = args.number("latency-ms", 50)
const sigma = args.number("sigma", 0.8)
const cooldown = args.number("cooldown", 1)
const pin = !has("no-pin")
const machineName = args.machine()

const MiB = 1024 * 1024
const SIZE = 64 * MiB
const BLOCK = 8 * MiB
const BUCKET = "proxybench"
const KEY = "object-64m.bin"
const ACCOUNT = "gatewaybench"
const AZ_KEY = Buffer.from("gateway proxy bench account key!").toString("base64")
const S3_CREDS = { accessKeyId: "gateway-bench", secretAccessKey: "gateway-bench-secret" }
/** Downstream version caches (client stat, worker version) are trusted this long; see caveats. */
const VERSION_TTL_MS = 30_000

class BenchFailed extends Data.TaggedError("BenchFailed")<{ readonly message: string }> {}

// ---------------------------------------------------------------- processes

interface Proc {
  readonly name: string
  readonly child: ChildProcess
  readonly output: () => string
}

const procs: Array<Proc> = []
/** Node flags for the gateways from the diagnostics environment (they go before the script path). */
const gatewayNodeFlags = (): ReadonlyArray<string> => [
  ...(process.env.GW_PROF ? ["--cpu-prof", "--cpu-prof-dir", process.env.GW_PROF] : []),
  ...(process.env.GW_TRACE ? ["--trace-gc"] : []),
  ...(process.env.GW_NODE_FLAGS ? process.env.GW_NODE_FLAGS.split(" ").filter((f) => f !== "") : [])
]

const start = (name: string, argv: ReadonlyArray<string>, env: Record<string, string> = {}): Proc => {
  const cmd = pin ? ["taskset", "-c", "0", ...argv] : [...argv]
  const child = spawn(cmd[0]!, cmd.slice(1), { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] })
  let out = ""
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()))
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()))
  const p = { name, child, output: () => out }
  procs.push(p)
  return p
}

/** Profiling flags write their files at a normal exit: those runs stop gently and wait for it. */
const profiling = process.env.GW_PROF !== undefined || /prof/.test(process.env.GW_NODE_FLAGS ?? "")
const running = (p: Proc) => p.child.exitCode === null && p.child.signalCode === null
const stopAll = () => {
  for (const p of procs) if (running(p)) p.child.kill(profiling ? "SIGTERM" : "SIGKILL")
}
process.on("exit", stopAll)
/** Stops every process and, when profiling, waits (up to 20 s) until they have exited. */
const stopAndWait = async (): Promise<void> => {
  stopAll()
  for (let i = 0; profiling && i < 200 && procs.some(running); i++) await new Promise((r) => setTimeout(r, 100))
}

const waitFor = (p: Proc, re: RegExp, what: string, timeoutMs = 180_000): Promise<RegExpMatchArray> =>
  new Promise((resolve, reject) => {
    const t0 = Date.now()
    const tick = () => {
      const m = p.output().match(re)
      if (m) return resolve(m)
      if (p.child.exitCode !== null) return reject(new Error(`${p.name} exited (${p.child.exitCode}) before ${what}:\n${p.output()}`))
      if (Date.now() - t0 > timeoutMs) return reject(new Error(`${p.name}: no ${what} within ${timeoutMs} ms:\n${p.output()}`))
      setTimeout(tick, 100)
    }
    tick()
  })

const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const s = net.createServer()
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port
      s.close(() => resolve(port))
    })
  })

/** utime + stime of the given processes, in seconds. */
const cpuSeconds = (pids: ReadonlyArray<number>): number => {
  let ticks = 0
  for (const pid of pids) {
    const t = parseStat(readFileSync(`/proc/${pid}/stat`, "utf8"))
    if (t) ticks += t.utime + t.stime
  }
  return ticks / clockTicks()
}

const loadavg = (): number => Number(readFileSync("/proc/loadavg", "utf8").split(" ")[0])

// ---------------------------------------------------------------- client

const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency * 2 })

interface Reply {
  readonly status: number
  readonly body: Buffer
}

const get = (url: string, path: string, headers: Record<string, string>): Promise<Reply> =>
  new Promise((resolve, reject) => {
    const u = new URL(url)
    const req = http.request({ host: u.hostname, port: u.port, method: "GET", path, headers, agent }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }))
      res.on("error", reject)
    })
    req.on("error", reject)
    req.end()
  })

/** Bytes of a read decoded at a time while looking for the end of a response head. */
const HEAD_SCAN = 4096

/**
 * The measured client: one keep-alive HTTP/1.1 connection per in-flight request slot,
 * reading into one static buffer (`onread`) and hashing the body as it arrives, so
 * no body is ever allocated, concatenated or left for the GC. node:http plus a
 * Buffer.concat and a hash cost ~2× the CPU per MiB; at a few hundred MiB/s on its one
 * core that made the client the bottleneck. Bodies are framed by Content-Length
 * (every server measured here sends it); anything else fails the run.
 */
class BenchConnection {
  private readonly socket: net.Socket
  private readonly buf = Buffer.allocUnsafe(256 * 1024)
  private head = ""
  private remaining = -1
  private status = 0
  private length = 0
  private hash = createHash("sha256")
  private errorBody: Array<Buffer> = []
  private pending: { resolve: (r: BenchReply) => void; reject: (e: Error) => void } | undefined
  private failure: Error | undefined

  constructor(private readonly host: string, private readonly port: number) {
    this.socket = net.connect({ host, port, onread: { buffer: this.buf, callback: (n: number) => (this.onRead(n), true) } })
    this.socket.setNoDelay(true)
    this.socket.on("error", (e) => this.fail(e))
    this.socket.on("close", () => this.fail(new Error(`connection to ${host}:${port} closed`)))
  }

  get(path: string, headers: Record<string, string>): Promise<BenchReply> {
    if (this.failure !== undefined) return Promise.reject(this.failure)
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject }
      this.head = ""
      this.remaining = -1
      this.hash = createHash("sha256")
      this.errorBody = []
      let req = `GET ${path} HTTP/1.1\r\n`
      if (!Object.keys(headers).some((k) => k.toLowerCase() === "host")) req += `Host: ${this.host}:${this.port}\r\n`
      for (const [k, v] of Object.entries(headers)) req += `${k}: ${v}\r\n`
      this.socket.write(req + "\r\n", "latin1")
    })
  }

  close(): void {
    this.socket.destroy()
  }

  private fail(e: Error): void {
    this.failure ??= e
    const p = this.pending
    this.pending = undefined
    p?.reject(e)
  }

  private onRead(n: number): void {
    const b = this.buf
    let p = 0
    while (p < n) {
      if (this.remaining < 0) {
        // Only the head becomes a string, a few KiB at a time: decoding the whole read (up to
        // 256 KiB of body after the head) allocated ~250 KB per response, and the client's own
        // GC pauses then showed up in every in-flight request's latency.
        const upTo = Math.min(n, p + HEAD_SCAN)
        const text = this.head + b.toString("latin1", p, upTo)
        const at = text.indexOf("\r\n\r\n")
        if (at < 0) {
          this.head = text
          p = upTo
          continue
        }
        p += at + 4 - this.head.length
        this.head = ""
        const headText = text.slice(0, at)
        this.status = Number(headText.slice(9, 12))
        const m = /\r\ncontent-length:[ \t]*(\d+)/i.exec(headText)
        if (m === null) return this.fail(new Error(`response without Content-Length: ${headText.slice(0, 300)}`))
        this.length = this.remaining = Number(m[1])
      }
      const take = Math.min(this.remaining, n - p)
      // update() consumes the bytes before returning, so the static buffer can be read into again.
      if (this.status === 206 || this.status === 200) this.hash.update(b.subarray(p, p + take))
      else this.errorBody.push(Buffer.from(b.subarray(p, p + take)))
      this.remaining -= take
      p += take
      if (this.remaining === 0) {
        this.remaining = -1
        const ok = this.status === 206 || this.status === 200
        const reply = { status: this.status, length: this.length, sha256: ok ? this.hash.digest("hex") : "", errorBody: Buffer.concat(this.errorBody).toString() }
        const pending = this.pending
        this.pending = undefined
        pending?.resolve(reply)
      }
    }
  }
}

interface BenchReply {
  readonly status: number
  readonly length: number
  readonly sha256: string
  readonly errorBody: string
}

type Signer = (offset: number) => Promise<{ readonly path: string; readonly headers: Record<string, string> }>

const s3Signer = (url: string): Signer => {
  const sign = S3Backend.makeS3Signer(S3Backend.localOptions(url, S3_CREDS))
  return async (offset) => {
    const req = await sign({ method: "GET", bucket: BUCKET, key: KEY, query: {}, headers: { range: `bytes=${offset}-${offset + MiB - 1}` } })
    return { path: req.path, headers: req.headers }
  }
}

const azureSigner = (): Signer => async (offset) => {
  const path = `/${ACCOUNT}/${BUCKET}/${KEY}`
  const headers: Record<string, string> = {
    "x-ms-date": new Date().toUTCString(),
    "x-ms-version": "2021-12-02",
    "x-ms-range": `bytes=${offset}-${offset + MiB - 1}`
  }
  headers.authorization = sharedKeyAuthorization(ACCOUNT, AZ_KEY, { method: "GET", path, query: {}, headers })
  return { path, headers }
}

/** What one arm's run measured. */
interface Metrics {
  readonly rps: number
  readonly mib_s: number
  readonly p50_ms: number
  readonly p99_ms: number
  readonly max_ms: number
  readonly requests: number
  /** CPU of the process the arm talks to (the gateway; the origin for the control arm), ms per request. */
  readonly front_cpu_ms_per_req: number
  /** CPU of every server-side process (origin, coordinator, workers, both gateways), ms per request. */
  readonly server_cpu_ms_per_req: number
  /** Server-side cores busy over the run. */
  readonly server_cores: number
  readonly client_cores: number
  /** Origin GETs per client request (0 for a warm cache). */
  readonly origin_gets_per_req: number
  /** Origin HEADs during the run (stat refreshes by the gateway, client and workers). */
  readonly origin_heads: number
  /** The slowest of the unmeasured first requests (one per connection) before the run. */
  readonly first_wave_ms: number
  readonly load1: number
}


const main = Effect.gen(function* () {
  const dir = mkdtempSync(join(tmpdir(), "gateway-proxy-bench-"))
  yield* Effect.addFinalizer(() =>
    Effect.promise(async () => {
      await stopAndWait()
      rmSync(dir, { recursive: true, force: true })
    })
  )
  if (pin) execFileSync("taskset", ["-pc", "1", String(process.pid)], { stdio: "ignore" })

  // The object, and the SHA-256 of every 1 MiB aligned range of it.
  const object = sampleBytes(0, SIZE)
  mkdirSync(join(dir, "origin", BUCKET), { recursive: true })
  writeFileSync(join(dir, "origin", BUCKET, KEY), object)
  const expected = Array.from({ length: SIZE / MiB }, (_, i) => createHash("sha256").update(object.subarray(i * MiB, (i + 1) * MiB)).digest("hex"))

  buildDist()
  // Node, the launcher's flags and bin/talon.mjs: every process runs as `npx talon` runs it.
  const [node, ...talon] = talonBin()
  const originPort = yield* Effect.promise(freePort)
  const origin = start("origin", [node!, ...talon, "origin", "--root", join(dir, "origin"), "--port", String(originPort)])
  const controlPort = yield* Effect.promise(freePort)
  const adminPort = yield* Effect.promise(freePort)
  const coordinator = start("coordinator", [node!, ...talon, "coordinator", "--listen", `127.0.0.1:${controlPort}`, "--admin-listen", `127.0.0.1:${adminPort}`], {
    TALON_S3_ENDPOINT: `http://127.0.0.1:${originPort}`,
    TALON_S3_ACCESS_KEY_ID: "talon",
    TALON_S3_SECRET_ACCESS_KEY: "talon-secret",
    TALON_AZURE_ACCOUNT: "devstoreaccount1",
    TALON_AZURE_ENDPOINT: `http://127.0.0.1:${originPort}/devstoreaccount1`,
    TALON_AZURE_KEY: AZ_KEY
  })
  const originEnv = {
    TALON_S3_ENDPOINT: `http://127.0.0.1:${originPort}`,
    TALON_S3_ACCESS_KEY_ID: "talon",
    TALON_S3_SECRET_ACCESS_KEY: "talon-secret",
    TALON_AZURE_ACCOUNT: "devstoreaccount1",
    TALON_AZURE_ENDPOINT: `http://127.0.0.1:${originPort}/devstoreaccount1`,
    TALON_AZURE_KEY: AZ_KEY
  }
  const workers = ["worker-1", "worker-2"].map((id) =>
    start(id, [node!, ...talon, "worker", "--cache-dir", join(dir, id)], {
      ...originEnv,
      TALON_WORKER_ID: id,
      TALON_WORKER_COORDINATOR: `127.0.0.1:${controlPort}`,
      TALON_WORKER_DATA_ADDR: "127.0.0.1:0",
      TALON_WORKER_ADMIN_ADDR: "127.0.0.1:0",
      TALON_WORKER_CACHE_DIRS: join(dir, id),
      TALON_WORKER_BLOCK_SIZE: String(BLOCK),
      TALON_WORKER_PAGE_SIZE: String(MiB),
      TALON_WORKER_VERSION_TTL_MS: String(VERSION_TTL_MS)
    })
  )
  const gatewayEnv = {
    ...originEnv,
    TALON_GATEWAY_ACCESS_KEY_ID: S3_CREDS.accessKeyId,
    TALON_GATEWAY_SECRET_ACCESS_KEY: S3_CREDS.secretAccessKey,
    TALON_GATEWAY_AZURE_ACCOUNT: ACCOUNT,
    TALON_GATEWAY_AZURE_KEY: AZ_KEY,
    TALON_CLIENT_STAT_TTL_MS: String(VERSION_TTL_MS)
  }
  const gatewayArgs = (route: string) =>
    // From dist/ like every other process (no tsx loader thread in the measured process).
    [node!, ...gatewayNodeFlags(), ...talon, "gateway", "--listen", "127.0.0.1:0", "--route", route, "--auth", "on", "--coordinator", `127.0.0.1:${controlPort}`, "--block-size", String(BLOCK)]
  const gwCache = start("gateway-cache", gatewayArgs("cache"), gatewayEnv)
  if (process.env.GW_TRACE) process.on("exit", () => writeFileSync(process.env.GW_TRACE!, gwCache.output()))
  const gwOrigin = start("gateway-origin", gatewayArgs("origin"), gatewayEnv)

  const urls = yield* Effect.promise(() =>
    Promise.all([
      waitFor(origin, /listening on (http:\/\/127\.0\.0\.1:\d+)/, "origin"),
      waitFor(gwCache, /listening on (http:\/\/127\.0\.0\.1:\d+)/, "gateway"),
      waitFor(gwOrigin, /listening on (http:\/\/127\.0\.0\.1:\d+)/, "gateway"),
      waitFor(coordinator, /coordinator control on/, "coordinator")
    ])
  )
  const [originUrl, cacheUrl, originRouteUrl] = [urls[0][1]!, urls[1][1]!, urls[2][1]!]
  yield* Effect.promise(async () => {
    for (let i = 0; ; i++) {
      const r = await get(`http://127.0.0.1:${adminPort}`, "/api/v1/cluster", {}).catch(() => undefined)
      const members = r ? (JSON.parse(r.body.toString()) as { members: Array<unknown> }).members : []
      if (members.length >= 2) return
      if (i > 1800) throw new Error(`workers did not register:\n${workers.map((w) => w.output()).join("\n")}`)
      await new Promise((res) => setTimeout(res, 100))
    }
  })
  // The origin's latency applies to every request it serves (HEADs, worker fills, reads).
  const faults = { latency: { kind: "lognormal", medianMs: latencyMs, sigma, maxMs: 2000 }, seed: 7 }
  const setFaults = yield* Effect.promise(() =>
    new Promise<number>((resolve, reject) => {
      const body = JSON.stringify(faults)
      const u = new URL(originUrl)
      const req = http.request({ host: u.hostname, port: u.port, method: "POST", path: "/_talon/faults", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
        res.resume()
        res.on("end", () => resolve(res.statusCode ?? 0))
      })
      req.on("error", reject)
      req.end(body)
    })
  )
  if (setFaults !== 200) return yield* Effect.fail(new BenchFailed({ message: `could not set origin faults (${setFaults})` }))
  const originCounts = () =>
    get(originUrl, "/_talon/stats", {}).then((r) => (JSON.parse(r.body.toString()) as { requests: { get: number; head: number } }).requests)

  const serverPids = [origin, coordinator, ...workers, gwCache, gwOrigin].map((p) => p.child.pid!)
  console.log(
    `origin ${originUrl} (lognormal latency, median ${latencyMs} ms, sigma ${sigma}); gateways: cache ${cacheUrl}, origin ${originRouteUrl}; ` +
      `${requests} × 1 MiB per arm per round at concurrency ${concurrency}, ${rounds} rounds${pin ? "; servers on CPU 0, client on CPU 1" : ""}`
  )

  // A 32-bit LCG in integer arithmetic, ranges picked by its high bits. (The earlier
  // `(seed * 1103515245 + 12345) % 2 ** 31` lost its low bits to float rounding and sent
  // ~94% of requests to offset 0: one block, one worker.)
  let seed = 1
  const nextOffset = () => {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0
    return ((seed >>> 16) % (SIZE / MiB)) * MiB
  }

  const measure = (url: string, sign: Signer, frontPid: number, requests: number) =>
    Effect.tryPromise({
      try: async (): Promise<Metrics> => {
        const latencies: Array<number> = []
        const u = new URL(url)
        const connections = Array.from({ length: concurrency }, () => new BenchConnection(u.hostname, Number(u.port)))
        // One request per connection first, outside the measured window: it opens the
        // connections and, after the idle gap while other arms ran (longer than the gateway's
        // 1 s stat TTL), pays the one origin HEAD a cold stat costs. Its latency is reported
        // on its own (first_wave_ms) instead of as the run's p99.
        const firstWave = await Promise.all(
          connections.map(async (connection) => {
            const offset = nextOffset()
            const req = await sign(offset)
            const began = performance.now()
            const r = await connection.get(req.path, req.headers)
            if (r.status !== 206 || r.sha256 !== expected[offset / MiB]) throw new Error(`${url}${req.path} at ${offset}: HTTP ${r.status} or wrong bytes in the first wave`)
            return performance.now() - began
          })
        )
        const counts0 = await originCounts()
        const cpu0 = cpuSeconds(serverPids)
        const front0 = cpuSeconds([frontPid])
        const client0 = process.cpuUsage()
        const t0 = performance.now()
        let issued = 0
        const loop = async (connection: BenchConnection) => {
          while (issued < requests) {
            issued++
            const offset = nextOffset()
            const req = await sign(offset)
            const began = performance.now()
            const r = await connection.get(req.path, req.headers)
            latencies.push(performance.now() - began)
            if (process.env.GW_SLOW && performance.now() - began > Number(process.env.GW_SLOW)) console.log(`  slow: #${latencies.length} at ${(began - t0).toFixed(0)} ms (wall ${(performance.timeOrigin + began).toFixed(0)}) took ${(performance.now() - began).toFixed(1)} ms`)
            if (r.status !== 206) throw new Error(`${url}${req.path} at ${offset}: HTTP ${r.status}: ${r.errorBody.slice(0, 300)}`)
            if (r.sha256 !== expected[offset / MiB]) throw new Error(`wrong bytes from ${url} at offset ${offset} (${r.length} bytes)`)
          }
        }
        await Promise.all(connections.map(loop)).finally(() => {
          for (const c of connections) c.close()
        })
        const wall = (performance.now() - t0) / 1000
        const cpu = cpuSeconds(serverPids) - cpu0
        const front = cpuSeconds([frontPid]) - front0
        const client = process.cpuUsage(client0)
        const counts = await originCounts()
        const gets = counts.get - counts0.get
        const heads = counts.head - counts0.head
        const sorted = [...latencies].sort((a, b) => a - b)
        const r2 = (x: number) => Math.round(x * 100) / 100
        return {
          rps: r2(requests / wall),
          mib_s: r2(requests / wall),
          p50_ms: r2(quantile(sorted, 0.5)),
          p99_ms: r2(quantile(sorted, 0.99)),
          max_ms: r2(sorted[sorted.length - 1]!),
          requests,
          front_cpu_ms_per_req: r2((front * 1000) / requests),
          server_cpu_ms_per_req: r2((cpu * 1000) / requests),
          server_cores: r2(cpu / wall),
          client_cores: r2((client.user + client.system) / 1e6 / wall),
          origin_gets_per_req: r2(gets / requests),
          origin_heads: heads,
          first_wave_ms: r2(Math.max(...firstWave)),
          load1: loadavg()
        }
      },
      catch: (e) => new BenchFailed({ message: (e as Error).message })
    })

  const allArms: Array<Arm<Metrics, BenchFailed>> = [
    { name: "s3-cache", run: (ctx) => measure(cacheUrl, s3Signer(cacheUrl), gwCache.child.pid!, ctx.warmup ? warmupRequests : requests) },
    { name: "s3-origin", run: (ctx) => measure(originRouteUrl, s3Signer(originRouteUrl), gwOrigin.child.pid!, ctx.warmup ? warmupRequests : requests) },
    { name: "azure-cache", run: (ctx) => measure(cacheUrl, azureSigner(), gwCache.child.pid!, ctx.warmup ? warmupRequests : requests) },
    { name: "azure-origin", run: (ctx) => measure(originRouteUrl, azureSigner(), gwOrigin.child.pid!, ctx.warmup ? warmupRequests : requests) },
    { name: "control-origin", run: (ctx) => measure(originUrl, s3Signer(originUrl), origin.child.pid!, ctx.warmup ? warmupRequests : requests) }
  ]
  // A subset for profiling and iteration; the committed data always has every arm.
  const only = flag("arms", "")
  const arms = only === "" ? allArms : allArms.filter((a) => only.split(",").includes(a.name))

  const report = yield* runRounds(arms, {
    rounds,
    warmupRound: true,
    coolDown: `${cooldown} seconds`,
    baseline: arms.some((a) => a.name === "s3-origin") ? "s3-origin" : arms[0]!.name,
    onRun: (r) =>
      Effect.sync(() =>
        console.log(
          `${r.warmup ? "warmup " : `round ${r.round}`} ${r.arm.padEnd(14)} rps ${String(r.result.rps).padStart(7)}  p50 ${String(r.result.p50_ms).padStart(7)} ms  p99 ${String(r.result.p99_ms).padStart(7)} ms  ` +
            `front ${r.result.front_cpu_ms_per_req} ms/req  servers ${r.result.server_cpu_ms_per_req} ms/req (${r.result.server_cores} cores)  client ${r.result.client_cores} cores  origin GETs/req ${r.result.origin_gets_per_req} HEADs ${r.result.origin_heads} first wave ${r.result.first_wave_ms} ms`
        )
      )
  })

  // Pairs the targets are about, per round: cache vs origin route per protocol, S3 vs Azure per route.
  const pairRatio = (arm: string, baseline: string, metric: keyof Metrics): Row => {
    const a = report.byArm[arm]!
    const b = report.byArm[baseline]!
    const perRound = a.map((x, i) => (b[i]![metric] === 0 ? NaN : (x[metric] as number) / (b[i]![metric] as number)))
    const s = spread(perRound)
    const r3 = (x: number) => (Number.isFinite(x) ? Math.round(x * 1000) / 1000 : null)
    return { arm, baseline, metric, n: s.n, median: r3(s.median), min: r3(s.min), max: r3(s.max), q1: r3(s.q1), q3: r3(s.q3), per_round: perRound.map((v) => r3(v) ?? "-").join(" ") }
  }
  const pairs: Array<Row> = []
  if (only !== "") {
    const s = report.summary
    for (const arm of report.arms) console.log(`${arm}: rps ${s[arm]!["rps"]!.median} p50 ${s[arm]!["p50_ms"]!.median} p99 ${s[arm]!["p99_ms"]!.median} front ${s[arm]!["front_cpu_ms_per_req"]!.median} ms/req`)
    return
  }
  for (const [arm, base] of [["s3-cache", "s3-origin"], ["azure-cache", "azure-origin"], ["azure-cache", "s3-cache"], ["azure-origin", "s3-origin"], ["s3-origin", "control-origin"]] as const) {
    for (const m of ["rps", "p99_ms", "p50_ms", "server_cpu_ms_per_req"] as const) pairs.push(pairRatio(arm, base, m))
  }
  const find = (arm: string, base: string, metric: string) => pairs.find((p) => p.arm === arm && p.baseline === base && p.metric === metric)!
  console.log("\n| arm | rps | MiB/s | p50 ms | p99 ms | front CPU ms/req | server CPU ms/req | server cores |")
  console.log("|---|--:|--:|--:|--:|--:|--:|--:|")
  for (const arm of report.arms) {
    const s = report.summary[arm]!
    const f = (m: string) => `${s[m]!.median} (${s[m]!.min}–${s[m]!.max})`
    console.log(`| ${arm} | ${f("rps")} | ${f("mib_s")} | ${f("p50_ms")} | ${f("p99_ms")} | ${f("front_cpu_ms_per_req")} | ${f("server_cpu_ms_per_req")} | ${f("server_cores")} |`)
  }
  const verdicts: Array<string> = []
  for (const [cache, orig] of [["s3-cache", "s3-origin"], ["azure-cache", "azure-origin"]] as const) {
    const rps = find(cache, orig, "rps").median as number
    const p99 = find(cache, orig, "p99_ms").median as number
    verdicts.push(`${cache} / ${orig}: rps × ${rps} (target ≥ 2: ${rps >= 2 ? "PASS" : "FAIL"}), p99 × ${p99} (target ≤ 0.1: ${p99 <= 0.1 ? "PASS" : "FAIL"})`)
  }
  const az = find("azure-cache", "s3-cache", "rps")
  verdicts.push(`azure-cache / s3-cache rps: median ${az.median}, per-round ${az.per_round} (same-arm spread across rounds: s3-cache ${report.summary["s3-cache"]!["rps"]!.min}–${report.summary["s3-cache"]!["rps"]!.max})`)
  console.log("\n" + verdicts.join("\n"))

  if (has("no-write")) return
  const rows = rowsFromRounds(report, (m) => ({ ...m }))
  const data: BenchData = {
    schema: BENCH_DATA_SCHEMA,
    id: "gateway_proxy",
    title: `Gateway as a proxy: S3 and Azure front ends × cache and origin routes, 1 MiB ranges, concurrency ${concurrency}`,
    measures:
      `Unmodified S3- and Azure-shaped signed GETs (1 MiB aligned ranges of a 64 MiB object, ${requests} per arm per round, ${concurrency} in flight) through talon gateway on the cache route (two workers) and the origin route, ` +
      `and straight to the origin stub, whose every response is delayed lognormally (median ${latencyMs} ms, sigma ${sigma}, capped at 2 s). rps, MiB/s, latency percentiles, CPU per request of the front process and of all server processes. Every body is SHA-256-checked.`,
    caveats: [
      `Downstream version caches were trusted for ${VERSION_TTL_MS / 1000} s (TALON_CLIENT_STAT_TTL_MS, TALON_WORKER_VERSION_TTL_MS); the gateway's own stat TTL is 1 s, refreshed ahead. Shorter TTLs put an origin HEAD (with its latency) in front of some cache-route reads.`,
      `The cache was warm after the discarded warmup round (${warmupRequests} requests per arm, which also brings the gateways' JIT to steady state): measured cache-route reads are hits (origin_gets_per_req shows it).`,
      "All server processes share CPU 0 and the client has CPU 1 on a 2-vCPU VM shared with other work; absolute rps is this box on that day, compare per-round ratios.",
      `p99 over ${requests} requests per run is set by the run's slowest ${requests - Math.ceil(0.99 * requests) + 1} requests (one stall of the 8 in flight decides it); medians over rounds with min–max are given.`,
      "first_wave_ms: before each run, one unmeasured request per connection opens the connections and, after the idle gap while other arms ran (longer than the gateway's 1 s stat TTL), pays the one origin HEAD a cold stat costs; the slowest of those is reported on its own, outside the run's percentiles.",
      "The client verifies SHA-256 of every body and signs every request (SigV4 or Shared Key), which costs client CPU (client_cores)."
    ],
    command: `npx tsx bench/gateway-proxy-bench.ts --rounds ${rounds} --requests ${requests} --warmup-requests ${warmupRequests} --concurrency ${concurrency} --latency-ms ${latencyMs} --sigma ${sigma}${pin ? "" : " --no-pin"}`,
    date: today(),
    machine: describeMachine(machineName),
    params: {
      object_size: SIZE,
      range: MiB,
      requests_per_arm_per_round: requests,
      warmup_requests_per_arm: warmupRequests,
      concurrency,
      rounds,
      origin_latency: `lognormal median ${latencyMs} ms sigma ${sigma} max 2000 ms`,
      block_size: BLOCK,
      page_size: MiB,
      workers: 2,
      version_ttl_ms: VERSION_TTL_MS,
      pinned: pin
    },
    runs: rows.runs,
    summary: rows.summary,
    ratios: [...rows.ratios, ...pairs],
    charts: [
      {
        id: "rps",
        title: "Requests per second by arm (median of rounds, min–max)",
        data: "summary",
        mark: "bar",
        filter: { metric: "rps" },
        x: { field: "arm", title: "arm", type: "nominal" },
        y: { field: "median", title: "rps" },
        errorBars: { low: "min", high: "max" }
      },
      {
        id: "p99",
        title: "p99 latency by arm (ms, median of rounds, min–max)",
        data: "summary",
        mark: "bar",
        filter: { metric: "p99_ms" },
        x: { field: "arm", title: "arm", type: "nominal" },
        y: { field: "median", title: "p99 (ms)", scale: "log" },
        errorBars: { low: "min", high: "max" }
      }
    ],
    tables: [
      summaryTable({
        title: "Per arm, median over rounds",
        lead: [
          { field: "arm", title: "arm" },
          { field: "metric", title: "metric" }
        ]
      }),
      ratioTable({
        title: "Per-round ratios (arm / baseline)",
        lead: [
          { field: "arm", title: "arm" },
          { field: "baseline", title: "baseline" },
          { field: "metric", title: "metric" }
        ]
      })
    ]
  }
  const out = join(root, "bench/data/gateway_proxy.json")
  writeFileSync(out, JSON.stringify(data, null, 2) + "\n")
  console.log(`wrote ${out}`)
})

Effect.runPromise(Effect.scoped(main)).then(
  () => process.exit(0),
  (e) => {
    console.error(`gateway-proxy-bench failed: ${e instanceof Error ? e.message : String(e)}`)
    for (const p of procs) if (p.child.exitCode !== null) console.error(`--- ${p.name} exited ${p.child.exitCode} ---\n${p.output().slice(-2000)}`)
    process.exit(1)
  }
)
