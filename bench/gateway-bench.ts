/**
 * The gateway's bounded HTTP runtime, measured with controlled delays, plus the
 * slow-consumer memory run. JSON Lines on stdout (and `--out FILE`); not a CI gate.
 *
 *   npx tsx bench/gateway-bench.ts [--delay-ms 20] [--range 1M] [--conns 1,16,64,400]
 *       [--max-concurrent 256] [--requests 200] [--no-rss] [--rss-size 1G] [--out FILE]
 *
 * Scenarios, each a gateway in this process over raw loopback HTTP:
 *   client-delay  cache route whose cluster client answers every piece after exactly
 *                 `--delay-ms` (a TalonClient stand-in serving a known buffer): the
 *                 runtime's own cost and queueing, nothing else.
 *   worker-delay  cache route through the real TalonClient, coordinator and placement,
 *                 to a protocol-speaking worker that answers every GetRange after exactly
 *                 `--delay-ms`.
 *   origin-delay  origin route to the origin stub with a fixed `--delay-ms` latency.
 * per connection count (closed loop, one request in flight per connection): rps, p50,
 * p99 and the overhead p50 − delay of served requests, and how many were refused with
 * 503 once the connections exceed `--max-concurrent`.
 *
 * rss-slow-consumer: `talon gateway` (cache route, then origin route) as a child process
 * streams `--rss-size` to a reader that crawls for 4 s then drains; peak VmRSS growth.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { Context, Duration, Effect, Layer, Stream } from "effect"
import { BackendStore } from "../src/backend/BackendStore.js"
import * as Router from "../src/backend/Router.js"
import { ControlChannel } from "../src/transport/ControlChannel.js"
import { CLIENT_DEFAULTS } from "../src/client/config.js"
import { Payload } from "../src/client/SlabPool.js"
import { TalonClient, type TalonClientShape } from "../src/client/TalonClient.js"
import { makeCoordinator } from "../src/coordinator/Coordinator.js"
import { Backend, NodeRole } from "../src/core/ids.js"
import { Gateway, type GatewayShape } from "../src/gateway/Gateway.js"
import { OriginHttp } from "../src/gateway/OriginHttp.js"
import * as OriginHttpModule from "../src/gateway/OriginHttp.js"
import type { Route } from "../src/gateway/Route.js"
import { CacheRoute, OriginRoute } from "../src/gateway/routes.js"
import { OriginStub } from "../src/origin/OriginStub.js"
import { sampleBytes } from "../src/origin/seed.js"
import { decodeRangeRequest, encodeErrorFrame, encodeFrame, FrameDecoder, MsgType } from "../src/protocol/index.js"
import { quantile } from "../src/loadgen/quantile.js"
import { Worker } from "../src/worker/Worker.js"
import { slowRead } from "./kit/slowReader.js"
import { repoRoot } from "./lib/args.js"
import { Flag, parseFlags, runDriver } from "./lib/driver.js"
import * as Proc from "./lib/proc.js"
import { httpGet } from "./lib/httpGet.js"

const root = repoRoot
const flags = await parseFlags("gateway-bench", "The gateway's HTTP runtime under controlled delays, and the slow-consumer RSS run; JSON Lines.", {
  delayMs: Flag.number("delay-ms", 20, "Delay of every piece (client-delay) or origin response, ms."),
  range: Flag.size("range", "1M", "Bytes per ranged GET."),
  conns: Flag.text("conns", "1,16,64,400", "Concurrent connections swept, comma-separated."),
  maxConcurrent: Flag.number("max-concurrent", 256, "The gateway's concurrent request limit."),
  requests: Flag.number("requests", 200, "Requests per run at least (2 per connection otherwise)."),
  noRss: Flag.bool("no-rss", "Skip the slow-consumer RSS runs."),
  rssSize: Flag.size("rss-size", "1G", "Object size of the slow-consumer run."),
  out: Flag.text("out", "", "Also write the JSON Lines to this file.")
})
const delayMs = flags.delayMs
const range = flags.range
const connsList = flags.conns.split(",").map(Number)
if (connsList.some((n) => !(Number.isInteger(n) && n > 0))) throw new Error(`--conns: want positive integers, got ${flags.conns}`)
const maxConcurrent = flags.maxConcurrent
const requestsMin = flags.requests
const rssSize = flags.rssSize
const outFile = flags.out

const MiB = 1024 * 1024
const OBJECT_SIZE = 64 * MiB
const BLOCK = 8 * MiB
const BUCKET = "gwbench"
const KEY = "object.bin"
const object = sampleBytes(0, OBJECT_SIZE)
const expected = new Map<number, string>()
const shaOf = (offset: number) => {
  let h = expected.get(offset)
  if (h === undefined) {
    h = createHash("sha256").update(object.subarray(offset, offset + range)).digest("hex")
    expected.set(offset, h)
  }
  return h
}

const emit = (record: Record<string, unknown>) => {
  const line = JSON.stringify({ bench: "gateway", ...record })
  console.log(line)
  if (outFile !== "") fs.appendFileSync(outFile, line + "\n")
}

// ------------------------------------------------------------------ stand-ins with fixed delays

/** A TalonClient that serves slices of `object` (whose origin ETag is `version`) after exactly `delayMs` per call. */
const delayedClient = (version: string): TalonClientShape => {
  const piece = (offset: number, length: number) =>
    Effect.as(Effect.sleep(Duration.millis(delayMs)), object.subarray(offset, offset + length) as Uint8Array)
  const info = { object: { backend: Backend.S3, bucket: BUCKET, objectPath: KEY }, size: OBJECT_SIZE, version }
  return {
    options: { ...CLIENT_DEFAULTS, blockSize: BLOCK },
    stat: () => Effect.succeed(info),
    cachedStat: () => info,
    controlPlane: () => ({
      coordinator: CLIENT_DEFAULTS.coordinator,
      coordinatorReachable: true,
      coordinatorFailovers: 0,
      coordinatorDownForMs: undefined,
      membershipAgeMs: 0,
      membershipWorkers: 1,
      coordinatorFailures: 0,
      staleMembershipUses: 0,
      emptyMembershipsIgnored: 0,
      workerStats: 0,
      staleStats: 0
    }),
    placeBlock: () => undefined,
    readRaw: (_info, offset, length, done) => {
      const timer = setTimeout(() => done({ ok: true, payloads: [Payload.of(object.subarray(offset, offset + length))] }), delayMs)
      return () => clearTimeout(timer)
    },
    read: (_t, offset, length) => piece(offset, length),
    readInto: (_t, offset, dest) => Effect.map(piece(offset, dest.length), (bytes) => (dest.set(bytes), dest.subarray(0, bytes.length))),
    readStream: (_t, offset, length) => Stream.fromEffect(piece(offset, length)),
    list: () => Effect.succeed([]),
    readCached: (_t, offset, length) => piece(offset, length),
    admit: () => Effect.void,
    zones: () => ({ zone: "", sameZoneReads: 0, crossZoneReads: 0, crossZoneBytes: 0, unknownZoneReads: 0 }),
    members: () => Effect.succeed([]),
    readAhead: () => ({
      fetchedBytes: 0,
      servedBytes: 0,
      unreadBytes: 0,
      residentBytes: 0,
      evictions: 0,
      sequentialReads: 0,
      randomReads: 0
    }),
    put: () => Effect.dieMessage("the bench's stand-in client does not write"),
    delete: () => Effect.dieMessage("the bench's stand-in client does not write")
  }
}

