/**
 * `talon mount MOUNTPOINT` and `talon umount MOUNTPOINT`. Mount flags fall back to
 * `TALON_MOUNT_*`, the config file and the defaults (./config.ts); the cluster client under the
 * mount takes `TALON_CLIENT_*` (its block size and replicas as flags here too).
 */
import * as path from "node:path"
import { Args, Command, Options } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { Console, Effect } from "effect"
import { ClientSchema, type TalonClientOptions } from "../client/config.js"
import { explicitFrom, flaggedKeys, flagOf, flagsOf } from "../config/cli.js"
import { MountSchema, type MountSettings, resolveMountSettings } from "./config.js"
import { mountTalon } from "./Mount.js"
import { daemonize, defaultLogFile, reportReady } from "./daemon.js"
import { detach, mountedType, UnmountError } from "./mountpoint.js"

const mountFlags = flagsOf(MountSchema, flaggedKeys(MountSchema))
const clientFlags = {
  blockSize: flagOf(ClientSchema.settings.blockSize),
  replicas: flagOf(ClientSchema.settings.replicas),
  parallelism: flagOf(ClientSchema.settings.parallelism)
}

const mountpointArg = Args.text({ name: "mountpoint" }).pipe(Args.withDescription("An existing, empty directory."))

export const mount = Command.make("mount", { mountpoint: mountpointArg, ...mountFlags, ...clientFlags }, ({ mountpoint, ...flags }) =>
  Effect.scoped(
    Effect.gen(function* () {
      const settings = yield* resolveMountSettings(explicitFrom<MountSettings, keyof MountSettings>(flags, flaggedKeys(MountSchema)))
      const client = explicitFrom<TalonClientOptions, "blockSize" | "replicas" | "parallelism">(flags, ["blockSize", "replicas", "parallelism"])
      if (!settings.foreground) {
        const target = path.resolve(mountpoint)
        const log = settings.logFile === undefined ? defaultLogFile(target) : path.resolve(settings.logFile)
        const { pid, ready } = yield* daemonize(target, log)
        yield* Console.log(`talon mount: ${ready.mountpoint} mounted by pid ${pid}; log ${log}; metrics http://${ready.adminAddress}/metrics; \`talon umount ${ready.mountpoint}\` stops it`)
        return
      }
      const mounted = yield* mountTalon(mountpoint, settings, client)
      yield* reportReady({ _tag: "ready", mountpoint: mounted.mountpoint, adminAddress: mounted.adminAddress })
      // Until unmounted from outside (talon umount, fusermount3 -u) or interrupted (SIGINT/SIGTERM close the scope, which unmounts).
      yield* Effect.promise(() => mounted.session.closed)
      yield* Effect.logInfo(`${mounted.mountpoint} was unmounted; exiting`)
    })
  ).pipe(Effect.provide(NodeContext.layer))
).pipe(
  Command.withDescription(
    "Mount the cache as a read-only filesystem: MOUNTPOINT/s3/<bucket>/<key>, MOUNTPOINT/az/<container>/<blob> and MOUNTPOINT/gcs/<bucket>/<object>, read through the cluster. Detaches once mounted (printing its pid and log file) unless --foreground; runs until `talon umount` (or SIGINT/SIGTERM, which unmount cleanly)."
  )
)

export const umount = Command.make(
  "umount",
  {
    mountpoint: Args.text({ name: "mountpoint" }).pipe(Args.withDescription("Where a talon mount is mounted.")),
    lazy: Options.boolean("lazy").pipe(Options.withDescription("Detach even while files are open (fusermount3 -uz); it goes away once they close."))
  },
  ({ mountpoint, lazy }) =>
    Effect.gen(function* () {
      const target = path.resolve(mountpoint)
      if ((yield* mountedType(target)) === undefined) return yield* new UnmountError({ mountpoint: target, detail: "nothing is mounted there" })
      yield* detach(target, lazy)
      yield* Effect.logInfo(`unmounted ${mountpoint}`)
    }).pipe(Effect.provide(NodeContext.layer))
).pipe(Command.withDescription("Unmount a talon mount (the `talon mount` process then exits)."))
