/**
 * `talon worker` as a real child process, started the way a user starts it (bin/talon.mjs): its
 * stdout and stderr gathered, lines awaited by pattern, and a SIGKILL from the test's cleanup if
 * it is still running then. bin/talon.mjs runs the CLI bundle when the build is fresh (as in CI,
 * after npm ci) and src/ through tsx otherwise; through tsx a start costs ~4x the CPU, which on
 * a loaded machine is many seconds, hence the long default wait.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as path from "node:path"
import type { Cleanup } from "./harness.js"

export const repoRoot = path.resolve(__dirname, "../../..")
const talon = path.join(repoRoot, "bin/talon.mjs")

/** The S3 credentials the origin stub accepts, for a worker's environment. */
export const stubCredentials = { TALON_S3_ACCESS_KEY_ID: "talon", TALON_S3_SECRET_ACCESS_KEY: "talon-secret" }

export interface WorkerChild {
  readonly child: ChildProcess
  /** Resolves with the exit code (null when a signal ended it). */
  readonly exited: Promise<number | null>
  readonly output: () => string
  /** The first match of `re` in the output so far or to come; throws if the worker exits first or `ms` pass. */
  readonly waitFor: (re: RegExp, ms?: number) => Promise<RegExpExecArray>
  /** SIGKILL (when still running), then the exit. */
  readonly kill: () => Promise<void>
}

export const spawnWorker = (
  cleanup: Cleanup,
  args: ReadonlyArray<string>,
  env: Record<string, string> = {},
  waitMs = 150_000
): WorkerChild => {
  const child = spawn(process.execPath, [talon, "worker", ...args], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  // Waiters re-check on each chunk of output and on the exit, not on a timer.
  const changed = new Set<() => void>()
  const gathered = (d: Buffer | string) => {
    out += d
    for (const f of changed) f()
  }
  child.stdout!.on("data", gathered)
  child.stderr!.on("data", gathered)
  const exited = new Promise<number | null>((r) =>
    child.once("exit", (code) => {
      r(code)
      for (const f of changed) f()
    })
  )
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    await exited
  }
  cleanup.add(kill)
  const waitFor = (re: RegExp, ms = waitMs): Promise<RegExpExecArray> =>
    new Promise((resolve, reject) => {
      const done = () => {
        changed.delete(check)
        clearTimeout(timer)
      }
      const check = () => {
        const m = re.exec(out)
        if (m !== null) return done(), resolve(m)
        if (child.exitCode !== null || child.signalCode !== null) return done(), reject(new Error(`the worker exited before ${re} appeared in its output:\n${out}`))
      }
      const timer = setTimeout(() => (done(), reject(new Error(`no ${re} in the worker's output within ${ms} ms:\n${out}`))), ms)
      changed.add(check)
      check()
    })
  return { child, exited, output: () => out, waitFor, kill }
}
