/**
 * gateway-nginx-bench's client: keep-alive HTTP/1.1 connections that check every body byte
 * against the object as it arrives (memcmp into one static read buffer), a time-bounded run of
 * one arm at one range size, and /proc CPU and RSS of the arm's server processes.
 *
 * Why memcmp and not SHA-256 in the measured window: SHA-256 runs at ~1 GiB/s on one core of
 * this machine, and nginx serves 1 MiB ranges at well over 1 GiB/s, so hashing would make the
 * client the bottleneck of the fastest arm. A byte-for-byte compare is a stronger check (it
 * names the first wrong byte) at ~10× less CPU. The warm pass before the rounds checks the
 * SHA-256 of every range of every size through every arm.
 */
import { readFileSync } from "node:fs"
import * as net from "node:net"
import { performance } from "node:perf_hooks"
import { Effect } from "effect"
import * as S3Backend from "../../src/backend/S3.js"
import { clockTicks, parseStat } from "../../src/loadgen/procSampler.js"
import { quantile } from "../../src/loadgen/quantile.js"
import { BenchFailed, BUCKET, KEY, S3_CREDS } from "../gateway-proxy/client.js"

/** One request of a run: the path, its headers and the bytes of the object it asks for. */
export interface Planned {
  readonly path: string
  readonly headers: Record<string, string>
  readonly offset: number
  readonly length: number
  /** 206 for a range, 200 for the whole object. */
  readonly status: number
}

export type Planner = (offset: number, length: number) => Planned

const rangeHeader = (offset: number, length: number, whole: boolean): Record<string, string> =>
  whole ? {} : { range: `bytes=${offset}-${offset + length - 1}` }

/** Unsigned path-style GETs (nginx, and the gateway with --auth off). */
export const plainPlanner = (objectSize: number): Planner => (offset, length) => {
  const whole = offset === 0 && length === objectSize
  return { path: `/${BUCKET}/${KEY}`, headers: rangeHeader(offset, length, whole), offset, length, status: whole ? 200 : 206 }
}

/** SigV4-signed path-style GETs, signed the way the AWS SDKs sign them. */
export const sigv4Planner = async (url: string, objectSize: number) => {
  const sign = S3Backend.makeS3Signer(S3Backend.localOptions(url, S3_CREDS))
  return async (offset: number, length: number): Promise<Planned> => {
    const whole = offset === 0 && length === objectSize
    const req = await sign({ method: "GET", bucket: BUCKET, key: KEY, query: {}, headers: rangeHeader(offset, length, whole) })
    return { path: req.path, headers: req.headers, offset, length, status: whole ? 200 : 206 }
  }
}

/** Bytes of a read decoded at a time while looking for the end of a response head. */
const HEAD_SCAN = 4096

/**
 * One connection, one request at a time. Reads land in one static buffer (`onread`) and are
 * compared with the object in place, so no body is allocated or left for the GC.
 */
export class VerifyingConnection {
  private readonly socket: net.Socket
  private readonly buf = Buffer.allocUnsafe(256 * 1024)
  private head = ""
  private remaining = -1
  private status = 0
  private at = 0
  private want: Planned | undefined
  private errorBody = ""
  private pending: { resolve: () => void; reject: (e: Error) => void } | undefined
  private failure: Error | undefined

  constructor(host: string, port: number, private readonly object: Buffer) {
    this.socket = net.connect({ host, port, onread: { buffer: this.buf, callback: (n: number) => (this.onRead(n), true) } })
    this.socket.setNoDelay(true)
    this.socket.on("error", (e) => this.fail(e))
    this.socket.on("close", () => this.fail(new Error(`connection to ${host}:${port} closed`)))
  }

  get(req: Planned, host: string): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure)
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject }
      this.want = req
      this.head = ""
      this.remaining = -1
      this.errorBody = ""
      let text = `GET ${req.path} HTTP/1.1\r\nHost: ${host}\r\n`
      for (const [k, v] of Object.entries(req.headers)) if (k.toLowerCase() !== "host") text += `${k}: ${v}\r\n`
      this.socket.write(text + "\r\n", "latin1")
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
      const want = this.want
      if (want === undefined) return this.fail(new Error("bytes arrived with no request outstanding"))
      if (this.remaining < 0) {
        const upTo = Math.min(n, p + HEAD_SCAN)
        const text = this.head + b.toString("latin1", p, upTo)
        const end = text.indexOf("\r\n\r\n")
        if (end < 0) {
          this.head = text
          p = upTo
          continue
        }
        p += end + 4 - this.head.length
        this.head = ""
        const headText = text.slice(0, end)
        this.status = Number(headText.slice(9, 12))
        const m = /\r\ncontent-length:[ \t]*(\d+)/i.exec(headText)
        if (m === null) return this.fail(new Error(`response without Content-Length: ${headText.slice(0, 300)}`))
        this.remaining = Number(m[1])
        if (this.status === want.status && this.remaining !== want.length) {
          return this.fail(new Error(`HTTP ${this.status} with ${this.remaining} bytes for ${want.length} at ${want.offset}`))
        }
        this.at = want.offset
      }
      const take = Math.min(this.remaining, n - p)
      if (this.status === want.status) {
        if (b.compare(this.object, this.at, this.at + take, p, p + take) !== 0) {
          return this.fail(new Error(`wrong bytes in [${this.at}, ${this.at + take}) of a ${want.length}-byte read at ${want.offset}`))
        }
      } else if (this.errorBody.length < 1000) this.errorBody += b.toString("utf8", p, p + take)
      this.at += take
      this.remaining -= take
      p += take
      if (this.remaining === 0) {
        this.remaining = -1
        this.want = undefined
        const pending = this.pending
        this.pending = undefined
        if (this.status !== want.status) pending?.reject(new Error(`HTTP ${this.status} (wanted ${want.status}) at ${want.offset}: ${this.errorBody.slice(0, 300)}`))
        else pending?.resolve()
      }
    }
  }
}

