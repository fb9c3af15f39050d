/**
 * `talon mount` settings, one declaration each (src/config/Setting.ts): flag >
 * `TALON_MOUNT_*` (environment, then config file) > default. The cluster client under the
 * mount takes `TALON_CLIENT_*` like every other reader; `--coordinator` here overrides its list.
 */
import type { ConfigError, Effect, Redacted } from "effect"
import { adminTokenSetting } from "../config/adminToken.js"
import * as K from "../config/kinds.js"
import * as S from "../config/declare.js"
import { component, defaultsOf, resolve } from "../config/Setting.js"
import { nonNegative, positive, range } from "../config/checks.js"

export interface MountSettings {
  /** Coordinator control addresses; unset = the client's (`TALON_CLIENT_COORDINATOR`). */
  readonly coordinator: string | undefined
  /** Coordinator admin HTTP addresses for listings; unset = each coordinator host at port 8000; "" = the Talon wire only. */
  readonly coordinatorAdmin: string | undefined
  /** TALON_ADMIN_TOKEN, sent to the admin listing when set. */
  readonly adminToken: Redacted.Redacted<string> | undefined
  /** `s3/<bucket>`, `az/<container>` and `gs/<bucket>` entries shown under the mount root. */
  readonly expose: ReadonlyArray<string>
  readonly attrTtlMs: number
  readonly entryTtlMs: number
  readonly negativeTtlMs: number
  readonly maxRead: number
  readonly readahead: number
  readonly maxInodes: number
  readonly adminListen: string
  readonly foreground: boolean
  /** Where a background mount appends its log; unset = the temp dir, per user and mountpoint. */
  readonly logFile: string | undefined
  readonly allowOther: boolean
}

export const MountSchema = component<MountSettings>({
  name: "mount",
  summary: "`talon mount`: the cache as a read-only POSIX filesystem (FUSE).",
  prefix: "TALON_MOUNT",
  settings: {
    coordinator: S.unset(K.coordinatorList(), "Coordinator control address host:port; a comma-separated list fails over between them", {
      shownDefault: "the client's, TALON_CLIENT_COORDINATOR (127.0.0.1:7000)",
      example: "10.0.0.1:7000,10.0.0.2:7000"
    }),
    coordinatorAdmin: S.unset(K.coordinatorList({ standalone: true }), "Coordinator admin HTTP host:port(s) whose paginated listing gives directories of any size and the origin's mtimes; \"\" lists over the Talon wire only (10,000 objects a directory, no mtimes)", {
      shownDefault: "each coordinator host at port 8000, falling back to the Talon wire when it does not answer",
      example: "10.0.0.1:8000"
    }),
    adminToken: adminTokenSetting,
    expose: S.of(K.list("backend/bucket"), ["s3/talon"], "Buckets and containers shown under the mount root, as s3/<bucket>, az/<container> or gs/<bucket> (shown as gcs/<bucket>)", {
      example: "s3/datasets,az/checkpoints"
    }),
    attrTtlMs: S.integer(3000, "How long a file's size and version are trusted before the origin is asked again (a change shows within this), in ms", nonNegative),
    entryTtlMs: S.integer(3000, "How long a name (and a directory's listing) is trusted before it is looked up again, in ms", nonNegative),
    negativeTtlMs: S.integer(1000, "How long the kernel may remember that a name does not exist, in ms", nonNegative),
    maxRead: S.size(1024 * 1024, "Largest read the kernel sends in one request", { example: "1M", check: range(4096, 16 * 1024 * 1024, "must be in 4K..16M") }),
    readahead: S.size(8 * 1024 * 1024, "Kernel read-ahead asked for at mount time", { example: "8M", check: nonNegative }),
    maxInodes: S.integer(200_000, "Inodes kept for names the kernel no longer holds before the oldest are dropped", positive),
    adminListen: S.listen("127.0.0.1:8300", "Admin HTTP host:port serving /healthz and /metrics (port 0 = any free port)", { example: "0.0.0.0:8300" }),
    foreground: S.toggle("Stay in the foreground, logging to the terminal (for systemd and containers); without it talon mount detaches once mounted"),
    logFile: S.unset(K.text, "Log file of a background mount (without --foreground), appended to", {
      shownDefault: "$TMPDIR/talon-mount-<uid><mountpoint with / as _>.log",
      example: "/var/log/talon-mount.log"
    }),
    allowOther: S.toggle("Let users other than the mounting one read the mount (needs user_allow_other in /etc/fuse.conf when not root)")
  }
})

export const MOUNT_DEFAULTS: MountSettings = defaultsOf(MountSchema)

export const resolveMountSettings = (explicit: Partial<MountSettings> = {}): Effect.Effect<MountSettings, ConfigError.ConfigError> =>
  resolve(MountSchema, explicit)
