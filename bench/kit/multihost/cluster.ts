/**
 * Brings compose services up on their hosts and waits until they answer, probing from the
 * harness's own leg on the bridge (admin /readyz for coordinators and workers, the S3 port for
 * the origin stub, /health for etcd).
 */
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import { Data, Duration, Effect, Schedule, type Scope } from "effect"
import { type ComposeService, launchOf, startOrder } from "./compose.js"
import type { Topology } from "./netns.js"
import { type Proc, type ProcessFailed, start } from "./procs.js"

export class NotReady extends Data.TaggedError("NotReady")<{ readonly what: string; readonly detail: string }> {
  override get message() {
    return `${this.what} did not become ready: ${this.detail}`
  }
}

const tryFetch = (url: string): Effect.Effect<number, string> =>
  Effect.tryPromise({
    try: (signal) => fetch(url, { signal: AbortSignal.any([signal, AbortSignal.timeout(2_000)]) }).then(async (r) => (await r.arrayBuffer(), r.status)),
    catch: (e) => (e instanceof Error ? (e.cause instanceof Error ? e.cause.message : e.message) : String(e))
  })

/** Polls `url` until it answers `okStatus` (any status when undefined), or fails after `timeoutMs`. */
export const waitHttp = (
  what: string,
  url: string,
  options: { readonly timeoutMs?: number; readonly okStatus?: number; readonly proc?: Proc } = {}
): Effect.Effect<void, NotReady> => {
  let last = "no answer yet"
  const once = Effect.gen(function* () {
    if (options.proc !== undefined && !options.proc.isRunning()) {
      return yield* Effect.fail(new NotReady({ what, detail: `the process exited:\n${options.proc.tail(20)}` }))
    }
    const status = yield* tryFetch(url).pipe(Effect.mapError((e) => (last = e)))
    if (options.okStatus !== undefined && status !== options.okStatus) {
      last = `${url} answered ${status}`
      return yield* Effect.fail(last)
    }
  })
  return once.pipe(
    Effect.retry({
      schedule: Schedule.spaced("200 millis"),
      while: (e) => typeof e === "string"
    }),
    Effect.timeoutFail({
      duration: Duration.millis(options.timeoutMs ?? 60_000),
      onTimeout: () => new NotReady({ what, detail: `${url}: ${last}${options.proc ? `\n${options.proc.tail(20)}` : ""}` })
    }),
    Effect.catchIf((e): e is string => typeof e === "string", (e) => Effect.fail(new NotReady({ what, detail: e })))
  )
}

/** The URL that says a service is up, by what its command runs. */
export const readinessUrl = (service: ComposeService, ip: string): { readonly url: string; readonly okStatus?: number } | undefined => {
  const [program, ...args] = service.command
  const flag = (name: string, def: string) => {
    const i = args.indexOf(name)
    return i >= 0 ? args[i + 1]! : def
  }
  const port = (addr: string) => addr.slice(addr.lastIndexOf(":") + 1)
  switch (program) {
    case "coordinator":
      return { url: `http://${ip}:${port(flag("--admin-listen", "0.0.0.0:8000"))}/readyz`, okStatus: 200 }
    case "worker":
      return { url: `http://${ip}:${port(flag("--admin-addr", "0.0.0.0:8001"))}/readyz`, okStatus: 200 }
    case "origin":
      return { url: `http://${ip}:${flag("--port", "9100")}/` }
    case "gateway":
      return { url: `http://${ip}:${port(flag("--listen", "0.0.0.0:9000"))}/` }
    case "etcd":
      return { url: `http://${ip}:2379/health`, okStatus: 200 }
    default:
      return undefined
  }
}

export interface Running {
  readonly procs: Map<string, Proc>
  readonly proc: (name: string) => Proc
}

/**
 * Starts `services` (each on the host of its own name) in dependency order. Services whose
 * readiness needs a peer that starts later (etcd members wait for quorum) are awaited together
 * once all have started.
 */
export const bringUp = (
  topo: Topology,
  services: ReadonlyArray<ComposeService>,
  runDir: string,
  talonArgv: ReadonlyArray<string>,
  overrides: (s: ComposeService) => Readonly<Record<string, string>> = () => ({})
): Effect.Effect<Running, ProcessFailed | NotReady, Scope.Scope> =>
  Effect.gen(function* () {
    const procs = new Map<string, Proc>()
    const logs = join(runDir, "logs")
    mkdirSync(logs, { recursive: true })
    const ordered = startOrder(services)
    const etcd = ordered.filter((s) => s.command[0] === "etcd")
    const rest = ordered.filter((s) => s.command[0] !== "etcd")
    const launch = (s: ComposeService) =>
      Effect.gen(function* () {
        const l = launchOf(s, talonArgv, runDir, overrides(s))
        for (const d of l.dirs) mkdirSync(d, { recursive: true })
        const p = yield* start(topo.host(s.name), l, join(logs, `${s.name}.log`))
        procs.set(s.name, p)
        return p
      })
    const ready = (s: ComposeService) => {
      const r = readinessUrl(s, topo.host(s.name).ip)
      return r === undefined ? Effect.void : waitHttp(s.name, r.url, { proc: procs.get(s.name)!, ...(r.okStatus !== undefined ? { okStatus: r.okStatus } : {}) })
    }
    for (const s of etcd) yield* launch(s)
    yield* Effect.forEach(etcd, ready, { concurrency: "unbounded" })
    for (const s of rest) {
      yield* launch(s)
      yield* ready(s)
    }
    return {
      procs,
      proc: (name: string) => {
        const p = procs.get(name)
        if (p === undefined) throw new Error(`no process ${name}`)
        return p
      }
    }
  })
