/**
 * dataplane-bench's arms: the C ceiling server and `talon worker` variants (plane × serve mode ×
 * loops), each started as a scoped process pinned with taskset, and the warm-up read that makes
 * the whole object resident before anything is measured.
 */
import type { CommandExecutor } from "@effect/platform"
import { mkdirSync } from "node:fs"
import * as net from "node:net"
import { join } from "node:path"
import { Data, Effect, type Scope } from "effect"
import { Backend } from "../../src/core/ids.js"
import { encodeGetRangeFrame, Flags, FrameDecoder, RESPONSE_CAPS } from "../../src/protocol/index.js"
import { talonBin, talonEnv } from "../lib/build.js"
import * as Proc from "../lib/proc.js"

export const SIZE = 64 * 1024 * 1024
export const RANGE = 64 * 1024
export const BUCKET = "bench"
export const KEY = "blob"
export const OBJECT_URI = `s3://${BUCKET}/${KEY}`

export class WarmFailed extends Data.TaggedError("WarmFailed")<{ readonly message: string }> {}

export interface WorkerArmSpec {
  readonly name: string
  readonly plane: "native" | "portable"
  readonly mode: "pipelined" | "multiplexed"
  readonly loops: 1 | 2
  readonly scheduling?: "rr" | "none"
  /** false: run with --no-hit-table. */
  readonly hitTable?: boolean
  readonly env?: Record<string, string>
  /** Node flags of the launcher's to leave out (an A/B of one flag). */
  readonly withoutNodeFlags?: ReadonlyArray<string>
  /** Node flags instead of the launcher's for the worker role (and none of its role environment): A/B of those flags. */
  readonly nodeFlags?: ReadonlyArray<string>
}

const PREV_FLAGS = ["--no-memory-reducer", "--max-semi-space-size=1"]

export const WORKER_ARMS: ReadonlyArray<WorkerArmSpec> = [
  { name: "native-pipelined", plane: "native", mode: "pipelined", loops: 1 },
  // Every request through the JS serve loop (no hit table): what the table itself is worth.
  { name: "native-pipelined-js", plane: "native", mode: "pipelined", loops: 1, hitTable: false },
  // One epoll_wait per loop wakeup instead of up to four while the hit table answers everything (native/sendfile.c).
  { name: "native-pipelined-drain1", plane: "native", mode: "pipelined", loops: 1, env: { TALON_NATIVE_DRAIN_ROUNDS: "1" } },
  { name: "portable-pipelined", plane: "portable", mode: "pipelined", loops: 1 },
  // The worker's launcher flag --max-semi-space-size=1 left out: V8's default young generation.
  { name: "native-pipelined-semi-default", plane: "native", mode: "pipelined", loops: 1, withoutNodeFlags: ["--max-semi-space-size"] },
  { name: "native-multiplexed", plane: "native", mode: "multiplexed", loops: 1 },
  { name: "portable-multiplexed", plane: "portable", mode: "multiplexed", loops: 1 },
  { name: "native-pipelined-x2", plane: "native", mode: "pipelined", loops: 2 },
  { name: "portable-pipelined-x2", plane: "portable", mode: "pipelined", loops: 2 },
  { name: "native-multiplexed-x2", plane: "native", mode: "multiplexed", loops: 2 },
  { name: "portable-multiplexed-x2", plane: "portable", mode: "multiplexed", loops: 2 },
  // Two loops, every hit through each loop's JS serve loop (no hit table): what the loops' tables are worth.
  { name: "native-pipelined-x2-js", plane: "native", mode: "pipelined", loops: 2, hitTable: false },
  // Two loops, the owner dealing each connection to the loop with the fewest open (what --loops did before SO_REUSEPORT).
  { name: "native-pipelined-x2-dealt", plane: "native", mode: "pipelined", loops: 2, env: { TALON_WORKER_LOOPS_ACCEPT: "dealt" } },
  // Two loops dealt connections by node:cluster's round-robin (what --loops did before balanced dealing).
  { name: "native-pipelined-x2-rr", plane: "native", mode: "pipelined", loops: 2, scheduling: "rr" },
  { name: "native-pipelined-x2-shared", plane: "native", mode: "pipelined", loops: 2, scheduling: "none" },
  // Without worker read-ahead: what its per-request bookkeeping costs the hit path.
  { name: "portable-pipelined-ra0", plane: "portable", mode: "pipelined", loops: 1, env: { TALON_WORKER_READ_AHEAD: "0" } },
  { name: "native-pipelined-js-ra0", plane: "native", mode: "pipelined", loops: 1, hitTable: false, env: { TALON_WORKER_READ_AHEAD: "0" } },
  // The worker's node flags before the memory ones (memory reducer, one V8 platform thread, MALLOC_ARENA_MAX=2): what those cost.
  { name: "native-pipelined-prevflags", plane: "native", mode: "pipelined", loops: 1, nodeFlags: PREV_FLAGS },
  { name: "native-pipelined-js-prevflags", plane: "native", mode: "pipelined", loops: 1, hitTable: false, nodeFlags: PREV_FLAGS }
]
export const allArmNames = ["ceiling", ...WORKER_ARMS.map((a) => a.name)]

