/**
 * The HA scenarios on the compose `ha` profile (3 etcd, 2 coordinators, 3 workers, origin stub),
 * each under load from a verifying TalonClient reader on a client host:
 *
 *   coordinator-kill  kill -9 coordinator-1 (first in everyone's list): zero client errors
 *   etcd-cut          drop coordinator-2's traffic to every etcd member: it turns unready within
 *                     its lease, the workers stay members through coordinator-1, zero client errors
 *   worker-kill       kill -9 worker-3: zero wrong bytes; recovery = kill until reads succeed again
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect, type Scope } from "effect"
import { repoRoot } from "../lib/args.js"
import { bringUp, NotReady, type Running, waitHttp } from "../kit/multihost/cluster.js"
import { type ComposeService, launchOf, profile } from "../kit/multihost/compose.js"
import { cutOff, heal, type Topology } from "../kit/multihost/netns.js"
import { type Proc, type ProcessFailed, start } from "../kit/multihost/procs.js"
import type { ScenarioRow } from "./report.js"
import { OBJECT_KEY, OBJECT_SIZE } from "../kit/multihost/throughput.js"

export const HA_CLIENT = "client-1"
export const haHosts = (compose: ReadonlyArray<ComposeService>): ReadonlyArray<string> =>
  [...profile(compose, "ha").filter((s) => s.command[0] !== "gateway").map((s) => s.name), HA_CLIENT]

export interface HaOptions {
  readonly runDir: string
  readonly talonArgv: ReadonlyArray<string>
  /** How this machine runs a TypeScript file (node --import tsx). */
  readonly tsArgv: ReadonlyArray<string>
  readonly readerScript: string
  /** Seconds of load before and after each fault. */
  readonly settleSeconds: number
  readonly scenarios: ReadonlyArray<string>
}

interface ReaderFinal {
  readonly ok: number
  readonly errors: number
  readonly wrong_bytes: number
  readonly error_times: ReadonlyArray<number>
  readonly error_samples: ReadonlyArray<string>
  readonly stalls: ReadonlyArray<{ readonly from: number; readonly ms: number }>
}

const sleep = (s: number) => Effect.sleep(`${Math.round(s * 1000)} millis`)

const readerLines = (p: Proc): ReadonlyArray<Record<string, unknown>> =>
  p.tail(100_000).split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>)

/** Starts a reader and waits until it has completed reads; returns it and a function ending it with its final counts. */
const startReader = (topo: Topology, o: HaOptions, copy: string, name: string, coordinators: string) =>
  Effect.gen(function* () {
    const p = yield* start(
      topo.host(HA_CLIENT),
      {
        name,
        cwd: repoRoot,
        argv: [...o.tsArgv, o.readerScript, "--object", `s3://talon/${OBJECT_KEY}`, "--copy", copy, "--range", "256K", "--concurrency", "8"],
        env: { TALON_CLIENT_COORDINATOR: coordinators, TALON_CLIENT_BLOCK_SIZE: String(8 * 1024 * 1024) }
      },
      join(o.runDir, "logs", `${name}.log`)
    )
    yield* waitUntil(`${name} reads`, () => {
      const last = readerLines(p).at(-1)
      return last !== undefined && (last["ok"] as number) > 0
    }, 90_000, p)
    const finish = Effect.gen(function* () {
      yield* p.stop(30_000)
      const final = readerLines(p).find((l) => l["final"] === true)
      if (final === undefined) return yield* Effect.fail(new NotReady({ what: name, detail: `no final line:\n${p.tail(20)}` }))
      return final as unknown as ReaderFinal
    })
    return { proc: p, finish }
  })

const waitUntil = (what: string, cond: () => boolean, timeoutMs: number, proc?: Proc): Effect.Effect<number, NotReady> =>
  Effect.gen(function* () {
    const t0 = Date.now()
    while (!cond()) {
      if (proc !== undefined && !proc.isRunning()) return yield* Effect.fail(new NotReady({ what, detail: `process exited:\n${proc.tail(20)}` }))
      if (Date.now() - t0 > timeoutMs) return yield* Effect.fail(new NotReady({ what, detail: `not within ${timeoutMs} ms${proc ? `\n${proc.tail(20)}` : ""}` }))
      yield* Effect.sleep("100 millis")
    }
    return Date.now() - t0
  })

const status = (url: string): Effect.Effect<number> =>
  Effect.promise(() => fetch(url, { signal: AbortSignal.timeout(2_000) }).then((r) => r.status, () => 0))

interface Member {
  readonly id: string
  readonly role: string
  readonly health: string
  readonly lastHeartbeatAgeMs: number
}

