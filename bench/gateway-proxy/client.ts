/**
 * gateway-proxy-bench's client side: a minimal keep-alive HTTP/1.1 connection that hashes each
 * body as it arrives, S3 and Azure request signers, /proc CPU accounting, and one arm's run.
 */
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import { performance } from "node:perf_hooks"
import { Data, Effect } from "effect"
import { sharedKeyAuthorization } from "../../src/backend/azureSharedKey.js"
import * as S3Backend from "../../src/backend/S3.js"
import { clockTicks, parseStat } from "../../src/loadgen/procSampler.js"
import { quantile } from "../../src/loadgen/quantile.js"
import { httpGet, type Reply } from "../lib/httpGet.js"

export const MiB = 1024 * 1024
export const SIZE = 64 * MiB
export const BLOCK = 8 * MiB
export const BUCKET = "proxybench"
export const KEY = "object-64m.bin"
export const ACCOUNT = "gatewaybench"
export const AZ_KEY = Buffer.from("gateway proxy bench account key!").toString("base64")
export const S3_CREDS = { accessKeyId: "gateway-bench", secretAccessKey: "gateway-bench-secret" }

export class BenchFailed extends Data.TaggedError("BenchFailed")<{ readonly message: string }> {}

/** What a run needs from the bench around it. */
export interface MeasureContext {
  readonly concurrency: number
  readonly nextOffset: () => number
  /** SHA-256 of every 1 MiB aligned range of the object. */
  readonly expected: ReadonlyArray<string>
  readonly originCounts: () => Promise<{ get: number; head: number }>
  readonly serverPids: ReadonlyArray<number>
}

/** utime + stime of the given processes, in seconds. */
export const cpuSeconds = (pids: ReadonlyArray<number>): number => {
  let ticks = 0
  for (const pid of pids) {
    const t = parseStat(readFileSync(`/proc/${pid}/stat`, "utf8"))
    if (t) ticks += t.utime + t.stime
  }
  return ticks / clockTicks()
}

export const loadavg = (): number => Number(readFileSync("/proc/loadavg", "utf8").split(" ")[0])

// ---------------------------------------------------------------- client

// Admin and stats requests only; measured requests go through BenchConnection.
const agent = new http.Agent({ keepAlive: true, maxSockets: 16 })

export const get = (url: string, path: string, headers: Record<string, string>): Promise<Reply> => httpGet(agent, url, path, headers)

/** Bytes of a read decoded at a time while looking for the end of a response head. */
export const HEAD_SCAN = 4096

/**
 * The measured client: one keep-alive HTTP/1.1 connection per in-flight request slot,
 * reading into one static buffer (`onread`) and hashing the body as it arrives, so
 * no body is ever allocated, concatenated or left for the GC. node:http plus a
 * Buffer.concat and a hash cost ~2× the CPU per MiB; at a few hundred MiB/s on its one
 * core that made the client the bottleneck. Bodies are framed by Content-Length
 * (every server measured here sends it); anything else fails the run.
 */
export class BenchConnection {
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

export interface BenchReply {
  readonly status: number
  readonly length: number
  readonly sha256: string
  readonly errorBody: string
}

export type Signer = (offset: number) => Promise<{ readonly path: string; readonly headers: Record<string, string> }>

export const s3Signer = (url: string): Signer => {
  const sign = S3Backend.makeS3Signer(S3Backend.localOptions(url, S3_CREDS))
  return async (offset) => {
    const req = await sign({ method: "GET", bucket: BUCKET, key: KEY, query: {}, headers: { range: `bytes=${offset}-${offset + MiB - 1}` } })
    return { path: req.path, headers: req.headers }
  }
}

export const azureSigner = (): Signer => async (offset) => {
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
export interface Metrics {
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

export const measure = (ctx: MeasureContext, url: string, sign: Signer, frontPid: number, requests: number) =>
  Effect.tryPromise({
    try: async (): Promise<Metrics> => {
      const latencies: Array<number> = []
      const u = new URL(url)
      const connections = Array.from({ length: ctx.concurrency }, () => new BenchConnection(u.hostname, Number(u.port)))
      // One request per connection first, outside the measured window: it opens the
      // connections and, after the idle gap while other arms ran (longer than the gateway's
      // 1 s stat TTL), pays the one origin HEAD a cold stat costs. Its latency is reported
      // on its own (first_wave_ms) instead of as the run's p99.
      const firstWave = await Promise.all(
        connections.map(async (connection) => {
          const offset = ctx.nextOffset()
          const req = await sign(offset)
          const began = performance.now()
          const r = await connection.get(req.path, req.headers)
          if (r.status !== 206 || r.sha256 !== ctx.expected[offset / MiB]) throw new Error(`${url}${req.path} at ${offset}: HTTP ${r.status} or wrong bytes in the first wave`)
          return performance.now() - began
        })
      )
      const counts0 = await ctx.originCounts()
      const cpu0 = cpuSeconds(ctx.serverPids)
      const front0 = cpuSeconds([frontPid])
      const client0 = process.cpuUsage()
      const t0 = performance.now()
      let issued = 0
      const loop = async (connection: BenchConnection) => {
        while (issued < requests) {
          issued++
          const offset = ctx.nextOffset()
          const req = await sign(offset)
          const began = performance.now()
          const r = await connection.get(req.path, req.headers)
          latencies.push(performance.now() - began)
          if (process.env.GW_SLOW && performance.now() - began > Number(process.env.GW_SLOW)) console.log(`  slow: #${latencies.length} at ${(began - t0).toFixed(0)} ms (wall ${(performance.timeOrigin + began).toFixed(0)}) took ${(performance.now() - began).toFixed(1)} ms`)
          if (r.status !== 206) throw new Error(`${url}${req.path} at ${offset}: HTTP ${r.status}: ${r.errorBody.slice(0, 300)}`)
          if (r.sha256 !== ctx.expected[offset / MiB]) throw new Error(`wrong bytes from ${url} at offset ${offset} (${r.length} bytes)`)
        }
      }
      await Promise.all(connections.map(loop)).finally(() => {
        for (const c of connections) c.close()
      })
      const wall = (performance.now() - t0) / 1000
      const cpu = cpuSeconds(ctx.serverPids) - cpu0
      const front = cpuSeconds([frontPid]) - front0
      const client = process.cpuUsage(client0)
      const counts = await ctx.originCounts()
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
