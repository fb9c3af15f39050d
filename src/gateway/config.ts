/**
 * Gateway settings, one declaration each (src/config/Setting.ts): explicit option >
 * `TALON_GATEWAY_*` (environment, then config file) > default.
 * Credentials the gateway checks incoming requests against come from the
 * environment only (never flags); the origin identity the gateway signs with is
 * the backend's (`TALON_S3_*`, `TALON_AZURE_*`).
 */
import { type ConfigError, Effect, Either, type Redacted } from "effect"
import * as K from "../config/kinds.js"
import { component, defaultsOf, invalid, resolve, setting } from "../config/Setting.js"
import { nonNegativeInteger, notBlank, positiveInteger } from "../config/checks.js"

export type RouteName = "cache" | "origin"

/** Who may call the gateway. Each provider's front end accepts only its own credential. */
export interface GatewayCredentials {
  readonly s3?: { readonly accessKeyId: string; readonly secretAccessKey: Redacted.Redacted<string> } | undefined
  readonly azure?: { readonly account: string; readonly key: Redacted.Redacted<string> } | undefined
}

export interface GatewayOptions {
  /** `host:port`; port 0 picks a free one. */
  readonly listen: string
  /** Verify SigV4 / Shared Key on every request (off only for local demos). */
  readonly auth: boolean
  readonly credentials: GatewayCredentials
  /** Region the S3 front end answers GetBucketLocation with and expects in SigV4 scopes. */
  readonly region: string
  /** Requests served at once; more are refused with 503 SlowDown / ServerBusy. */
  readonly maxConcurrentRequests: number
  /** Largest single PutObject / Put Blob body accepted (streamed to the origin; multipart parts and blocks are capped at 5 GiB). */
  readonly maxBodyBytes: number
  /** Uploads (requests with a body) served at once, apart from reads: slow uploaders cannot take every slot. */
  readonly maxConcurrentUploads: number
  /** A request body with no byte for this long, or slower on average than `minBodyBytesPerSec` after it, is cut off (RequestTimeout). */
  readonly bodyIdleMs: number
  readonly minBodyBytesPerSec: number
  /** Time to receive a whole request (head and body). */
  readonly requestTimeoutMs: number
  /** Time from the request's arrival to the response head (stat, first bytes); 503 after it. */
  readonly responseTimeoutMs: number
  /** A connection with no traffic either way for this long is closed (a stalled reader, an idle keep-alive). */
  readonly idleTimeoutMs: number
  /** How long an origin stat (size, version) is trusted. */
  readonly statTtlMs: number
  /**
   * After a write through the gateway, reads of that object bypass the cache this long, so
   * version caches downstream (client stat, worker version TTL) cannot serve the old bytes.
   */
  readonly writeFreshMs: number
  /** Cache route: bytes per block-piece request (aligned to this size within the object). */
  readonly pieceBytes: number
  /** Cache route: pieces fetched ahead of the one being written, per response. */
  readonly readAhead: number
  /** Cache route: a piece not served by the cache within this time falls back to the origin. */
  readonly workerTimeoutMs: number
  /** Largest listing page asked of the origin. */
  readonly maxListKeys: number
  /** Allowed clock difference for signed requests. */
  readonly clockSkewMs: number
  /** PEM certificate (chain) and key files: serve HTTPS instead of HTTP (reloaded on SIGHUP or change). */
  readonly tlsCert: string | undefined
  readonly tlsKey: string | undefined
}

const listenKind: K.Kind<string> = {
  ...K.listenAddress,
  parse: (t) =>
    parseListen(t) === undefined
      ? Either.left(`expected host:port with a port in 0..65535 (0 = any free port), got ${JSON.stringify(t)}`)
      : Either.right(t.trim())
}

type GatewaySettings = Omit<GatewayOptions, "credentials">

