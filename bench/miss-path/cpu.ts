/**
 * CPU per filled byte on the miss path: one cluster process (origin stub + coordinator + one
 * worker, bench/miss-path/cluster.ts) and this process as the reader (TalonClient.readStream,
 * every byte checked). Per cold object: wall MB/s, and CPU ns per byte of the cluster process
 * (/proc/PID/stat, user+system), of its main (JS) thread alone, and of the reader (process.cpuUsage); alternating with 8 ranged
 * GETs straight from the origin stub, whose cluster CPU is the stub's own share. `--prof DIR` runs the
 * cluster under `node --cpu-prof` so the split between origin stub and worker can be read from
 * the profile (written when the cluster stops).
 *
 *   npx tsx bench/miss-path/cpu.ts [--size 256M] [--objects 3] [--prof DIR] [--worker JSON] [--node-flags FLAGS]
 */
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { Duration, Effect, Stream } from "effect"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import { sampleBytes } from "../../src/origin/seed.js"
import { Flag, parseFlags, runDriver } from "../lib/driver.js"
import * as Proc from "../lib/proc.js"

const flags = await parseFlags("miss-path-cpu", "CPU ns per filled byte of the worker's cluster process and of the reader.", {
  size: Flag.size("size", "256M", "Object size."),
  objects: Flag.number("objects", 3, "Cold objects read one after another."),
  latencyMs: Flag.number("latency-ms", 30, "Origin first-byte latency, ms."),
  bandwidth: Flag.number("bandwidth", 100_000_000, "Origin bandwidth per response, bytes/s."),
  prof: Flag.text("prof", "", "Directory for the cluster's .cpuprofile (empty: no profile)."),
  worker: Flag.text("worker", "{}", "Worker settings (JSON) merged over the defaults."),
  nodeFlags: Flag.text("node-flags", "", "Extra node flags for the cluster, space-separated (e.g. --perf-basic-prof for perf record).")
})
const SIZE = flags.size
const BUCKET = "cpu"
const TICK = 100 // USER_HZ on Linux

/** User and system CPU seconds of a process (or, with `tid`, of one of its threads) so far. */
const procCpu = (pid: number, tid?: number): { readonly user: number; readonly system: number } => {
  const stat = fs.readFileSync(tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return { user: Number(fields[11]) / TICK, system: Number(fields[12]) / TICK }
}

const expected = sampleBytes(0, SIZE)

const check = (at: number, chunk: Uint8Array) => {
  if (Buffer.compare(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length), expected.subarray(at, at + chunk.length)) !== 0) {
    throw new Error(`wrong bytes in [${at}, ${at + chunk.length})`)
  }
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 16 })

/** GET `[from, to)` straight from the origin stub, every byte checked. */
const originRange = (url: string, from: number, to: number) =>
  new Promise<void>((resolve, reject) => {
    http
      .get(url, { agent, headers: { range: `bytes=${from}-${to - 1}` } }, (res) => {
        if (res.statusCode !== 206) return reject(new Error(`origin answered ${res.statusCode}`))
        let at = from
        res.on("data", (c: Buffer) => {
          check(at, c)
          at += c.length
        })
        res.on("end", () => (at === to ? resolve() : reject(new Error(`short body ${at - from} of ${to - from}`))))
        res.on("error", reject)
      })
      .on("error", reject)
  })

runDriver(
  Effect.gen(function* () {
    const node = [...(flags.prof === "" ? [] : ["--cpu-prof", `--cpu-prof-dir=${path.resolve(flags.prof)}`]), ...flags.nodeFlags.split(" ").filter((f) => f !== "")]
    const settings = JSON.stringify({ capacity: 16 * 1024 ** 3, ...(JSON.parse(flags.worker) as object) })
    const cluster = yield* Proc.spawn(
      "cluster",
      ["node", ...node, "--import", "tsx", "bench/miss-path/cluster.ts", settings, String(flags.latencyMs), String(flags.bandwidth)],
      // As the launcher (bin/talon.mjs) sets it: fills' writes and fsyncs must not queue behind each other.
      { echoStderr: true, grace: "20 seconds", env: { UV_THREADPOOL_SIZE: process.env.UV_THREADPOOL_SIZE ?? "32" } }
    )
    const m = yield* cluster.waitFor(/^(\{"ready":true.*\})$/m, "120 seconds")
    const ready = JSON.parse(m[1]!) as { origin: string; root: string; coordinator: string; admin: string }
    /** The worker's counter `name` (its admin /metrics), or -1 when unreadable. */
    const counter = (name: string) =>
      Effect.promise(() =>
        fetch(`http://${ready.admin}/metrics`)
          .then((r) => r.text())
          .then((text) => Number(new RegExp(`^${name} (\\d+)`, "m").exec(text)?.[1] ?? -1))
          .catch(() => -1)
      )
    const source = path.join(ready.root, BUCKET, "source.bin")
    fs.mkdirSync(path.dirname(source), { recursive: true })
    fs.writeFileSync(source, expected)
    const client = yield* makeTalonClient({ coordinator: ready.coordinator })
    yield* Effect.sleep(Duration.seconds(2))
    for (let i = 0; i < flags.objects * 2; i++) {
      // Alternately 8 ranged GETs straight from the origin stub (its own cost) and a cold read through the worker.
      const direct = i % 2 === 0
      const key = `o${i}.bin`
      fs.linkSync(source, path.join(ready.root, BUCKET, key))
      const n0 = direct ? 0 : yield* counter("talon_worker_origin_native_bytes_total")
      const c0 = procCpu(cluster.pid)
      // The main thread's tid is the pid: the JS thread, as against the fill addon's and libuv's threads.
      const m0 = procCpu(cluster.pid, cluster.pid)
      const r0 = process.cpuUsage()
      const t0 = performance.now()
      if (direct) {
        const piece = Math.ceil(SIZE / 8)
        yield* Effect.promise(() => Promise.all(Array.from({ length: 8 }, (_, k) => originRange(`${ready.origin}/${BUCKET}/${key}`, k * piece, Math.min(SIZE, (k + 1) * piece)))))
      } else {
        let at = 0
        yield* Stream.runForEach(client.readStream(`s3://${BUCKET}/${key}`, 0, SIZE), (chunk) =>
          Effect.sync(() => {
            check(at, chunk)
            at += chunk.length
          })
        )
        if (at !== SIZE) throw new Error(`read ${at} of ${SIZE} bytes`)
      }
      const seconds = (performance.now() - t0) / 1000
      const r = process.cpuUsage(r0)
      const c1 = procCpu(cluster.pid)
      const m1 = procCpu(cluster.pid, cluster.pid)
      const nativeShare = direct ? undefined : +(((yield* counter("talon_worker_origin_native_bytes_total")) - n0) / SIZE).toFixed(3)
      const perByte = (seconds: number) => +((seconds * 1e9) / SIZE).toFixed(2)
      const readerNs = (((r.user + r.system) / 1e6) * 1e9) / SIZE
      console.log(JSON.stringify({ bench: "miss-path-cpu", arm: direct ? "direct-8" : "cold", object: i, mbps: +(SIZE / 1e6 / seconds).toFixed(1), clusterNsPerByte: perByte(c1.user + c1.system - c0.user - c0.system), clusterUserNsPerByte: perByte(c1.user - c0.user), clusterMainThreadNsPerByte: perByte(m1.user + m1.system - m0.user - m0.system), clusterMainThreadUserNsPerByte: perByte(m1.user - m0.user), readerNsPerByte: +readerNs.toFixed(2), nativeShare }))
    }
    yield* cluster.kill("SIGINT")
  })
)
