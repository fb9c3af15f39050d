/**
 * `dataplane-bench --alloc`: JS heap allocation per request on the hit path. A worker in this
 * process (pinned to CPU 0) per plane × mode, driven by pound (CPU 1), with v8.GCProfiler over
 * the window; optionally V8's sampling heap or CPU profiler by call site.
 */
import type { CommandExecutor } from "@effect/platform"
import { execFileSync } from "node:child_process"
import * as inspector from "node:inspector"
import { join } from "node:path"
import * as v8 from "node:v8"
import { Effect, Layer, ManagedRuntime, Runtime } from "effect"
import * as Router from "../../src/backend/Router.js"
import { WorkerConfig } from "../../src/worker/config.js"
import { nativeCounters } from "../../src/worker/plane/Native.js"
import { Sendfile } from "../../src/worker/plane/Sendfile.js"
import { ServeMode } from "../../src/worker/server/ServeMode.js"
import { Worker } from "../../src/worker/Worker.js"
import { type Target, warmObject } from "./arms.js"
import { fmt, measure, type MeasureEnv } from "./measure.js"
import type { Config } from "./report.js"

export interface AllocParams {
  readonly measure: MeasureEnv
  readonly config: Config
  readonly stubUrl: string
  /** Scratch dir for the workers' caches. */
  readonly dir: string
  readonly allocSites: boolean
  readonly cpuSites: boolean
}

/** Where the hit path allocates: V8's sampling heap profiler over one pound window, bytes per request by function. */
const allocationSites = async (window: () => Promise<unknown>, hits: () => number) => {
  const session = new inspector.Session()
  session.connect()
  const post = (method: string, params?: object) =>
    new Promise<unknown>((res, rej) => session.post(method, params ?? {}, (e, r) => (e ? rej(e) : res(r))))
  await post("HeapProfiler.startSampling", { samplingInterval: 256, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true })
  const h0 = hits()
  await window()
  const n = hits() - h0
  const { profile } = (await post("HeapProfiler.stopSampling")) as {
    profile: { head: Node }
  }
  interface Node {
    callFrame: { functionName: string; url: string; lineNumber: number }
    selfSize: number
    children: Array<Node>
  }
  const bySite = new Map<string, number>()
  const walk = (node: Node) => {
    if (node.selfSize > 0) {
      const f = node.callFrame
      const site = `${f.functionName || "(anonymous)"} ${f.url.replace(/^.*\/(src|node_modules)\//, "$1/")}:${f.lineNumber + 1}`
      bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize)
    }
    for (const c of node.children) walk(c)
  }
  walk(profile.head)
  session.disconnect()
  const top = [...bySite.entries()].sort((a, b) => b[1] - a[1]).slice(0, 25)
  for (const [site, bytes] of top) console.log(`    ${fmt(bytes / n, 1).padStart(7)} B/req  ${site}`)
}

/** Where the hit path spends user CPU: V8's sampling CPU profiler over one pound window, self µs per request by function. */
const cpuSites = async (window: () => Promise<unknown>, hits: () => number) => {
  const session = new inspector.Session()
  session.connect()
  const post = (method: string, params?: object) =>
    new Promise<unknown>((res, rej) => session.post(method, params ?? {}, (e, r) => (e ? rej(e) : res(r))))
  await post("Profiler.enable")
  await post("Profiler.setSamplingInterval", { interval: 100 })
  await post("Profiler.start")
  const h0 = hits()
  await window()
  const n = hits() - h0
  const { profile } = (await post("Profiler.stop")) as {
    profile: { nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number } }>; samples: Array<number>; timeDeltas: Array<number> }
  }
  session.disconnect()
  const byNode = new Map<number, number>()
  profile.samples.forEach((id, i) => byNode.set(id, (byNode.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)))
  const bySite = new Map<string, number>()
  for (const node of profile.nodes) {
    const t = byNode.get(node.id)
    if (t === undefined) continue
    const f = node.callFrame
    const site = `${f.functionName || "(anonymous)"} ${f.url.replace(/^.*\/(src|node_modules)\//, "$1/")}:${f.lineNumber + 1}:${f.columnNumber + 1}`
    bySite.set(site, (bySite.get(site) ?? 0) + t)
  }
  const top = [...bySite.entries()].sort((a, b) => b[1] - a[1]).slice(0, 30)
  for (const [site, us] of top) console.log(`    ${fmt(us / n, 2).padStart(7)} µs/req  ${site}`)
}

