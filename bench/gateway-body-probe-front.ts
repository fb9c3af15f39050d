/**
 * The raw front against node:http in one process, the gateway's own CPU only: origin stub,
 * coordinator, one worker and two co-located gateways on it (`--front raw` and `--front node`,
 * auth off) in this process; a client in a child process (pinned to CPU 1, this process to CPU 0)
 * sends N GETs of random aligned ranges of a warm object over C keep-alive connections to one
 * gateway at a time, in paired rounds with the order swapped each round. Reported per round: this
 * process's CPU per request (gateway + worker, as the co-located arm of gateway-nginx-bench
 * counts it), rps and the client's p50/p99, and raw ÷ node.
 *
 *   npx tsx bench/gateway-body-probe-front.ts [rounds=4] [requests=6000] [size=65536]
 */
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { Context, Duration, Effect, Layer } from "effect"
import * as Router from "../src/backend/Router.js"
import { makeCoordinator } from "../src/coordinator/Coordinator.js"
import { Gateway, type GatewayShape } from "../src/gateway/Gateway.js"
import { OriginStub } from "../src/origin/OriginStub.js"
import { makeLocalReads } from "../src/worker/LocalReads.js"
import { Worker } from "../src/worker/Worker.js"

const [rounds = 4, requests = 6000, size = 65536] = process.argv.slice(2).map(Number)
const BLOCK = 1 << 20
const OBJECT = 64 * BLOCK
const CONNECTIONS = 8

const CLIENT = `
const net = require("node:net")
const [port, n, c, size, span] = process.argv.slice(1).map(Number)
const lat = []
const conn = (count) => new Promise((resolve) => {
  const s = net.connect(port, "127.0.0.1")
  let left = count, need = 0, acc = Buffer.alloc(0), t = 0
  const send = () => {
    const off = Math.floor(Math.random() * (span / size)) * size
    need = -1; t = performance.now()
    s.write("GET /bucket/obj HTTP/1.1\\r\\nHost: 127.0.0.1:" + port + "\\r\\nRange: bytes=" + off + "-" + (off + size - 1) + "\\r\\n\\r\\n")
  }
  s.on("data", (chunk) => {
    acc = acc.length === 0 ? chunk : Buffer.concat([acc, chunk])
    for (;;) {
      if (need < 0) { const e = acc.indexOf("\\r\\n\\r\\n"); if (e < 0) return; need = e + 4 + size }
      if (acc.length < need) return
      acc = acc.subarray(need); need = 0; left--; lat.push(performance.now() - t)
      if (left === 0) { s.destroy(); return resolve() }
      send()
    }
  })
  send()
})
const t0 = performance.now()
Promise.all(Array.from({ length: c }, () => conn(Math.floor(n / c)))).then(() => {
  const t = performance.now() - t0
  lat.sort((a, b) => a - b)
  process.stdout.write(JSON.stringify({ n: lat.length, rps: lat.length / t * 1000, p50: lat[Math.floor(lat.length * 0.5)], p99: lat[Math.floor(lat.length * 0.99)] }))
})
`

interface Run {
  readonly n: number
  readonly rps: number
  readonly p50: number
  readonly p99: number
}

/** One request to `url`, its body drained; resolves with the status. */
const request = (url: string, method: string, target: string, body?: Buffer): Promise<number> =>
  new Promise((resolve, reject) => {
    const u = new URL(url)
    const req = http.request({ host: u.hostname, port: u.port, method, path: target, agent: false }, (res) => {
      res.resume()
      res.on("end", () => resolve(res.statusCode ?? 0))
    })
    req.on("error", reject)
    req.end(body)
  })

const load = (gw: GatewayShape, n: number): Promise<Run & { readonly cpuMsPerReq: number }> =>
  new Promise((resolve, reject) => {
    const port = new URL(gw.url).port
    const before = process.cpuUsage()
    const child = spawn("taskset", ["-c", "1", process.execPath, "-e", CLIENT, port, String(n), String(CONNECTIONS), String(size), String(OBJECT)], { stdio: ["ignore", "pipe", "inherit"] })
    let out = ""
    child.stdout.on("data", (d: Buffer) => (out += d.toString()))
    child.on("error", reject)
    child.on("close", () => {
      const used = process.cpuUsage(before)
      const r = JSON.parse(out) as Run
      resolve({ ...r, cpuMsPerReq: (used.user + used.system) / 1000 / r.n })
    })
  })