export const GatewaySchema = component<GatewaySettings>({
  name: "gateway",
  summary: "`talon gateway`: S3 and Azure Blob endpoints over the cache.",
  settings: {
    listen: setting(listenKind, {
      env: "TALON_GATEWAY_LISTEN",
      flag: "listen",
      default: "127.0.0.1:9000",
      help: "host:port to serve S3 and Azure on",
      example: "0.0.0.0:9000"
    }),
    auth: setting(K.onOff, {
      env: "TALON_GATEWAY_AUTH",
      flag: "auth",
      default: true,
      help: "Verify SigV4 / Shared Key against the TALON_GATEWAY_* credentials; off serves anyone (local demos only)",
      example: "off"
    }),
    region: setting(K.text, {
      env: "TALON_GATEWAY_REGION",
      flag: "region",
      default: "us-east-1",
      help: "Region the S3 front end answers GetBucketLocation with and expects in SigV4 scopes",
      example: "eu-west-1",
      check: notBlank
    }),
    maxConcurrentRequests: setting(K.integer, {
      env: "TALON_GATEWAY_MAX_CONCURRENT_REQUESTS",
      flag: "max-concurrent-requests",
      default: 256,
      help: "Requests served at once; more get 503 SlowDown/ServerBusy",
      example: "256",
      check: positiveInteger
    }),
    maxBodyBytes: setting(K.size, {
      env: "TALON_GATEWAY_MAX_BODY_BYTES",
      flag: "max-body-bytes",
      default: 64 * 1024 * 1024,
      help: "Largest single PutObject / Put Blob body accepted (streamed to the origin; multipart parts and blocks are capped at 5 GiB)",
      example: "64M",
      check: positiveInteger
    }),
    maxConcurrentUploads: setting(K.integer, {
      env: "TALON_GATEWAY_MAX_CONCURRENT_UPLOADS",
      flag: "max-concurrent-uploads",
      default: 64,
      help: "Uploads (requests with a body) served at once, apart from reads, so slow uploaders cannot take every slot",
      example: "64",
      check: positiveInteger
    }),
    bodyIdleMs: setting(K.integer, {
      env: "TALON_GATEWAY_BODY_IDLE_MS",
      flag: "body-idle-ms",
      default: 20_000,
      help: "A request body with no byte for this long is cut off (RequestTimeout), in ms",
      example: "20000",
      check: positiveInteger
    }),
    minBodyBytesPerSec: setting(K.integer, {
      env: "TALON_GATEWAY_MIN_BODY_BYTES_PER_SEC",
      flag: "min-body-bytes-per-sec",
      default: 4096,
      help: "After the first idle window, a request body slower than this on average is cut off (0 = no floor)",
      example: "4096",
      check: nonNegativeInteger
    }),
    requestTimeoutMs: setting(K.integer, {
      env: "TALON_GATEWAY_REQUEST_TIMEOUT_MS",
      flag: "request-timeout-ms",
      default: 300_000,
      help: "Time to receive a whole request (head and body), in ms",
      example: "300000",
      check: positiveInteger
    }),
    responseTimeoutMs: setting(K.integer, {
      env: "TALON_GATEWAY_RESPONSE_TIMEOUT_MS",
      flag: "response-timeout-ms",
      default: 30_000,
      help: "Deadline from a request's arrival to its response head; 503 after it, in ms",
      example: "30000",
      check: positiveInteger
    }),
    idleTimeoutMs: setting(K.integer, {
      env: "TALON_GATEWAY_IDLE_TIMEOUT_MS",
      flag: "idle-timeout-ms",
      default: 120_000,
      help: "A connection with no traffic either way for this long is closed (a stalled reader, an idle keep-alive), in ms",
      example: "120000",
      check: positiveInteger
    }),
    statTtlMs: setting(K.integer, {
      env: "TALON_GATEWAY_STAT_TTL_MS",
      flag: "stat-ttl-ms",
      default: 1000,
      help: "How long an origin stat (size, version) is trusted, in ms",
      example: "1000",
      check: nonNegativeInteger
    }),
    writeFreshMs: setting(K.integer, {
      env: "TALON_GATEWAY_WRITE_FRESH_MS",
      flag: "write-fresh-ms",
      default: 5000,
      help: "After a write through the gateway, reads of that object bypass the cache this long, so version caches downstream cannot serve the old bytes, in ms",
      example: "5000",
      check: nonNegativeInteger
    }),
    pieceBytes: setting(K.size, {
      env: "TALON_GATEWAY_PIECE_BYTES",
      flag: "piece-bytes",
      default: 1024 * 1024,
      help: "Cache route: bytes per block-piece request (aligned within the object)",
      example: "1M",
      check: positiveInteger
    }),
    readAhead: setting(K.integer, {
      env: "TALON_GATEWAY_READ_AHEAD",
      flag: "read-ahead",
      default: 4,
      help: "Cache route: block pieces fetched ahead of the one being written, per response",
      example: "4",
      check: positiveInteger
    }),
    workerTimeoutMs: setting(K.integer, {
      env: "TALON_GATEWAY_WORKER_TIMEOUT_MS",
      flag: "worker-timeout-ms",
      default: 5000,
      help: "Cache route: a piece not served by the cache in this time comes from the origin, in ms",
      example: "5000",
      check: positiveInteger
    }),
    maxListKeys: setting(K.integer, {
      env: "TALON_GATEWAY_MAX_LIST_KEYS",
      flag: "max-list-keys",
      default: 1000,
      help: "Largest listing page asked of the origin (S3's limit is 1000)",
      example: "1000",
      check: (n) => (Number.isSafeInteger(n) && n > 0 && n <= 1000 ? undefined : "must be in 1..1000 (S3's page limit)")
    }),
    clockSkewMs: setting(K.integer, {
      env: "TALON_GATEWAY_CLOCK_SKEW_MS",
      flag: "clock-skew-ms",
      default: 15 * 60 * 1000,
      help: "Allowed clock difference for signed requests, in ms",
      example: "900000",
      check: positiveInteger
    }),
    tlsCert: setting(K.optional(K.text), {
      env: "TALON_GATEWAY_TLS_CERT",
      flag: "tls-cert",
      default: undefined,
      shownDefault: "none: plain HTTP",
      help: "PEM certificate (chain) file: serve HTTPS; re-read on SIGHUP or when the file changes (needs --tls-key)",
      example: "/etc/talon/gateway.pem"
    }),
    tlsKey: setting(K.optional(K.text), {
      env: "TALON_GATEWAY_TLS_KEY",
      flag: "tls-key",
      default: undefined,
      shownDefault: "none",
      help: "PEM private key file for --tls-cert",
      example: "/etc/talon/gateway-key.pem"
    })
  },
  check: (o) =>
    (o.tlsCert === undefined) !== (o.tlsKey === undefined)
      ? { key: o.tlsCert === undefined ? "tlsCert" : "tlsKey", message: "give both a TLS certificate and a key (--tls-cert and --tls-key), or neither" }
      : undefined
})