const clusterMembers = (url: string): Effect.Effect<ReadonlyArray<Member>> =>
  Effect.promise(() =>
    fetch(url, { signal: AbortSignal.timeout(2_000) })
      .then((r) => r.json() as Promise<{ members?: ReadonlyArray<Member> }>)
      .then((j) => j.members ?? [], () => [])
  )

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`

/**
 * What the client felt after a fault at `at`: errors after it (how long until the last), and the
 * longest stall (no read completing) that overlapped the first 10 s after it.
 */
const felt = (f: ReaderFinal, at: number): string => {
  const errs = f.error_times.filter((t) => t >= at)
  const stall = f.stalls.filter((s) => s.from + s.ms >= at && s.from <= at + 10_000).reduce((m, s) => (s.ms > m.ms ? s : m), { from: at, ms: 0 })
  const parts = [`longest stall ${seconds(stall.ms)}${stall.ms > 0 ? ` from +${seconds(Math.max(0, stall.from - at))}` : ""}`]
  if (errs.length > 0) parts.unshift(`errors until +${seconds(Math.max(...errs) - at)}`)
  return parts.join(", ")
}

export const haScenarios = (
  topo: Topology,
  compose: ReadonlyArray<ComposeService>,
  o: HaOptions
): Effect.Effect<ReadonlyArray<ScenarioRow>, ProcessFailed | NotReady | Error, Scope.Scope> =>
  Effect.gen(function* () {
    const services = profile(compose, "ha").filter((s) => s.command[0] !== "gateway")
    const up: Running = yield* bringUp(topo, services, o.runDir, o.talonArgv)
    const ip = (name: string) => topo.host(name).ip
    const admin = (name: string, path: string) => `http://${ip(name)}:${name.startsWith("worker") ? 8001 : 8000}${path}`
    const coordinators = services.filter((s) => s.command[0] === "coordinator").map((s) => `${s.name}:7000`).join(",")
    const body = yield* Effect.tryPromise({
      try: () => fetch(`http://${ip("origin")}:9100/talon/${OBJECT_KEY}`).then((r) => r.arrayBuffer()),
      catch: (e) => new NotReady({ what: "origin", detail: String(e) })
    })
    if (body.byteLength !== OBJECT_SIZE) return yield* Effect.fail(new Error(`origin served ${body.byteLength} bytes of ${OBJECT_KEY}`))
    const copy = join(o.runDir, "ha-object.bin")
    writeFileSync(copy, Buffer.from(body))
    const rows: Array<ScenarioRow> = []
    /** Reads under way, `victim` killed -9, then `settles` settle periods before the reader's tally becomes a row. */
    const killUnderLoad = (scenario: string, victim: string, settles: number) =>
      Effect.gen(function* () {
        const r = yield* startReader(topo, o, copy, `reader-${scenario}`, coordinators)
        yield* sleep(o.settleSeconds)
        const at = Date.now()
        yield* up.proc(victim).kill9
        console.log(`${scenario}: kill -9 ${victim}`)
        yield* sleep(o.settleSeconds * settles)
        const f = yield* r.finish
        if (f.errors > 0) console.log(`  client errors, e.g. ${f.error_samples.join("; ")}`)
        rows.push({
          scenario: `kill -9 ${victim} under load`,
          errors: f.errors,
          wrongBytes: f.wrong_bytes,
          recovery: felt(f, at),
          throughput: `${f.ok} verified reads`
        })
      })

    if (o.scenarios.includes("coordinator-kill")) {
      yield* killUnderLoad("coordinator-kill", "coordinator-1", 2)
      // Back for the next scenario, as a restarted container would be.
      const svc = services.find((s) => s.name === "coordinator-1")!
      const relaunched = yield* start(topo.host(svc.name), launchOf(svc, o.talonArgv, o.runDir), join(o.runDir, "logs", "coordinator-1.restart.log"))
      up.procs.set(svc.name, relaunched)
      yield* waitHttp("coordinator-1 (restarted)", admin("coordinator-1", "/readyz"), { okStatus: 200, proc: relaunched })
    }

    if (o.scenarios.includes("etcd-cut")) {
      const victim = "coordinator-2"
      const r = yield* startReader(topo, o, copy, "reader-etcd-cut", coordinators)
      yield* sleep(o.settleSeconds)
      const etcdIps = services.filter((s) => s.command[0] === "etcd").map((s) => ip(s.name))
      const at = Date.now()
      yield* cutOff(topo.host(victim), etcdIps)
      console.log(`etcd-cut: ${victim} cut off from ${etcdIps.join(", ")}`)
      let unreadyAfter = -1
      while (Date.now() - at < 60_000) {
        if ((yield* status(admin(victim, "/readyz"))) !== 200) {
          unreadyAfter = Date.now() - at
          break
        }
        yield* Effect.sleep("100 millis")
      }
      const leaseMs = Number(services.find((s) => s.name === victim)!.environment["TALON_STATE_LEASE_TTL_MS"] ?? 30_000)
      // The workers must still be members once every record written before the cut has outlived its lease.
      yield* sleep(Math.max(o.settleSeconds, leaseMs / 1000 + 2))
      const members = yield* clusterMembers(admin("coordinator-1", "/api/v1/cluster"))
      const workers = members.filter((m) => m.role === "worker" && m.health === "healthy")
      const f = yield* r.finish
      yield* heal(topo.host(victim))
      console.log(`  ${victim} unready after ${unreadyAfter} ms (lease ${leaseMs} ms); coordinator-1 lists ${workers.map((w) => `${w.id} (last heartbeat ${w.lastHeartbeatAgeMs} ms ago)`).join(", ")}`)
      rows.push({
        scenario: `cut ${victim} off from etcd`,
        errors: f.errors,
        wrongBytes: f.wrong_bytes,
        recovery: unreadyAfter < 0 ? "never unready" : `unready after ${seconds(unreadyAfter)} (lease ${seconds(leaseMs)}); ${workers.length}/3 workers healthy on coordinator-1 after ${seconds(leaseMs + 2000)}`,
        throughput: `${f.ok} verified reads`
      })
      yield* waitHttp(`${victim} (healed)`, admin(victim, "/readyz"), { okStatus: 200 })
    }

    if (o.scenarios.includes("worker-kill")) yield* killUnderLoad("worker-kill", "worker-3", 3)
    return rows
  })
