/**
 * One dataplane-bench run: the C pound client (CPU 1) against one arm for the warmup and the
 * measured window, while the arm's processes are sampled from /proc over the same window.
 */
import type { CommandExecutor } from "@effect/platform"
import { Data, Effect } from "effect"
import { latencyFrom, type LoadLatency } from "../lib/latency.js"
import * as Proc from "../lib/proc.js"
import { sampleWindow } from "../lib/procStats.js"
import { OBJECT_URI, type Target } from "./arms.js"

export interface Metrics extends LoadLatency {
  readonly client_cores: number
  /** From this script's /proc sampling over all the arm's processes. */
  readonly server_cores: number
  readonly cpu_us_per_req: number
  readonly kernel_share: number
  readonly rss_mib: number
  /** pound's --server-pid numbers (main process only). */
  readonly pound_cpu_us_per_req: number
  readonly pound_kernel_share: number
}

const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : NaN)

export class MeasureFailed extends Data.TaggedError("MeasureFailed")<{ readonly message: string }> {}

/** What every run shares: the pound binary and the window. */
export interface MeasureEnv {
  readonly pound: string
  readonly seconds: number
  readonly warmup: number
  readonly spin: boolean
}

export const fmt = (v: number, d = 0) => (Number.isFinite(v) ? v.toFixed(d) : "-")

/** pound's numbers with the arm's own CPU and RSS; a non-zero exit that still printed a result counts as errors. */
export const measure = (
  env: MeasureEnv,
  t: Target,
  conns: number,
  depth: number
): Effect.Effect<Metrics, MeasureFailed | Proc.ProcError, CommandExecutor.CommandExecutor> =>
  Effect.scoped(
    Effect.gen(function* () {
      const argv = [
        env.pound,
        "--addr", `127.0.0.1:${t.port}`, "--conns", String(conns), "--depth", String(depth),
        "--seconds", String(env.seconds), "--warmup", String(env.warmup), "--range", "64K",
        "--object", OBJECT_URI, "--size", "64M", "--server-pid", String(t.mainPid), "--json",
        ...(env.spin ? ["--spin"] : [])
      ]
      const pound = yield* Proc.spawn("pound", argv, { cpus: "1" })
      // pound connects, warms up for `warmup` s, then measures `seconds` s; sample the same window.
      const [code, w] = yield* Effect.all([pound.exitCode, sampleWindow(t.pids, env.warmup * 1000 + 30, env.seconds * 1000 - 60)], {
        concurrency: 2
      })
      const out = yield* pound.stdout
      const err = (yield* pound.stderr).trim()
      const line = out.trim().split("\n").pop() ?? ""
      let j: Record<string, unknown> = {}
      try {
        j = JSON.parse(line) as Record<string, unknown>
      } catch {
        return yield* new MeasureFailed({ message: `pound against ${t.name} printed no result (exit ${code}): ${err}` })
      }
      if (code !== 0) console.error(`  ! ${t.name} ${conns}x${depth}: pound exit ${code}: ${err.split("\n")[0]}`)
      const latency = latencyFrom((f) => num(j[f]))
      const rps = latency.rps
      const cpu = w.user + w.sys
      return {
        ...latency,
        errors: code === 0 ? latency.errors : Math.max(1, latency.errors || 0),
        client_cores: num(j["client_cores"]),
        server_cores: Math.round((cpu / w.wall) * 1000) / 1000,
        cpu_us_per_req: rps > 0 ? Math.round(((cpu * 1e6) / (rps * w.wall)) * 100) / 100 : NaN,
        kernel_share: cpu > 0 ? Math.round((w.sys / cpu) * 1000) / 1000 : NaN,
        rss_mib: Math.round((w.rssKb / 1024) * 10) / 10,
        pound_cpu_us_per_req: num(j["server_cpu_us_per_req"]),
        pound_kernel_share: num(j["server_kernel_share"])
      }
    })
  )

export const failedRun: Metrics = {
  rps: NaN, mib_s: NaN, p50_us: NaN, p99_us: NaN, p999_us: NaN, max_us: NaN, samples: 0, errors: 1, client_cores: NaN,
  server_cores: NaN, cpu_us_per_req: NaN, kernel_share: NaN, rss_mib: NaN, pound_cpu_us_per_req: NaN, pound_kernel_share: NaN
}