/** A worker on the wire protocol that answers every GetRange with the right bytes after `delayMs`. */
const delayedWorker = (): Promise<{ server: net.Server; address: string }> =>
  new Promise((resolveServer) => {
    const server = net.createServer((socket) => {
      const decoder = new FrameDecoder()
      socket.on("data", (chunk: Buffer) => {
        decoder.push(chunk)
        for (;;) {
          const f = decoder.next()
          if (f === undefined) break
          if (!("header" in f)) {
            socket.destroy()
            return
          }
          const { header, payload } = f
          if (header.type === MsgType.Ping) {
            socket.write(encodeFrame(MsgType.Ping, header.requestId, new Uint8Array(0)))
            continue
          }
          const req = decodeRangeRequest(payload)
          setTimeout(() => {
            if (req._tag === "Left" || header.type !== MsgType.GetRange) {
              socket.write(encodeErrorFrame(header.type as MsgType, header.requestId, "bench worker: GetRange only"))
              return
            }
            const { offset, len } = req.right
            socket.write(encodeFrame(MsgType.GetRange, header.requestId, object.subarray(Number(offset), Number(offset) + Number(len))))
          }, delayMs)
        }
      })
      socket.on("error", () => undefined)
    })
    server.listen(0, "127.0.0.1", () => resolveServer({ server, address: `127.0.0.1:${(server.address() as net.AddressInfo).port}` }))
  })

// ------------------------------------------------------------------ load

const agentFor = (conns: number) => new http.Agent({ keepAlive: true, maxSockets: conns })

const getOnce = (agent: http.Agent, url: string, offset: number) =>
  httpGet(agent, url, `/${BUCKET}/${KEY}`, { range: `bytes=${offset}-${offset + range - 1}` })