const program = Effect.gen(function* () {
  execFileSync("taskset", ["-pc", "0", String(process.pid)], { stdio: "ignore" })
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "talon-front-probe-"))),
    (d) => Effect.sync(() => fs.rmSync(d, { recursive: true, force: true }))
  )
  const origin = yield* OriginStub.make({ root: path.join(dir, "origin") })
  const backend = Router.layerLocal(origin.url)
  const coordinator = yield* makeCoordinator({ listen: "127.0.0.1:0", adminListen: "127.0.0.1:0", heartbeatIntervalMs: 500, missedHeartbeats: 1000 }).pipe(Effect.provide(backend))
  const worker = Context.get(
    yield* Layer.build(
      Worker.layerSettings({
        id: "w0",
        dataAddress: "127.0.0.1:0",
        adminAddress: "127.0.0.1:0",
        coordinator: coordinator.controlAddress,
        cacheDirs: [path.join(dir, "w0")],
        blockSize: BLOCK,
        pageSize: BLOCK,
        dataPlane: "native"
      }).pipe(Layer.provide(backend))
    ),
    Worker
  )
  yield* coordinator.members.pipe(Effect.delay("20 millis"), Effect.repeat({ until: (m) => m.length === 1 }), Effect.timeout(Duration.seconds(30)))
  const local = makeLocalReads([worker.readPath!])
  if (typeof local === "string") return yield* Effect.die(new Error(`no local reads: ${local}`))
  const gateway = (front: "raw" | "node") =>
    Layer.build(
      Gateway.layerDeployment({
        gateway: { listen: "127.0.0.1:0", auth: false, front },
        route: "cache",
        router: Router.localOptions(origin.url),
        client: { coordinator: coordinator.controlAddress, blockSize: BLOCK },
        local
      })
    ).pipe(Effect.map((ctx) => Context.get(ctx, Gateway)))
  const gws = { raw: yield* gateway("raw"), node: yield* gateway("node") }
  yield* Effect.promise(() => request(origin.url, "PUT", "/bucket"))
  yield* Effect.promise(() => request(origin.url, "PUT", "/bucket/obj", Buffer.alloc(OBJECT, 7)))
  // Every block resident, both gateways' JIT warm.
  yield* Effect.promise(() => request(gws.node.url, "GET", "/bucket/obj"))
  for (const gw of [gws.raw, gws.node]) yield* Effect.promise(() => load(gw, 2000))
  console.log(`load average ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}; ${requests} GETs of ${size} B per run, ${CONNECTIONS} connections`)
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? (["raw", "node"] as const) : (["node", "raw"] as const)
    const got: Record<string, Run & { cpuMsPerReq: number }> = {}
    for (const front of order) got[front] = yield* Effect.promise(() => load(gws[front], requests))
    const a = got.raw!
    const b = got.node!
    const line = (name: string, x: Run & { cpuMsPerReq: number }) => `${name} ${x.cpuMsPerReq.toFixed(3)} ms/req ${Math.round(x.rps)} rps p50 ${x.p50.toFixed(2)} p99 ${x.p99.toFixed(2)}`
    console.log(`round ${r + 1} (${order.join(" then ")}): ${line("raw", a)} | ${line("node", b)} | raw÷node CPU/req ×${(a.cpuMsPerReq / b.cpuMsPerReq).toFixed(2)} rps ×${(a.rps / b.rps).toFixed(2)} p99 ×${(a.p99 / b.p99).toFixed(2)}`)
  }
  console.log(`raw front answers: ${gws.raw.stats().rawFront}; node front's: ${gws.node.stats().rawFront}`)
})

Effect.runPromise(Effect.scoped(program).pipe(Effect.provide(Layer.empty))).then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e)
    process.exit(1)
  }
)
