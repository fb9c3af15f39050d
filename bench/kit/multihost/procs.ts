/**
 * Processes started inside a host's namespace (`ip netns exec NS cmd …`, which execs the command,
 * so the pid we hold is the process itself and kill -9 reaches it). Output goes to a log file
 * per process; a process that exits before its scope closes is reported with its log's tail.
 */
import { spawn } from "node:child_process"
import { closeSync, openSync, readFileSync } from "node:fs"
import { Data, Deferred, Effect, type Scope } from "effect"
import type { Host } from "./netns.js"

export class ProcessFailed extends Data.TaggedError("ProcessFailed")<{ readonly name: string; readonly detail: string }> {
  override get message() {
    return `${this.name}: ${this.detail}`
  }
}

export interface Launch {
  readonly name: string
  readonly argv: ReadonlyArray<string>
  readonly env?: Readonly<Record<string, string>>
  readonly cwd?: string
}

export interface Proc {
  readonly name: string
  readonly host: Host
  readonly pid: number
  readonly log: string
  /** Resolves with the exit code (or signal name) once the process is gone. */
  readonly exited: Effect.Effect<string>
  readonly isRunning: () => boolean
  readonly kill9: Effect.Effect<void>
  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`. */
  readonly stop: (graceMs?: number) => Effect.Effect<void>
  readonly tail: (lines?: number) => string
}

export const tailOf = (file: string, lines = 30): string => {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n")
  } catch {
    return "(no log)"
  }
}

/** Starts `launch` in `host`'s namespace; stops it (SIGTERM, then SIGKILL) when the scope closes. */
export const start = (host: Host, launch: Launch, log: string): Effect.Effect<Proc, ProcessFailed, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.gen(function* () {
      const fd = openSync(log, "a")
      const child = yield* Effect.try({
        try: () =>
          spawn("ip", ["netns", "exec", host.ns, ...launch.argv], {
            cwd: launch.cwd,
            env: { ...process.env, NO_COLOR: "1", ...launch.env },
            stdio: ["ignore", fd, fd]
          }),
        catch: (e) => new ProcessFailed({ name: launch.name, detail: `could not start: ${String(e)}` })
      })
      closeSync(fd)
      if (child.pid === undefined) {
        return yield* Effect.fail(new ProcessFailed({ name: launch.name, detail: `could not start ${launch.argv[0]}` }))
      }
      const done = yield* Deferred.make<string>()
      let running = true
      child.on("exit", (code, signal) => {
        running = false
        Deferred.unsafeDone(done, Effect.succeed(signal ?? String(code)))
      })
      child.on("error", (e) => {
        running = false
        Deferred.unsafeDone(done, Effect.succeed(`error: ${e.message}`))
      })
      const pid = child.pid
      const signal = (sig: NodeJS.Signals) =>
        Effect.sync(() => {
          try {
            process.kill(pid, sig)
          } catch {
            // gone already
          }
        })
      const proc: Proc = {
        name: launch.name,
        host,
        pid,
        log,
        exited: Deferred.await(done),
        isRunning: () => running,
        kill9: Effect.zipRight(signal("SIGKILL"), Deferred.await(done)).pipe(Effect.asVoid),
        stop: (graceMs = 5_000) =>
          Effect.gen(function* () {
            if (!running) return
            yield* signal("SIGTERM")
            const ended = yield* Deferred.await(done).pipe(Effect.timeout(graceMs), Effect.option)
            if (ended._tag === "None") yield* signal("SIGKILL").pipe(Effect.zipRight(Deferred.await(done)))
          }),
        tail: (lines) => tailOf(log, lines)
      }
      return proc
    }),
    (p) => p.stop()
  )

/** Runs `launch` in `host`'s namespace to completion; fails with the output's tail on a non-zero exit. */
export const runToEnd = (host: Host, launch: Launch, log: string): Effect.Effect<string, ProcessFailed> =>
  Effect.scoped(
    Effect.gen(function* () {
      const p = yield* start(host, launch, log)
      const code = yield* p.exited
      const out = readFileSync(log, "utf8")
      if (code !== "0") return yield* Effect.fail(new ProcessFailed({ name: launch.name, detail: `exited ${code}:\n${p.tail(20)}` }))
      return out
    })
  )