const runLoad = async (scenario: string, gw: GatewayShape, conns: number) => {
  const agent = agentFor(conns)
  const total = Math.max(requestsMin, conns * 2)
  const latencies: Array<number> = []
  let busy = 0
  let other = 0
  let issued = 0
  let seed = 7
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  const loop = async () => {
    while (issued < total) {
      issued++
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      const offset = (seed % (OBJECT_SIZE / range)) * range
      const began = performance.now()
      const r = await getOnce(agent, gw.url, offset)
      if (r.status === 206) {
        if (createHash("sha256").update(r.body).digest("hex") !== shaOf(offset)) throw new Error(`${scenario}: wrong bytes at ${offset}`)
        latencies.push(performance.now() - began)
      } else if (r.status === 503) busy++
      else other++
    }
  }
  await Promise.all(Array.from({ length: conns }, loop))
  const wall = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  agent.destroy()
  const sorted = latencies.sort((a, b) => a - b)
  const r2 = (x: number) => Math.round(x * 100) / 100
  emit({
    scenario,
    route: gw.route,
    delay_ms: delayMs,
    range,
    conns,
    max_concurrent: gw.options.maxConcurrentRequests,
    requests: total,
    served: latencies.length,
    refused_503: busy,
    other_errors: other,
    rps: r2(latencies.length / wall),
    p50_ms: r2(quantile(sorted, 0.5)),
    p99_ms: r2(quantile(sorted, 0.99)),
    overhead_p50_ms: r2(quantile(sorted, 0.5) - delayMs),
    process_cpu_ms_per_req: r2((cpu.user + cpu.system) / 1000 / total),
    load1: Number(fs.readFileSync("/proc/loadavg", "utf8").split(" ")[0])
  })
  if (other > 0) throw new Error(`${scenario} at ${conns} connections: ${other} responses neither 206 nor 503`)
}

// ------------------------------------------------------------------ scenarios

const runtimeScenarios = Effect.gen(function* () {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "gateway-bench-"))),
    (d) => Effect.sync(() => fs.rmSync(d, { recursive: true, force: true }))
  )
  fs.mkdirSync(path.join(dir, "origin", BUCKET), { recursive: true })
  fs.writeFileSync(path.join(dir, "origin", BUCKET, KEY), object)
  const origin = yield* OriginStub.make({ root: path.join(dir, "origin") })
  const router = Router.localOptions(origin.url)
  const originSide = Layer.merge(Router.layer(router), OriginHttpModule.layer(router))
  const gatewayOptions = { listen: "127.0.0.1:0", auth: false, maxConcurrentRequests: maxConcurrent, statTtlMs: 60_000, readAhead: 4 }
  const build = <E>(route: Layer.Layer<Route, E, BackendStore | OriginHttp>) =>
    Layer.build(Gateway.layer(gatewayOptions).pipe(Layer.provide(route), Layer.provide(originSide))).pipe(
      Effect.map((ctx) => Context.get(ctx, Gateway))
    )

  // client-delay: the cache route over a stand-in client with a fixed per-piece delay.
  const etag = yield* Effect.promise(
    () =>
      new Promise<string>((r) =>
        http.request(`${origin.url}/${BUCKET}/${KEY}`, { method: "HEAD" }, (res) => {
          res.resume()
          r(String(res.headers.etag ?? "").replace(/"/g, ""))
        }).end()
      )
  )
  const stand = delayedClient(etag)
  const gwClient = yield* build(CacheRoute({ workerTimeoutMs: 60_000 }).pipe(Layer.provide(Layer.succeed(TalonClient, stand))))
  for (const conns of connsList) yield* Effect.promise(() => runLoad("client-delay", gwClient, conns))

  // worker-delay: the real client and coordinator, a wire-protocol worker with a fixed delay.
  const worker = yield* Effect.acquireRelease(Effect.promise(delayedWorker), ({ server }) => Effect.sync(() => server.close()))
  const coordinator = yield* makeCoordinator({ listen: "127.0.0.1:0", adminListen: "127.0.0.1:0", heartbeatIntervalMs: 1000, missedHeartbeats: 100_000 }).pipe(
    Effect.provide(Router.layer(router))
  )
  const channel = yield* ControlChannel.make(coordinator.controlAddress)
  yield* channel.request({ _tag: "Register", node: { id: "delayed-worker", address: worker.address, role: NodeRole.Worker } })
  const gwWorker = yield* build(
    CacheRoute({ workerTimeoutMs: 60_000 }).pipe(
      Layer.provide(TalonClient.layer({ coordinator: coordinator.controlAddress, blockSize: BLOCK, statTtlMs: 60_000, connectionsPerWorker: 8 }))
    )
  )
  for (const conns of connsList) yield* Effect.promise(() => runLoad("worker-delay", gwWorker, conns))
  if (gwWorker.stats().fallbackPieces > 0) emit({ scenario: "worker-delay", warning: `${gwWorker.stats().fallbackPieces} pieces fell back to the origin` })

  // origin-delay: the origin route, the stub delaying every request by the same fixed time.
  const gwOrigin = yield* build(OriginRoute)
  yield* origin.setFaults({ latency: { kind: "fixed", ms: delayMs } })
  for (const conns of connsList) yield* Effect.promise(() => runLoad("origin-delay", gwOrigin, conns))
  yield* origin.setFaults({ latency: { kind: "none" } })
})

