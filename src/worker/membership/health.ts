/**
 * The health a worker reports in its status, from a real signal: every
 * heartbeat interval each cache dir takes a small write, read-back and unlink
 * probe. A dir that fails it (gone, replaced, read-only, out of space, or so
 * slow the probe times out) cannot take new fills there, so the worker is
 * `degraded`; with every dir failing it cannot cache or serve from disk at
 * all and is `unhealthy`. Either takes it out of placement (the coordinator
 * places only healthy, ready workers) until the probes pass again.
 */
import { randomBytes } from "node:crypto"
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import { Duration, Effect, Schedule, type Scope } from "effect"
import type { NodeHealth } from "../../protocol/status.js"

export const PROBE_FILE = ".talon-health-probe"

export interface DirProbe {
  readonly dir: string
  /** Why the last probe failed, or undefined when it passed. */
  readonly problem: string | undefined
}

/** The reported health for the latest probe of every dir. */
export const healthOf = (probes: ReadonlyArray<DirProbe>): NodeHealth => {
  const failing = probes.filter((p) => p.problem !== undefined).length
  return failing === 0 ? "healthy" : failing === probes.length ? "unhealthy" : "degraded"
}

export const describeProblems = (probes: ReadonlyArray<DirProbe>): string =>
  probes.flatMap((p) => (p.problem === undefined ? [] : [`cache dir ${p.dir} failed its write probe: ${p.problem}`])).join("; ")

/** One probe of `dir`: undefined when a write reads back intact, else what went wrong. */
export const probeDir = (dir: string, timeoutMs: number): Effect.Effect<string | undefined> => {
  const file = path.join(dir, PROBE_FILE)
  const bytes = randomBytes(16)
  return Effect.tryPromise(async () => {
    await fsp.writeFile(file, bytes)
    const back = await fsp.readFile(file)
    await fsp.rm(file, { force: true })
    return back.equals(bytes) ? undefined : "the probe file read back different bytes"
  }).pipe(
    Effect.timeoutFail({ duration: Duration.millis(timeoutMs), onTimeout: () => `no answer within ${timeoutMs} ms` }),
    Effect.catchAll((e) =>
      Effect.succeed(typeof e === "string" ? e : `${(e.error as NodeJS.ErrnoException)?.code ?? "error"}: ${e.error instanceof Error ? e.error.message : String(e.error)}`)
    )
  )
}

export interface CacheHealth {
  /** The health as of the latest round of probes (healthy before the first). */
  readonly current: () => NodeHealth
  readonly probes: () => ReadonlyArray<DirProbe>
  /** The failing dirs and why, for messages. */
  readonly problems: () => string
}

/**
 * Probes every dir now and then every `intervalMs` for the scope's life;
 * `onChange` hears each change of the reported health with the probes behind it.
 */
export const watchCacheHealth = (
  dirs: ReadonlyArray<string>,
  intervalMs: number,
  onChange: (health: NodeHealth, probes: ReadonlyArray<DirProbe>) => Effect.Effect<void>
): Effect.Effect<CacheHealth, never, Scope.Scope> =>
  Effect.gen(function* () {
    let probes: ReadonlyArray<DirProbe> = dirs.map((dir) => ({ dir, problem: undefined }))
    let health: NodeHealth = "healthy"
    // Generous: the probe shares libuv's thread pool with fills, and a busy worker is not a sick one.
    const timeoutMs = Math.max(10_000, intervalMs * 5)
    const round = Effect.gen(function* () {
      probes = yield* Effect.forEach(dirs, (dir) => Effect.map(probeDir(dir, timeoutMs), (problem) => ({ dir, problem })), { concurrency: "unbounded" })
      const next = healthOf(probes)
      if (next === health) return
      health = next
      yield* onChange(next, probes)
    })
    yield* round
    yield* Effect.forkScoped(Effect.repeat(round, Schedule.spaced(Duration.millis(intervalMs))))
    return { current: () => health, probes: () => probes, problems: () => describeProblems(probes) }
  })
