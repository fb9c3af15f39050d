/**
 * A mounted Talon filesystem for the life of a scope: the mountpoint checked (a stale mount
 * detached), the cluster client, the filesystem, the kernel session (unmounted when the scope
 * closes: SIGINT/SIGTERM end `talon mount` that way), the admin HTTP port and a periodic
 * health line in the log.
 */
import * as path from "node:path"
import { type CommandExecutor, FileSystem } from "@effect/platform"
import { Data, Duration, Effect, Either, Schedule, type Scope } from "effect"
import type { TalonClientOptions } from "../client/config.js"
import { TalonClient, makeTalonClient } from "../client/TalonClient.js"
import { serveMountAdmin, type MountAdminError } from "./MountAdminHttp.js"
import { FuseUnavailable, loadFuseBinding } from "./binding.js"
import type { MountSettings } from "./config.js"
import { type Filesystem, makeFilesystem } from "./Filesystem.js"
import type { FuseBinding, FuseSession } from "./fuse/types.js"
import { renderMountMetrics } from "./metrics.js"
import { type MountpointError, prepareMountpoint } from "./mountpoint.js"
import { parseExposed } from "./namespace.js"
import { adminsFor } from "./adminListing.js"
import { formatHostPort, parseHostPortList } from "../transport/address.js"

export class MountFailed extends Data.TaggedError("MountFailed")<{ readonly mountpoint: string; readonly detail: string }> {
  override get message() {
    return `mounting ${this.mountpoint} failed: ${this.detail}`
  }
}

export class MountSettingsError extends Data.TaggedError("MountSettingsError")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

export interface Mounted {
  readonly mountpoint: string
  readonly adminAddress: string
  readonly filesystem: Filesystem
  readonly session: FuseSession
}

export type MountError = MountSettingsError | FuseUnavailable | MountpointError | MountFailed | MountAdminError

/**
 * fusermount3 lets a non-root user mount with allow_other only when /etc/fuse.conf says
 * `user_allow_other`; checked first so the refusal says what to change, not libfuse's stderr.
 */
const allowOtherPermitted = Effect.gen(function* () {
  if (process.geteuid?.() === 0) return
  const fs = yield* FileSystem.FileSystem
  const conf = yield* Effect.orElseSucceed(fs.readFileString("/etc/fuse.conf"), () => "")
  if (conf.split("\n").some((l) => l.trim() === "user_allow_other")) return
  return yield* new MountSettingsError({
    detail:
      "--allow-other without root needs the line `user_allow_other` in /etc/fuse.conf (uncomment it, as root), because fusermount3 refuses allow_other otherwise; or mount without --allow-other (only you can read the mount) or as root"
  })
})

/** How often the health line is logged. */
const HEALTH_EVERY = Duration.seconds(60)

export const mountTalon = (
  mountpointGiven: string,
  settings: MountSettings,
  client: Partial<TalonClientOptions> = {},
  binding: Effect.Effect<FuseBinding, FuseUnavailable> = loadFuseBinding
): Effect.Effect<Mounted, MountError, Scope.Scope | FileSystem.FileSystem | CommandExecutor.CommandExecutor> =>
  Effect.gen(function* () {
    const mountpoint = path.resolve(mountpointGiven)
    const exposed = parseExposed(settings.expose)
    if (Either.isLeft(exposed)) return yield* new MountSettingsError({ detail: exposed.left })
    if (settings.allowOther) yield* allowOtherPermitted
    const fuse = yield* binding
    yield* prepareMountpoint(mountpoint)
    // The mount keeps its own attribute cache with its own TTL: the client's would only add to how long a change goes unseen.
    const talon = yield* makeTalonClient({
      ...client,
      ...(settings.coordinator === undefined ? {} : { coordinator: settings.coordinator }),
      statTtlMs: 0
    }).pipe(Effect.mapError((e) => new MountSettingsError({ detail: `client settings: ${String(e)}` })))
    const filesystem = yield* makeFilesystem({
      exposed: exposed.right,
      attrTtlMs: settings.attrTtlMs,
      entryTtlMs: settings.entryTtlMs,
      negativeTtlMs: settings.negativeTtlMs,
      maxInodes: settings.maxInodes,
      coordinatorAdmin: settings.coordinatorAdmin === undefined ? adminsFor(talon.options.coordinator) : (parseHostPortList(settings.coordinatorAdmin) ?? []).map((hp) => formatHostPort(hp.host, hp.port)),
      adminToken: settings.adminToken,
      ...(settings.coordinatorAdmin === undefined ? { coordinatorControlPorts: (parseHostPortList(talon.options.coordinator) ?? []).map((hp) => hp.port) } : {})
    }).pipe(Effect.provideService(TalonClient, talon))
    const session = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          fuse.mount(
            mountpoint,
            { fsName: "talon", allowOther: settings.allowOther, maxReadBytes: settings.maxRead, maxReadaheadBytes: settings.readahead },
            filesystem.handlers
          ),
        catch: (e) => new MountFailed({ mountpoint, detail: e instanceof Error ? e.message : String(e) })
      }),
      (s) =>
        Effect.promise(() => s.unmount()).pipe(
          Effect.timeout("10 seconds"),
          Effect.tap(() => Effect.logInfo(`unmounted ${mountpoint}`)),
          Effect.catchAllCause((cause) => Effect.logWarning(`unmounting ${mountpoint} did not finish cleanly; \`talon umount --lazy ${mountpoint}\` detaches it`, cause))
        )
    )
    filesystem.attach(session)
    const m = filesystem.metrics
    const health = () => {
      const cp = talon.controlPlane()
      return cp.coordinatorReachable
        ? { ok: true, detail: `mounted at ${mountpoint}, coordinator ${cp.coordinator}` }
        : { ok: true, detail: `mounted at ${mountpoint}; coordinator ${cp.coordinator} not answering for ${cp.coordinatorDownForMs ?? 0} ms (open files keep reading from the workers)` }
    }
    const adminAddress = yield* serveMountAdmin(settings.adminListen, health, () => renderMountMetrics(m, filesystem.gauges()))
    yield* Effect.logInfo(
      `talon mounted at ${mountpoint} (${exposed.right.map((e) => `${e.backend}/${e.bucket}`).join(", ")}); metrics on http://${adminAddress}/metrics; attributes trusted ${settings.attrTtlMs} ms`
    )
    yield* Effect.forkScoped(
      Effect.suspend(() => {
        const g = filesystem.gauges()
        const errors = [...m.errors].map(([k, v]) => `${k}=${v}`).join(" ") || "none"
        return Effect.logInfo(
          `mount ${mountpoint}: ${m.reads} reads, ${(m.readBytes / 1048576).toFixed(1)} MiB, ${m.readErrors} read errors, ${m.opens} opens, ${m.versionChanges} version changes, ${g.openHandles} open, ${g.inodes} inodes; errors: ${errors}; ${health().detail}`
        )
      }).pipe(Effect.schedule(Schedule.spaced(HEALTH_EVERY)))
    )
    return { mountpoint, adminAddress, filesystem, session }
  })