const REGION = 65536

const rssScenario = (route: "cache" | "origin") =>
  Effect.gen(function* () {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "gateway-bench-rss-"))),
      (d) => Effect.sync(() => fs.rmSync(d, { recursive: true, force: true }))
    )
    const shm = yield* Effect.acquireRelease(
      Effect.sync(() => fs.mkdtempSync(path.join(fs.existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir(), "gateway-bench-cache-"))),
      (d) => Effect.sync(() => fs.rmSync(d, { recursive: true, force: true }))
    )
    const regions = [0, Math.floor(rssSize / 2), rssSize - REGION]
    const file = path.join(dir, "origin", "bigdata", "huge.bin")
    fs.mkdirSync(path.dirname(file), { recursive: true })
    const fd = fs.openSync(file, "w")
    fs.ftruncateSync(fd, rssSize)
    for (const off of regions) fs.writeSync(fd, sampleBytes(off, REGION), 0, REGION, off)
    fs.closeSync(fd)
    const origin = yield* OriginStub.make({ root: path.join(dir, "origin") })
    const backend = Layer.succeed(BackendStore, yield* Router.make(Router.localOptions(origin.url)))
    const coordinator = yield* makeCoordinator({ listen: "127.0.0.1:0", adminListen: "127.0.0.1:0", heartbeatIntervalMs: 1000 }).pipe(Effect.provide(backend))
    if (route === "cache") {
      yield* Layer.build(
        Worker.layerSettings({
          id: "w1",
          dataAddress: "127.0.0.1:0",
          adminAddress: "127.0.0.1:0",
          coordinator: coordinator.controlAddress,
          cacheDirs: [shm],
          blockSize: 64 * MiB,
          pageSize: 8 * MiB,
          heartbeatIntervalMs: 1000
        }).pipe(Layer.provide(backend))
      )
      yield* coordinator.members.pipe(Effect.delay("50 millis"), Effect.repeat({ until: (m) => m.length >= 1 }), Effect.timeout(Duration.seconds(30)))
    }
    const gateway = yield* Proc.spawn("gateway", [process.execPath, "--import", "tsx", path.join(root, "src/gateway/main.ts"), "--listen", "127.0.0.1:0", "--route", route, "--auth", "off", "--coordinator", coordinator.controlAddress, "--block-size", String(64 * MiB), "--worker-timeout-ms", "60000"],
      { env: { TALON_S3_ENDPOINT: origin.url, TALON_S3_ACCESS_KEY_ID: "talon", TALON_S3_SECRET_ACCESS_KEY: "talon-secret" } }
    )
    const port = Number((yield* gateway.waitFor(/listening on http:\/\/127\.0\.0\.1:(\d+)/, "180 seconds"))[1])
    yield* Effect.promise(() => new Promise<void>((r) => http.get({ host: "127.0.0.1", port, path: "/bigdata/huge.bin", headers: { range: "bytes=0-65535" } }, (res) => { res.resume(); res.on("end", () => r()) })))
    const result = yield* Effect.promise(() =>
      slowRead({
        port,
        pid: gateway.pid,
        path: "/bigdata/huge.bin",
        expectLength: rssSize,
        slowMs: 4000,
        check: (chunk, at) => {
          for (const off of regions) {
            const from = Math.max(off, at)
            const to = Math.min(off + REGION, at + chunk.length)
            if (from < to && !chunk.subarray(from - at, to - at).equals(sampleBytes(from, to - from))) return false
          }
          return true
        }
      })
    )
    const r1 = (x: number) => Math.round(x * 10) / 10
    emit({
      scenario: "rss-slow-consumer",
      route,
      bytes: rssSize,
      baseline_mib: r1(result.baseline / MiB),
      peak_mib: r1(result.peak / MiB),
      growth_mib: r1((result.peak - result.baseline) / MiB),
      slow_phase_mib: r1(result.slowBytes / MiB),
      transfer_ms: Math.round(result.transferMs),
      bytes_ok: result.ok && result.body === rssSize,
      within_64_mib: (result.peak - result.baseline) / MiB <= 64
    })
  })

const main = Effect.gen(function* () {
  emit({ scenario: "params", delay_ms: delayMs, range, conns: connsList, max_concurrent: maxConcurrent, requests_min: requestsMin, rss_size: rssSize, node: process.version, cores: os.cpus().length })
  yield* Effect.scoped(runtimeScenarios)
  if (!flags.noRss) {
    yield* Effect.scoped(rssScenario("cache"))
    yield* Effect.scoped(rssScenario("origin"))
  }
})

runDriver(main)