export interface Target {
  readonly name: string
  readonly port: number
  /** Every process of the arm (a loops=2 worker: primary and loops). */
  readonly pids: () => ReadonlyArray<number>
  /** The process pound's --server-pid watches. */
  readonly mainPid: number
  readonly cpus: string
}

type Started = Effect.Effect<Target, Proc.ProcError, Scope.Scope | CommandExecutor.CommandExecutor>

export const startCeiling = (ceiling: string, blob: string): Started =>
  Effect.gen(function* () {
    const p = yield* Proc.spawn("ceiling", [ceiling, "--listen", "127.0.0.1:0", "--file", blob], { cpus: "0" })
    const match = yield* p.waitFor(/listening on 127\.0\.0\.1:(\d+) pid (\d+)/, "300 seconds")
    const pid = Number(match[2])
    return { name: "ceiling", port: Number(match[1]), pids: () => [pid], mainPid: pid, cpus: "0" }
  })

export const startWorker = (spec: WorkerArmSpec, stubUrl: string, cacheRoot: string): Started =>
  Effect.gen(function* () {
    const cache = join(cacheRoot, spec.name)
    mkdirSync(cache, { recursive: true })
    const cpus = spec.loops === 2 ? "0,1" : "0"
    const argv = [
      ...(spec.nodeFlags === undefined
        ? talonBin("worker").filter((a) => !(spec.withoutNodeFlags ?? []).some((f) => a.startsWith(f)))
        : [process.execPath, ...spec.nodeFlags, talonBin().at(-1)!]), "worker",
      "--coordinator", "", "--data-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
      "--cache-dir", cache, "--capacity", "1G",
      "--data-plane", spec.plane, "--serve-mode", spec.mode, "--loops", String(spec.loops),
      // All hits for the whole run: no version re-check (a HEAD) in the middle of a window.
      "--version-ttl-ms", "86400000",
      "--max-inflight", "4096",
      ...(spec.hitTable === false ? ["--no-hit-table"] : [])
    ]
    const env: Record<string, string> = {
      ...(spec.nodeFlags === undefined ? talonEnv("worker") : {}),
      TALON_S3_ENDPOINT: stubUrl,
      TALON_S3_ACCESS_KEY_ID: "bench",
      TALON_S3_SECRET_ACCESS_KEY: "bench-secret"
    }
    if (spec.scheduling !== undefined) env["NODE_CLUSTER_SCHED_POLICY"] = spec.scheduling
    Object.assign(env, spec.env)
    const re =
      spec.loops === 1
        ? new RegExp(`worker data listener on 127\\.0\\.0\\.1:(\\d+) \\(${spec.plane} plane, ${spec.mode} mode\\)`)
        : /worker data listener on 127\.0\.0\.1:(\d+) \([a-z]+ plane, [a-z]+ mode, \d+ loops, ([a-z-]+); pids ([\d, ]+)\)/
    const p = yield* Proc.spawn(`worker ${spec.name}`, argv, { cpus, env })
    const match = yield* p.waitFor(re, "300 seconds")
    const loopPids = spec.loops === 1 ? [] : match[3]!.split(",").map((s) => Number(s.trim()))
    const mainPid = p.pid
    return { name: spec.name, port: Number(match[1]), pids: () => [mainPid, ...loopPids], mainPid, cpus }
  })

/**
 * Reads the whole object through `port` in 1 MiB ranges on each of `conns` parallel connections (every
 * connection reads all of it, so every loop of a multi-loop worker holds every page); checks lengths.
 */
export const warmObject = (port: number, conns: number): Effect.Effect<void, WarmFailed> =>
  Effect.tryPromise({
    try: () => warmAll(port, conns),
    catch: (e) => new WarmFailed({ message: `warming port ${port}: ${e instanceof Error ? e.message : String(e)}` })
  })

const warmAll = async (port: number, conns: number) => {
  const object = { backend: Backend.S3, bucket: BUCKET, objectPath: KEY }
  const step = 1024 * 1024
  const offsets: Array<number> = []
  for (let o = 0; o < SIZE; o += step) offsets.push(o)
  const one = (list: ReadonlyArray<number>) =>
    new Promise<void>((res, rej) => {
      const socket = net.connect({ port, host: "127.0.0.1" })
      const decoder = new FrameDecoder(RESPONSE_CAPS)
      let i = 0
      const next = () => {
        if (i === list.length) {
          socket.end()
          return res()
        }
        socket.write(encodeGetRangeFrame(i + 1, { object, offset: list[i]!, len: step }))
      }
      socket.on("connect", next)
      socket.on("error", rej)
      socket.on("data", (chunk: Buffer) => {
        decoder.push(chunk)
        for (;;) {
          const f = decoder.next()
          if (f === undefined) break
          if ("_tag" in f) return rej(new Error(`bad frame: ${f.message}`))
          if ((f.header.flags & Flags.Error) !== 0) return rej(new Error(`warm read failed: ${f.payload.toString("utf8")}`))
          if (f.payload.length !== step) return rej(new Error(`warm read: ${f.payload.length} bytes, expected ${step}`))
          i++
          next()
        }
      })
    })
  await Promise.all(Array.from({ length: conns }, () => one(offsets)))
}