/** Allocation per hit request, per plane × mode, in this process. */
export const allocMain = (p: AllocParams): Effect.Effect<void, unknown, CommandExecutor.CommandExecutor> =>
  Effect.flatMap(Effect.runtime<CommandExecutor.CommandExecutor>(), (rt) => Effect.promise(() => allocRuns(p, rt)))

const allocRuns = async (p: AllocParams, rt: Runtime.Runtime<CommandExecutor.CommandExecutor>) => {
  execFileSync("taskset", ["-pc", "0", String(process.pid)], { stdio: "ignore" })
  const { dir, stubUrl, config } = p
  const window = (target: Target) => Runtime.runPromise(rt)(measure(p.measure, target, config.conns, config.depth))
  console.log(
    `| plane | mode | conns×depth | hits | bytes/req | GCs | scavenges/100k req | rps | user µs/req | sys µs/req |\n|---|---|---|--:|--:|--:|--:|--:|--:|--:|`
  )
  for (const plane of ["native", "portable"] as const) {
    for (const mode of ["pipelined", "multiplexed"] as const) {
      const layer = Worker.layerWithoutDependencies.pipe(
        Layer.provide(
          Layer.mergeAll(
            plane === "native" ? Sendfile.Native : Sendfile.Portable,
            mode === "pipelined" ? ServeMode.Pipelined : ServeMode.Multiplexed,
            Router.layerLocal(stubUrl)
          )
        ),
        Layer.provide(
          WorkerConfig.layerSettings({
            dataAddress: "127.0.0.1:0",
            adminAddress: "127.0.0.1:0",
            coordinator: "",
            cacheDirs: [join(dir, `cache-${plane}-${mode}`)],
            versionTtlMs: 86_400_000,
            maxInflightPerConnection: 4096
          })
        )
      )
      const rt = ManagedRuntime.make(layer)
      const w = await rt.runPromise(Worker)
      await Effect.runPromise(warmObject(w.dataPort, 1))
      const target: Target = { name: `${plane}-${mode}`, port: w.dataPort, pids: () => [process.pid], mainPid: process.pid, cpus: "0" }
      // JIT warm-up: the hit path should be optimised code before anything is counted.
      await window(target)
      const profiler = new v8.GCProfiler()
      const hits0 = w.stats.hits
      const used0 = v8.getHeapStatistics().used_heap_size
      const cpu0 = process.cpuUsage()
      const nc0 = nativeCounters()
      profiler.start()
      const m = await window(target)
      const cpu = process.cpuUsage(cpu0)
      const nc1 = nativeCounters()
      const used1 = v8.getHeapStatistics().used_heap_size
      const hits = w.stats.hits - hits0
      const prof = profiler.stop() as unknown as {
        statistics: Array<{ gcType: string; beforeGC: { heapStatistics: { usedHeapSize: number } }; afterGC: { heapStatistics: { usedHeapSize: number } } }>
      }
      let allocated = 0
      let prev = used0
      for (const g of prof.statistics) {
        allocated += g.beforeGC.heapStatistics.usedHeapSize - prev
        prev = g.afterGC.heapStatistics.usedHeapSize
      }
      allocated += used1 - prev
      const scavenges = prof.statistics.filter((g) => g.gcType === "Scavenge").length
      console.log(
        `| ${plane} | ${mode} | ${config.name} | ${hits} | ${fmt(allocated / hits, 0)} | ${prof.statistics.length} | ${fmt((scavenges * 100_000) / hits, 1)} | ${fmt(m.rps)} | ${fmt(cpu.user / hits, 2)} | ${fmt(cpu.system / hits, 2)} |`
      )
      if (plane === "native" && nc0 !== undefined && nc1 !== undefined) {
        const per = (k: keyof typeof nc0) => fmt((nc1[k] - nc0[k]) / hits, 3)
        console.log(
          `    native per request: send ${per("sendCalls")}, sendfile ${per("sendfileCalls")}, eagain ${per("eagain")}, waits ${per("waits")}, wakeups ${per("wakeups")}, pushes ${per("pushes")}, recv ${per("recvCalls")}, hit table ${per("fastHits")}, handoffs ${per("handoffs")}`
        )
      }
      if (p.allocSites) await allocationSites(() => window(target), () => w.stats.hits)
      if (p.cpuSites) await cpuSites(() => window(target), () => w.stats.hits)
      await rt.dispose()
    }
  }
}