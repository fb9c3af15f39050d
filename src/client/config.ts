/**
 * Client settings, one declaration each (src/config/Setting.ts): explicit option >
 * `TALON_CLIENT_*` (environment, then config file) > default. `blockSize` must equal
 * the workers' block size: placement is computed per block.
 */
import type { ConfigError, Effect, Redacted } from "effect"
import * as K from "../config/kinds.js"
import * as S from "../config/declare.js"
import { component, defaultsOf, resolve } from "../config/Setting.js"
import { DEFAULT_BLOCK_SIZE } from "../core/ids.js"
import { blockSizeRange, nonNegative, positive } from "../config/checks.js"
import { adminTokenSetting } from "../config/adminToken.js"

export interface TalonClientOptions {
  /** Coordinator control addresses `host:port[,host:port…]`, tried in turn. */
  readonly coordinator: string
  /** Coordinator queries over TLS: this client's certificate and key, the coordinators' CA and trust domain (as a worker's). */
  readonly controlTlsCertPath?: string | undefined
  readonly controlTlsKeyPath?: string | undefined
  readonly controlTlsCaCertPath?: string | undefined
  readonly controlTlsTrustDomain?: string | undefined
  /** Dial workers' data ports over TLS with the control TLS files (workers run with --data-tls). */
  readonly dataTls: boolean
  readonly blockSize: number
  /** Replicas tried per block, in Maglev rank order. */
  readonly replicas: number
  /** Block segments fetched concurrently ahead of the consumer. */
  readonly parallelism: number
  /** How long a membership list is trusted before it is fetched again. */
  readonly membershipTtlMs: number
  /** How long an object's size and version are trusted. */
  readonly statTtlMs: number
  /**
   * How long the last membership (and, when no worker answers a stat either, the last
   * stat of an object) is still used while the coordinator does not answer or lists no
   * workers, counted from when it last confirmed them.
   */
  readonly staleLimitMs: number
  readonly requestTimeoutMs: number
  /** Bound on one coordinator request; past it the coordinator counts as down and reads fall back (see Coordinators.ts). */
  readonly controlTimeoutMs: number
  readonly connectTimeoutMs: number
  readonly connectionsPerWorker: number
  /** Largest single GetRange; longer segments are split (bounds per-request memory). */
  readonly maxRequestBytes: number
  /**
   * How far ahead of a sequential reader bytes are fetched: `readStream`'s window, and the
   * most a run of `read`/`readRaw` calls is read ahead (0 turns read-ahead off).
   */
  readonly readAheadBytes: number
  /** Bytes read ahead for `read`/`readRaw` held (and in flight) at most, over every object. */
  readonly readAheadCacheBytes: number
  /**
   * Idle receive buffers kept for reuse, in bytes. Below a reader's working set (its window and
   * pieces in flight) buffers are allocated afresh and left to the GC, which costs a warm
   * reader most of its CPU; above it they cost idle memory.
   */
  readonly readBuffersKeptBytes: number
  /** Tenant every read is attributed to (sent as GetRangeTenant / GetCachedRangeTenant); empty = none. */
  readonly tenant: string
  /** This client's deployment zone: a block's owners in it are tried first (zones.ts); empty = no preference. */
  readonly zone: string
}

