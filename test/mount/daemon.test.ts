/**
 * `talon mount` without `--foreground` detaches once the kernel shows the mount: the parent
 * prints the pid and the log and exits 0, the child serves the mount in its own session, and
 * `talon umount` stops it; a child that fails before mounting hands its error to the parent.
 */
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Logger, LogLevel } from "effect"
import { scopedTempDir } from "../support/scopedTempDir.js"
import { isMounted, kernelMountUnavailable, sh } from "./fixtures/kernel.js"

const unavailable = await kernelMountUnavailable()
if (unavailable !== undefined) console.warn(`[mount] SKIPPING the daemon mount tests: ${unavailable}`)

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const talon = (args: ReadonlyArray<string>) => sh(process.execPath, [path.resolve("bin/talon.mjs"), ...args], 150_000)

/** Waits for `check` to hold, an event-free poll bounded by `ms`. */
const eventually = (check: () => Promise<boolean> | boolean, ms: number) =>
  Effect.promise(async () => {
    for (const end = Date.now() + ms; Date.now() < end; ) {
      if (await check()) return true
      await new Promise((r) => setTimeout(r, 50))
    }
    return check()
  })

describe.skipIf(unavailable !== undefined)("talon mount in the background", () => {
  it.live("detaches once mounted (pid, log), serves the mount, and talon umount stops it; a failure reaches the parent's exit code", () =>
    Effect.gen(function* () {
      const dir = yield* scopedTempDir("talon-mount-daemon-")
      const mnt = path.join(dir, "mnt")
      const log = path.join(dir, "mount.log")
      const occupied = path.join(dir, "occupied")
      yield* Effect.promise(() => fs.mkdir(mnt))
      yield* Effect.promise(() => fs.mkdir(occupied))
      yield* Effect.promise(() => fs.writeFile(path.join(occupied, "keep.txt"), "mine"))
      // No cluster: what is asserted is the process life cycle and the mount root (the exposed
      // bucket), neither of which asks the coordinator; the cluster paths are kernel.test.ts's.
      const flags = ["--coordinator", "127.0.0.1:1", "--coordinator-admin", "", "--admin-listen", "127.0.0.1:0"]

      // Each `talon` start costs seconds of CPU here, so the refused mount (a non-empty directory)
      // runs beside the one that succeeds rather than after it.
      const [started, refused] = yield* Effect.promise(() =>
        Promise.all([talon(["mount", mnt, ...flags, "--log-file", log]), talon(["mount", occupied, ...flags, "--log-file", path.join(dir, "refused.log")])])
      )
      const pid = Number(/mounted by pid (\d+)/.exec(started.stdout)?.[1])
      // Whatever happens below, no mount or process outlives the test.
      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          for (const m of [mnt, occupied]) if (await isMounted(m)) await sh("fusermount3", ["-uz", m])
          if (pid > 0 && alive(pid)) process.kill(pid, "SIGKILL")
        })
      )
      expect(started.code, `${started.stdout}${started.stderr}`).toBe(0)
      expect(started.stdout).toContain(`log ${log}`)
      expect(pid).toBeGreaterThan(0)
      expect(alive(pid)).toBe(true)
      expect(yield* Effect.promise(() => isMounted(mnt))).toBe(true)
      expect(yield* Effect.promise(() => fs.readdir(path.join(mnt, "s3")))).toEqual(["talon"])
      expect(yield* Effect.promise(() => fs.readFile(log, "utf8"))).toMatch(/talon mounted at/)

      // The child's refusal (a non-empty mountpoint) is the parent's message and exit code.
      expect(refused.code).not.toBe(0)
      expect(refused.stderr).toMatch(/in the background failed: cannot mount on .*not empty/)
      expect(yield* Effect.promise(() => isMounted(occupied))).toBe(false)

      const stopped = yield* Effect.promise(() => talon(["umount", mnt]))
      expect(stopped.code, stopped.stderr).toBe(0)
      expect(yield* eventually(() => !alive(pid), 20_000)).toBe(true)
      expect(yield* Effect.promise(() => isMounted(mnt))).toBe(false)
      expect(yield* Effect.promise(() => fs.readFile(log, "utf8"))).toMatch(/was unmounted; exiting/)
    }).pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Error))
  , 300_000)
})
