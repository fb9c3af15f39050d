/**
 * `talon mount` without `--foreground`: the same command re-run as a detached child (its own
 * session, so the terminal's SIGINT and hang-up do not reach it) with `--foreground` and its
 * output appended to a log file. The parent waits until the child says the mount is ready,
 * prints the pid and the log, and exits 0; a child that fails first hands its error to the
 * parent's message and exit code. node:child_process rather than @effect/platform's Command:
 * detaching and an IPC channel for readiness are what this needs, and Command offers neither.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Data, Effect } from "effect"

/** Set for the child: after mounting it reports readiness on its IPC channel, then drops it. */
export const DAEMON_ENV = "TALON_MOUNT_DAEMON"

export class DaemonFailed extends Data.TaggedError("DaemonFailed")<{ readonly mountpoint: string; readonly detail: string; readonly log: string }> {
  override get message() {
    return `mounting ${this.mountpoint} in the background failed: ${this.detail} (log: ${this.log}; run with --foreground to see it here)`
  }
}

export interface Ready {
  readonly _tag: "ready"
  readonly mountpoint: string
  readonly adminAddress: string
}

/** Where a background mount logs unless told: the temp dir, one file per user and mountpoint. */
export const defaultLogFile = (mountpoint: string): string =>
  path.join(os.tmpdir(), `talon-mount-${process.getuid?.() ?? "user"}${mountpoint.replace(/[^A-Za-z0-9._-]/g, "_")}.log`)

/** How long the parent waits for the mount before giving up on it (a hung child is stopped). */
const READY_WITHIN_MS = 120_000

/** The last `talon: …` error the child wrote, else its last lines. */
const failureIn = (log: string, from: number): string => {
  let text = ""
  try {
    text = fs.readFileSync(log).subarray(from).toString("utf8")
  } catch {
    return "it wrote no log"
  }
  const lines = text.split("\n").filter((l) => l.trim() !== "")
  const said = lines.filter((l) => l.startsWith("talon: ")).pop()
  return said?.slice("talon: ".length) ?? (lines.slice(-5).join("\n") || "it exited before mounting, without a message")
}

/** Runs this command again, detached, with `--foreground`; resolves once the child's mount is ready. */
export const daemonize = (mountpoint: string, log: string): Effect.Effect<{ readonly pid: number; readonly ready: Ready }, DaemonFailed> =>
  Effect.async<{ readonly pid: number; readonly ready: Ready }, DaemonFailed>((resume) => {
    const fail = (detail: string) => resume(Effect.fail(new DaemonFailed({ mountpoint, detail, log })))
    let out: number
    try {
      fs.mkdirSync(path.dirname(log), { recursive: true })
      out = fs.openSync(log, "a", 0o600)
    } catch (e) {
      return fail(`cannot open the log file: ${e instanceof Error ? e.message : String(e)} (set --log-file)`)
    }
    const from = fs.fstatSync(out).size
    const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1), "--foreground"], {
      detached: true,
      stdio: ["ignore", out, out, "ipc"],
      env: { ...process.env, [DAEMON_ENV]: "1" }
    })
    fs.closeSync(out)
    let settled = false
    const timer = setTimeout(() => {
      if (settled) return
      settled = true
      child.kill("SIGTERM")
      fail(`not mounted within ${READY_WITHIN_MS / 1000} s; stopped it`)
    }, READY_WITHIN_MS)
    child.on("message", (m: unknown) => {
      if (settled || (m as Ready | undefined)?._tag !== "ready") return
      settled = true
      clearTimeout(timer)
      child.disconnect()
      child.unref()
      resume(Effect.succeed({ pid: child.pid ?? 0, ready: m as Ready }))
    })
    child.on("error", (e) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      fail(`could not start it: ${e.message}`)
    })
    child.on("exit", (code, signal) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      fail(`${failureIn(log, from)} (exit ${code ?? signal})`)
    })
  })

/** In the child: tell the waiting parent the mount is up, then let it go. */
export const reportReady = (ready: Ready): Effect.Effect<void> =>
  Effect.sync(() => {
    if (process.env[DAEMON_ENV] === undefined || process.send === undefined) return
    delete process.env[DAEMON_ENV]
    process.send(ready, () => process.disconnect?.())
  })