export const GATEWAY_DEFAULTS: GatewaySettings = defaultsOf(GatewaySchema)

export const GATEWAY_ENV = Object.fromEntries(
  Object.entries(GatewaySchema.settings).map(([key, s]) => [key, s.env])
) as { readonly [K in keyof GatewaySettings]: string }

interface CredentialSettings {
  readonly accessKeyId: string | undefined
  readonly secretAccessKey: Redacted.Redacted<string> | undefined
  readonly azureAccount: string | undefined
  readonly azureKey: Redacted.Redacted<string> | undefined
}

/** Who may call the gateway: from the environment or file only, never flags (they would show in `ps`). */
export const GatewayCredentialsSchema = component<CredentialSettings>({
  name: "gateway credentials",
  summary: "What clients of `talon gateway` sign with; environment or config file only.",
  settings: {
    accessKeyId: setting(K.optional(K.text), {
      env: "TALON_GATEWAY_ACCESS_KEY_ID",
      default: undefined,
      shownDefault: "none",
      help: "S3 front end: the access key clients sign with (with TALON_GATEWAY_SECRET_ACCESS_KEY)",
      example: "AKIAEXAMPLE"
    }),
    secretAccessKey: setting(K.optional(K.secret), {
      env: "TALON_GATEWAY_SECRET_ACCESS_KEY",
      default: undefined,
      shownDefault: "none",
      help: "S3 front end: the secret of TALON_GATEWAY_ACCESS_KEY_ID",
      example: "<secret>"
    }),
    azureAccount: setting(K.optional(K.text), {
      env: "TALON_GATEWAY_AZURE_ACCOUNT",
      default: undefined,
      shownDefault: "none",
      help: "Azure front end: the account name clients sign as (with TALON_GATEWAY_AZURE_KEY)",
      example: "devstoreaccount1"
    }),
    azureKey: setting(K.optional(K.secret), {
      env: "TALON_GATEWAY_AZURE_KEY",
      default: undefined,
      shownDefault: "none",
      help: "Azure front end: the base64 Shared Key of TALON_GATEWAY_AZURE_ACCOUNT",
      example: "<base64 key>"
    })
  },
  check: (c) => {
    if ((c.accessKeyId === undefined) !== (c.secretAccessKey === undefined)) {
      return { key: "accessKeyId", message: "set both TALON_GATEWAY_ACCESS_KEY_ID and TALON_GATEWAY_SECRET_ACCESS_KEY, or neither" }
    }
    if ((c.azureAccount === undefined) !== (c.azureKey === undefined)) {
      return { key: "azureAccount", message: "set both TALON_GATEWAY_AZURE_ACCOUNT and TALON_GATEWAY_AZURE_KEY, or neither" }
    }
    return undefined
  }
})

