/**
 * CPU per byte of receiving origin range bodies the way a fill does (4 MiB ranged GETs, 8 at
 * once, every chunk copied into a reused 1 MiB staging buffer), by four clients in this one
 * process against a plain node:http origin in a child process (no latency, no bandwidth cap):
 * the fill's receiver (src/backend/receiveInto.ts), node:http, and @effect/platform's HttpClient
 * over node:http and over undici. Per arm and round: ns of this process's CPU per byte, MB/s and
 * full (mark-compact) GCs. Arms rotate order each round.
 *
 *   npx tsx bench/cold/receive-cpu.ts [--size 256M] [--rounds 3]
 */
import { spawn } from "node:child_process"
import * as http from "node:http"
import { PerformanceObserver, constants } from "node:perf_hooks"
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { Effect, Layer, ManagedRuntime, Stream } from "effect"
import { Receiver } from "../../src/backend/receiveInto.js"
import { Flag, parseFlags, runDriver } from "../lib/driver.js"

const flags = await parseFlags("receive-cpu", "CPU per byte of origin range bodies received as a fill does, by four HTTP clients.", {
  size: Flag.size("size", "256M", "Bytes fetched per arm and round."),
  rounds: Flag.number("rounds", 3, "Rounds; the arms' order rotates each round.")
})
const PIECE = 4 * 1024 * 1024
const OBJECT = 64 * 1024 * 1024
const stage = Buffer.allocUnsafeSlow(1024 * 1024)
let staged = 0
const copy = (chunk: Uint8Array) => {
  // As fetchRun does: into the staging buffer, wrapping at its end.
  let at = 0
  while (at < chunk.length) {
    const n = Math.min(stage.length - staged, chunk.length - at)
    stage.set(at === 0 && n === chunk.length ? chunk : chunk.subarray(at, at + n), staged)
    staged = (staged + n) % stage.length
    at += n
  }
}

const ORIGIN = `
const http = require("node:http")
const body = require("node:crypto").randomBytes(${OBJECT})
http.createServer((req, res) => {
  const m = /bytes=(\\d+)-(\\d+)/.exec(req.headers.range || "")
  const from = m ? Number(m[1]) % ${OBJECT} : 0
  const to = m ? Math.min(from + Number(m[2]) - Number(m[1]), ${OBJECT} - 1) : ${OBJECT} - 1
  res.writeHead(206, { "content-length": to - from + 1, "content-range": "bytes " + from + "-" + to + "/${OBJECT}", etag: '"v"' })
  res.end(body.subarray(from, to + 1))
}).listen(0, "127.0.0.1", function () { console.log(this.address().port) })
`

type Fetch = (port: number, from: number, length: number) => Promise<void>

const receiver = new Receiver(30_000)
const reused: Fetch = (port, from, length) =>
  receiver
    .exchange(
      { method: "GET", protocol: "http:", hostname: "127.0.0.1", port, path: "/o", headers: { range: `bytes=${from}-${from + length - 1}` } },
      () => (chunk) => copy(chunk)
    )
    .then(() => undefined)

const agent = new http.Agent({ keepAlive: true, maxSockets: 16 })
const nodeHttp: Fetch = (port, from, length) =>
  new Promise((resolve, reject) => {
    http
      .get({ host: "127.0.0.1", port, path: "/o", agent, headers: { range: `bytes=${from}-${from + length - 1}` } }, (res) => {
        res.on("data", copy)
        res.on("end", resolve)
        res.on("error", reject)
      })
      .on("error", reject)
  })

const effectClient = (layer: Layer.Layer<HttpClient.HttpClient>): Fetch => {
  const runtime = ManagedRuntime.make(layer)
  return (port, from, length) =>
    runtime.runPromise(
      Effect.flatMap(HttpClient.HttpClient, (client) =>
        client.execute(HttpClientRequest.get(`http://127.0.0.1:${port}/o`, { headers: { range: `bytes=${from}-${from + length - 1}` } })).pipe(
          Effect.flatMap((res) => Stream.runForEach(res.stream, (chunk) => Effect.sync(() => copy(chunk)))),
          Effect.scoped
        )
      )
    )
}

const arms: ReadonlyArray<readonly [string, Fetch]> = [
  ["receiveInto (reused buffer)", reused],
  ["node:http", nodeHttp],
  ["HttpClient (node:http)", effectClient(NodeHttpClient.layer)],
  ["HttpClient (undici)", effectClient(NodeHttpClient.layerUndici)]
]

let majorGcs = 0
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) if (((e as { detail?: unknown }).detail as { kind?: number } | undefined)?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) majorGcs++
}).observe({ entryTypes: ["gc"] })

const run = async (port: number, fetch: Fetch) => {
  let next = 0
  const lane = async () => {
    for (let at = next; at < flags.size; at = next) {
      next += PIECE
      await fetch(port, at, Math.min(PIECE, flags.size - at))
    }
  }
  await Promise.all(Array.from({ length: 8 }, lane))
}

runDriver(
  Effect.promise(async () => {
    const origin = spawn(process.execPath, ["-e", ORIGIN], { stdio: ["ignore", "pipe", "inherit"] })
    try {
      const port = await new Promise<number>((resolve) => origin.stdout!.once("data", (d: Buffer) => resolve(Number(d.toString().trim()))))
      for (const [, fetch] of arms) await run(port, fetch) // warm-up: connections, JIT
      for (let round = 0; round < flags.rounds; round++) {
        for (let k = 0; k < arms.length; k++) {
          const [arm, fetch] = arms[(k + round) % arms.length]!
          const gc0 = majorGcs
          const c0 = process.cpuUsage()
          const t0 = performance.now()
          await run(port, fetch)
          const seconds = (performance.now() - t0) / 1000
          const c = process.cpuUsage(c0)
          const ns = (v: number) => +((v * 1000) / flags.size).toFixed(2)
          console.log(
            JSON.stringify({ bench: "receive-cpu", round, arm, nsPerByte: ns(c.user + c.system), userNsPerByte: ns(c.user), mbps: +(flags.size / 1e6 / seconds).toFixed(0), majorGcs: majorGcs - gc0 })
          )
        }
      }
    } finally {
      origin.kill()
      receiver.close()
      agent.destroy()
    }
  })
)