/** utime + stime of the given processes, in seconds (0 for one that is gone). */
export const cpuSeconds = (pids: ReadonlyArray<number>): number => {
  let ticks = 0
  for (const pid of pids) {
    try {
      const t = parseStat(readFileSync(`/proc/${pid}/stat`, "utf8"))
      if (t) ticks += t.utime + t.stime
    } catch {
      // gone
    }
  }
  return ticks / clockTicks()
}

/** Resident memory of the processes, MiB. */
export const rssMiB = (pids: ReadonlyArray<number>): number => {
  let kb = 0
  for (const pid of pids) {
    try {
      const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
      if (m !== null) kb += Number(m[1])
    } catch {
      // gone
    }
  }
  return kb / 1024
}

/** The processes that serve one arm, and how to reach it. */
export interface Target {
  readonly host: string
  readonly port: number
  readonly plan: (offset: number, length: number) => Planned | Promise<Planned>
  /** The process that answers HTTP (the gateway; nginx's worker): its CPU is reported on its own too. */
  readonly front: () => ReadonlyArray<number>
  /** Every server process whose CPU the arm costs. */
  readonly pids: () => ReadonlyArray<number>
  /** The processes a deployment of the arm adds (gateway and worker; nginx's master and worker): their summed RSS. */
  readonly memPids: () => ReadonlyArray<number>
}

export interface Metrics {
  readonly rps: number
  readonly mib_s: number
  readonly p50_ms: number
  readonly p99_ms: number
  readonly requests: number
  /** CPU of the arm's server processes per request, ms. */
  readonly server_cpu_ms_per_req: number
  readonly server_cores: number
  /** CPU of the HTTP front process alone per request, ms (server CPU less this: the worker, coordinator, origin; nginx's master). */
  readonly front_cpu_ms_per_req: number
  readonly client_cores: number
  /** Peak summed RSS of the arm's own processes (not the shared origin stub) during the run, MiB. */
  readonly rss_mib: number
  /** Origin GETs during the run (0 when the cache is warm). */
  readonly origin_gets: number
}

export interface RunOptions {
  readonly object: Buffer
  readonly size: number
  readonly concurrency: number
  readonly seconds: number
  readonly nextOffset: () => number
  readonly originGets: () => Promise<number>
}

/** One arm at one range size for `seconds`: `concurrency` connections, one request in flight each. */
export const runArm = (target: Target, o: RunOptions) =>
  Effect.tryPromise({
    try: async (): Promise<Metrics> => {
      const hostHeader = `${target.host}:${target.port}`
      const connections = Array.from({ length: o.concurrency }, () => new VerifyingConnection(target.host, target.port, o.object))
      const latencies: Array<number> = []
      try {
        // Opens the connections outside the measured window.
        await Promise.all(connections.map(async (c) => c.get(await target.plan(o.nextOffset(), o.size), hostHeader)))
        const gets0 = await o.originGets()
        const cpu0 = cpuSeconds(target.pids())
        const front0 = cpuSeconds(target.front())
        const client0 = process.cpuUsage()
        let peakRss = rssMiB(target.memPids())
        const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssMiB(target.memPids()))), 100)
        const t0 = performance.now()
        const deadline = t0 + o.seconds * 1000
        const loop = async (c: VerifyingConnection) => {
          while (performance.now() < deadline) {
            const req = await target.plan(o.nextOffset(), o.size)
            const began = performance.now()
            await c.get(req, hostHeader)
            latencies.push(performance.now() - began)
          }
        }
        await Promise.all(connections.map(loop)).finally(() => clearInterval(sampler))
        const wall = (performance.now() - t0) / 1000
        const cpu = cpuSeconds(target.pids()) - cpu0
        const front = cpuSeconds(target.front()) - front0
        const client = process.cpuUsage(client0)
        const gets = (await o.originGets()) - gets0
        const n = latencies.length
        const sorted = latencies.sort((a, b) => a - b)
        const r2 = (x: number) => Math.round(x * 100) / 100
        return {
          rps: r2(n / wall),
          mib_s: r2((n * o.size) / wall / 2 ** 20),
          p50_ms: r2(quantile(sorted, 0.5)),
          p99_ms: r2(quantile(sorted, 0.99)),
          requests: n,
          server_cpu_ms_per_req: Math.round(((cpu * 1000) / n) * 1000) / 1000,
          server_cores: r2(cpu / wall),
          front_cpu_ms_per_req: Math.round(((front * 1000) / n) * 1000) / 1000,
          client_cores: r2((client.user + client.system) / 1e6 / wall),
          rss_mib: r2(peakRss),
          origin_gets: gets
        }
      } finally {
        for (const c of connections) c.close()
      }
    },
    catch: (e) => new BenchFailed({ message: (e as Error).message })
  })