/** The credentials clients must sign with (environment, then file). */
export const CredentialsConfig: Effect.Effect<GatewayCredentials, ConfigError.ConfigError> = Effect.map(
  resolve(GatewayCredentialsSchema),
  (c) => ({
    s3: c.accessKeyId !== undefined && c.secretAccessKey !== undefined ? { accessKeyId: c.accessKeyId, secretAccessKey: c.secretAccessKey } : undefined,
    azure: c.azureAccount !== undefined && c.azureKey !== undefined ? { account: c.azureAccount, key: c.azureKey } : undefined
  })
)

/** Settings of the `talon gateway` command beside the server's. */
export interface GatewayCommandSettings {
  readonly route: RouteName
  /** Coordinator addresses of the cache route; unset = the client's (TALON_CLIENT_COORDINATOR). */
  readonly coordinator: string | undefined
}

export const GatewayCommandSchema = component<GatewayCommandSettings>({
  name: "gateway route",
  summary: "Where `talon gateway` reads from.",
  settings: {
    route: setting(K.oneOf("cache", "origin"), {
      env: "TALON_GATEWAY_ROUTE",
      flag: "route",
      default: "cache",
      help: "cache: reads through the Talon cluster, falling back to the origin per block; origin: straight to the origin",
      example: "origin"
    }),
    coordinator: setting(K.optional(K.coordinatorList()), {
      env: "TALON_GATEWAY_COORDINATOR",
      flag: "coordinator",
      default: undefined,
      shownDefault: "TALON_CLIENT_COORDINATOR, else 127.0.0.1:7000",
      help: "Coordinator control address(es) of the cache route, comma-separated for failover",
      example: "10.0.0.1:7000,10.0.0.2:7000"
    })
  }
})

/** Explicit settings over `TALON_GATEWAY_*` over the file over defaults; credentials from the environment or file unless given. */
export const resolveGatewayOptions = (
  explicit: Partial<GatewayOptions> = {}
): Effect.Effect<GatewayOptions, ConfigError.ConfigError> =>
  Effect.gen(function* () {
    const { credentials: givenCredentials, ...given } = explicit
    const settings = yield* resolve(GatewaySchema, given)
    const credentials = givenCredentials ?? (yield* CredentialsConfig)
    if (settings.auth && credentials.s3 === undefined && credentials.azure === undefined) {
      return yield* Effect.fail(
        invalid(
          GatewaySchema.settings.auth,
          "auth is on but no credentials are configured: set TALON_GATEWAY_ACCESS_KEY_ID/TALON_GATEWAY_SECRET_ACCESS_KEY (S3) and/or TALON_GATEWAY_AZURE_ACCOUNT/TALON_GATEWAY_AZURE_KEY (Azure), or turn auth off (--auth off) for a local demo"
        )
      )
    }
    return { ...settings, credentials }
  })

/** `host:port` → parts; port 0 allowed. */
export const parseListen = (listen: string): { readonly host: string; readonly port: number } | undefined => {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(listen.trim())
  if (m === null) return undefined
  const port = Number(m[3])
  if (port > 65535) return undefined
  return { host: m[1] ?? (m[2] === "" ? "127.0.0.1" : m[2]!), port }
}