export const ClientSchema = component<TalonClientOptions>({
  name: "client",
  summary:
    "The cluster client: `talon read`, `talon cluster`, the gateway's cache route, and programs using TalonClient.",
  prefix: "TALON_CLIENT",
  settings: {
    coordinator: S.of(K.coordinatorList(), "127.0.0.1:7000", "Coordinator control address host:port; a comma-separated list fails over between them", {
      example: "10.0.0.1:7000,10.0.0.2:7000"
    }),
    controlTlsCertPath: S.unset(K.text, "PEM certificate this client presents to coordinators: queries go over TLS (files re-read for each new connection)", {
      shownDefault: "none: plain TCP",
      example: "/etc/talon/tls/tls.crt"
    }),
    controlTlsKeyPath: S.unset(K.text, "PEM private key of --control-tls-cert-path", { example: "/etc/talon/tls/tls.key" }),
    controlTlsCaCertPath: S.unset(K.text, "PEM CA bundle the coordinators' certificates must chain to", { example: "/etc/talon/tls/ca.crt" }),
    controlTlsTrustDomain: S.unset(K.text, "Coordinators must carry a URI SAN spiffe://<this>/talon/<cluster>/<role>/<node>", { example: "cluster.local" }),
    dataTls: S.toggle(
      "Dial workers' data ports over TLS (workers started with --data-tls) with the control TLS files: the CA checks the worker, the certificate and key are presented when the workers demand one"
    ),
    blockSize: S.size(DEFAULT_BLOCK_SIZE, "Block size; must equal the workers' (K/M/G suffixes)", { example: "8M", check: blockSizeRange }),
    replicas: S.integer(2, "Workers tried per block, in placement order", positive),
    parallelism: S.integer(4, "Block segments fetched concurrently ahead of the reader", positive),
    membershipTtlMs: S.integer(5000, "How long a membership list is trusted before it is fetched again, in ms", nonNegative),
    statTtlMs: S.integer(2000, "How long an object's size and version are trusted, in ms", nonNegative),
    staleLimitMs: S.integer(
      120_000,
      "While the coordinator is down, the last membership and object stats stay in use this long after it last confirmed them, in ms",
      nonNegative
    ),
    requestTimeoutMs: S.integer(30_000, "Deadline for one request to a worker, in ms", positive),
    controlTimeoutMs: S.integer(5000, "Deadline for one coordinator request; past it the coordinator counts as down and reads fall back, in ms", positive),
    connectTimeoutMs: S.integer(3000, "Deadline for opening a connection, in ms", positive),
    connectionsPerWorker: S.integer(4, "Data connections kept open to each worker", positive),
    maxRequestBytes: S.size(8 * 1024 * 1024, "Largest single range request; longer segments are split (bounds per-request memory)", positive),
    readAheadBytes: S.size(32 * 1024 * 1024, "How far ahead of a sequential reader bytes are fetched (readStream's window; runs of read calls); 0 = off", nonNegative),
    readAheadCacheBytes: S.size(128 * 1024 * 1024, "Bytes read ahead for runs of read calls held in memory at most, over every object", nonNegative),
    readBuffersKeptBytes: S.size(
      16 * 1024 * 1024,
      "Idle receive buffers kept for reuse (K/M/G); a warm sequential reader allocates nothing per byte once this covers its window and pieces in flight (e.g. 64M with the default read-ahead), at that much idle memory",
      nonNegative
    ),
    tenant: S.text("", "Tenant the reads are attributed to, for the workers' per-tenant rate limits (sends Talon's GetRangeTenant/GetCachedRangeTenant); empty = untagged reads, charged to the workers' default limits", {
      shownDefault: "none",
      example: "team-a",
      check: (t) => (new TextEncoder().encode(t).length > 256 ? "must be at most 256 bytes (Talon's tenant id limit)" : undefined)
    }),
    zone: S.text("", "This client's deployment zone: among a block's owners, workers reporting the same zone are read first, others only when none of those answers (placement is unchanged); empty = no preference", {
      shownDefault: "none",
      example: "us-east-1a"
    })
  }
})

export const CLIENT_DEFAULTS: TalonClientOptions = defaultsOf(ClientSchema)

export const resolveClientOptions = (
  explicit: Partial<TalonClientOptions> = {}
): Effect.Effect<TalonClientOptions, ConfigError.ConfigError> => resolve(ClientSchema, explicit)

/** `talon cluster`'s own setting beside the client's. */
export const ClusterViewSchema = component<{ readonly admin: string | undefined; readonly adminToken: Redacted.Redacted<string> | undefined }>({
  name: "cluster view",
  summary: "`talon cluster`: the membership table.",
  prefix: "TALON_CLUSTER",
  settings: {
    admin: S.unset(K.dialAddress, "Coordinator admin HTTP host:port; the table then includes heartbeat ages and block counts", {
      shownDefault: "unset: ask the control address",
      example: "127.0.0.1:8000"
    }),
    adminToken: adminTokenSetting
  }
})
