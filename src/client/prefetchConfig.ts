/**
 * Settings of `talon prefetch`, one declaration each (src/config/Setting.ts): flag >
 * `TALON_PREFETCH_*` > config file > default. The cluster connection itself is the client's
 * (./config.ts); `replicas` here is how many of a block's ranked owners are warmed, which is
 * independent of how many a read tries.
 */
import * as K from "../config/kinds.js"
import * as S from "../config/declare.js"
import { component } from "../config/Setting.js"
import { adminTokenSetting } from "../config/adminToken.js"
import type { Redacted } from "effect"
import { positive, range } from "../config/checks.js"

export interface PrefetchSettings {
  readonly replicas: number
  readonly concurrency: number
  readonly loadBytes: number
  readonly loadTimeoutMs: number
  readonly force: boolean
  readonly admin: string | undefined
  readonly adminToken: Redacted.Redacted<string> | undefined
}

export const PrefetchSchema = component<PrefetchSettings>({
  name: "prefetch",
  summary: "`talon prefetch`: warm every block of a prefix on the workers that own it, before a job reads it.",
  prefix: "TALON_PREFETCH",
  settings: {
    replicas: S.integer(1, "How many of each block's ranked owners to warm (reads try them in the same order)", range(1, 16)),
    concurrency: S.integer(16, "Loads in flight across the cluster (each worker also bounds its own)", range(1, 4096)),
    loadBytes: S.size(64 * 1024 * 1024, "Largest range one Load asks a worker to fill; blocks are split into Loads of at most this", positive),
    loadTimeoutMs: S.integer(600_000, "Deadline for one Load (its range filled from the origin), in ms", positive),
    force: S.toggle("Prefetch even when the prefix is larger than the cluster's cache capacity"),
    admin: S.unset(K.dialAddress, "Coordinator admin HTTP host:port, to check the prefix fits the cluster's cache capacity", {
      shownDefault: "unset: the capacity is not checked",
      example: "127.0.0.1:8000"
    }),
    adminToken: adminTokenSetting
  }
})
