/**
 * The mountpoint before and after a mount: it must be an existing, empty directory; a FUSE
 * mount left behind by a process that died ("Transport endpoint is not connected") is
 * detached first; `talon umount` asks fusermount3 (the unprivileged way), then umount(8).
 */
import { Command, type CommandExecutor, FileSystem } from "@effect/platform"
import { Data, Effect } from "effect"

export class MountpointError extends Data.TaggedError("MountpointError")<{
  readonly mountpoint: string
  readonly detail: string
}> {
  override get message() {
    return `cannot mount on ${this.mountpoint}: ${this.detail}`
  }
}

export class UnmountError extends Data.TaggedError("UnmountError")<{
  readonly mountpoint: string
  readonly detail: string
}> {
  override get message() {
    return `cannot unmount ${this.mountpoint}: ${this.detail}`
  }
}

/** The mounts table's entry for `mountpoint`, if mounted: its filesystem type (`fuse.talon`, …). */
export const mountedType = (mountpoint: string): Effect.Effect<string | undefined, never, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const table = yield* Effect.orElseSucceed(fs.readFileString("/proc/self/mounts"), () => "")
    for (const line of table.split("\n")) {
      const [, target, type] = line.split(" ")
      // /proc/self/mounts escapes space, tab, newline and backslash as octal.
      if (target !== undefined && target.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))) === mountpoint) return type
    }
    return undefined
  })

/** Runs a command to its end; its exit code, or undefined when it could not start. */
const run = (command: string, ...args: Array<string>): Effect.Effect<number | undefined, never, CommandExecutor.CommandExecutor> =>
  Command.exitCode(Command.make(command, ...args)).pipe(
    Effect.map((code) => code as number),
    Effect.orElseSucceed(() => undefined)
  )

/** Detaches `mountpoint`: fusermount3 -u (lazily when `lazy`), else umount(8). */
export const detach = (mountpoint: string, lazy: boolean): Effect.Effect<void, UnmountError, CommandExecutor.CommandExecutor> =>
  Effect.gen(function* () {
    const viaFuse = yield* run("fusermount3", lazy ? "-uz" : "-u", mountpoint)
    if (viaFuse === 0) return
    const viaUmount = yield* run("umount", ...(lazy ? ["-l"] : []), mountpoint)
    if (viaUmount === 0) return
    return yield* new UnmountError({
      mountpoint,
      detail:
        viaFuse === undefined && viaUmount === undefined
          ? "neither fusermount3 nor umount could be run; install fuse3"
          : lazy
            ? "fusermount3 -uz and umount -l both failed (is it mounted? are you the user who mounted it?)"
            : "it is busy or not mounted (a process may have a file open there; `talon umount --lazy` detaches it anyway)"
    })
  })

/**
 * Checks (and clears a stale mount from) `mountpoint`: an existing empty directory is fine; a
 * dead FUSE mount is detached lazily and logged; a live mount or a non-empty directory is refused.
 */
export const prepareMountpoint = (
  mountpoint: string
): Effect.Effect<void, MountpointError, FileSystem.FileSystem | CommandExecutor.CommandExecutor> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const refuse = (detail: string) => new MountpointError({ mountpoint, detail })
    const probe = fs.stat(mountpoint).pipe(Effect.either)
    let info = yield* probe
    if (info._tag === "Left" && /ENOTCONN|not connected/i.test(String(info.left.message) + String((info.left as { cause?: unknown }).cause ?? ""))) {
      yield* Effect.logWarning(`${mountpoint} is a mount left behind by a process that exited (transport endpoint is not connected); detaching it`)
      yield* detach(mountpoint, true).pipe(Effect.mapError((e) => refuse(`a stale mount is there and could not be detached: ${e.detail}`)))
      info = yield* probe
    }
    if (info._tag === "Left") {
      return yield* Effect.fail(
        /ENOENT|no such file/i.test(info.left.message) ? refuse("no such directory; create it first (mkdir -p)") : refuse(info.left.message)
      )
    }
    if (info.right.type !== "Directory") return yield* Effect.fail(refuse("not a directory"))
    const type = yield* mountedType(mountpoint)
    if (type !== undefined) {
      return yield* Effect.fail(refuse(`something (${type}) is already mounted there; \`talon umount ${mountpoint}\` (or umount) it first`))
    }
    const entries = yield* fs.readDirectory(mountpoint).pipe(Effect.mapError((e) => refuse(e.message)))
    if (entries.length > 0) {
      return yield* Effect.fail(
        refuse(`the directory is not empty (${entries.length} entr${entries.length === 1 ? "y" : "ies"}, e.g. ${JSON.stringify(entries[0])}); mount on an empty directory so nothing is hidden`)
      )
    }
  })
