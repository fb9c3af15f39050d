/**
 * Gateway settings: explicit option > `TALON_GATEWAY_*` (Effect Config) > default.
 * Credentials the gateway checks incoming requests against come from the
 * environment only (never flags); the origin identity the gateway signs with is
 * the backend's (`TALON_S3_*`, `TALON_AZURE_*`).
 */
import { Config, ConfigError, Effect, Either, Option, type Redacted } from "effect"

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

export const GATEWAY_DEFAULTS: Omit<GatewayOptions, "credentials"> = {
  listen: "127.0.0.1:9000",
  auth: true,
  region: "us-east-1",
  maxConcurrentRequests: 256,
  maxBodyBytes: 64 * 1024 * 1024,
  maxConcurrentUploads: 64,
  bodyIdleMs: 20_000,
  minBodyBytesPerSec: 4096,
  requestTimeoutMs: 300_000,
  responseTimeoutMs: 30_000,
  idleTimeoutMs: 120_000,
  statTtlMs: 1000,
  writeFreshMs: 5000,
  pieceBytes: 1024 * 1024,
  readAhead: 4,
  workerTimeoutMs: 5000,
  maxListKeys: 1000,
  clockSkewMs: 15 * 60 * 1000,
  tlsCert: undefined,
  tlsKey: undefined
}

export const GATEWAY_ENV = {
  listen: "TALON_GATEWAY_LISTEN",
  auth: "TALON_GATEWAY_AUTH",
  region: "TALON_GATEWAY_REGION",
  maxConcurrentRequests: "TALON_GATEWAY_MAX_CONCURRENT_REQUESTS",
  maxBodyBytes: "TALON_GATEWAY_MAX_BODY_BYTES",
  maxConcurrentUploads: "TALON_GATEWAY_MAX_CONCURRENT_UPLOADS",
  bodyIdleMs: "TALON_GATEWAY_BODY_IDLE_MS",
  minBodyBytesPerSec: "TALON_GATEWAY_MIN_BODY_BYTES_PER_SEC",
  requestTimeoutMs: "TALON_GATEWAY_REQUEST_TIMEOUT_MS",
  responseTimeoutMs: "TALON_GATEWAY_RESPONSE_TIMEOUT_MS",
  idleTimeoutMs: "TALON_GATEWAY_IDLE_TIMEOUT_MS",
  statTtlMs: "TALON_GATEWAY_STAT_TTL_MS",
  writeFreshMs: "TALON_GATEWAY_WRITE_FRESH_MS",
  pieceBytes: "TALON_GATEWAY_PIECE_BYTES",
  readAhead: "TALON_GATEWAY_READ_AHEAD",
  workerTimeoutMs: "TALON_GATEWAY_WORKER_TIMEOUT_MS",
  maxListKeys: "TALON_GATEWAY_MAX_LIST_KEYS",
  clockSkewMs: "TALON_GATEWAY_CLOCK_SKEW_MS",
  tlsCert: "TALON_GATEWAY_TLS_CERT",
  tlsKey: "TALON_GATEWAY_TLS_KEY"
} as const

/**
 * `TALON_GATEWAY_ACCESS_KEY_ID` + `TALON_GATEWAY_SECRET_ACCESS_KEY` (S3 front end),
 * `TALON_GATEWAY_AZURE_ACCOUNT` + `TALON_GATEWAY_AZURE_KEY` (Azure front end, base64 key).
 */
const invalid = (path: string, message: string) => Either.left(ConfigError.InvalidData([path], message))

export const CredentialsConfig: Config.Config<GatewayCredentials> = Config.all({
  accessKeyId: Config.option(Config.string("TALON_GATEWAY_ACCESS_KEY_ID")),
  secret: Config.option(Config.redacted("TALON_GATEWAY_SECRET_ACCESS_KEY")),
  account: Config.option(Config.string("TALON_GATEWAY_AZURE_ACCOUNT")),
  key: Config.option(Config.redacted("TALON_GATEWAY_AZURE_KEY"))
}).pipe(
  Config.mapOrFail((c) => {
    if (Option.isSome(c.accessKeyId) !== Option.isSome(c.secret)) {
      return invalid(
        "TALON_GATEWAY_ACCESS_KEY_ID",
        "set both TALON_GATEWAY_ACCESS_KEY_ID and TALON_GATEWAY_SECRET_ACCESS_KEY, or neither"
      )
    }
    if (Option.isSome(c.account) !== Option.isSome(c.key)) {
      return invalid("TALON_GATEWAY_AZURE_ACCOUNT", "set both TALON_GATEWAY_AZURE_ACCOUNT and TALON_GATEWAY_AZURE_KEY, or neither")
    }
    return Either.right({
      s3:
        Option.isSome(c.accessKeyId) && Option.isSome(c.secret)
          ? { accessKeyId: c.accessKeyId.value, secretAccessKey: c.secret.value }
          : undefined,
      azure: Option.isSome(c.account) && Option.isSome(c.key) ? { account: c.account.value, key: c.key.value } : undefined
    })
  })
)


const fromEnv = <A>(config: Config.Config<A>) => Effect.map(Config.option(config), Option.getOrUndefined)

const positive = [
  "maxConcurrentRequests",
  "maxBodyBytes",
  "maxConcurrentUploads",
  "bodyIdleMs",
  "requestTimeoutMs",
  "responseTimeoutMs",
  "idleTimeoutMs",
  "pieceBytes",
  "readAhead",
  "workerTimeoutMs",
  "maxListKeys",
  "clockSkewMs"
] as const

/** Explicit settings over `TALON_GATEWAY_*` over defaults; credentials from the environment unless given. */
export const resolveGatewayOptions = (
  explicit: Partial<GatewayOptions> = {}
): Effect.Effect<GatewayOptions, ConfigError.ConfigError> =>
  Effect.gen(function* () {
    const int = (k: Exclude<keyof typeof GATEWAY_ENV, "listen" | "auth" | "region" | "tlsCert" | "tlsKey">) => fromEnv(Config.integer(GATEWAY_ENV[k]))
    const env: Partial<Record<keyof GatewayOptions, unknown>> = {
      listen: yield* fromEnv(Config.string(GATEWAY_ENV.listen)),
      auth: yield* fromEnv(Config.boolean(GATEWAY_ENV.auth)),
      region: yield* fromEnv(Config.string(GATEWAY_ENV.region)),
      maxConcurrentRequests: yield* int("maxConcurrentRequests"),
      maxBodyBytes: yield* int("maxBodyBytes"),
      maxConcurrentUploads: yield* int("maxConcurrentUploads"),
      bodyIdleMs: yield* int("bodyIdleMs"),
      minBodyBytesPerSec: yield* int("minBodyBytesPerSec"),
      requestTimeoutMs: yield* int("requestTimeoutMs"),
      responseTimeoutMs: yield* int("responseTimeoutMs"),
      idleTimeoutMs: yield* int("idleTimeoutMs"),
      statTtlMs: yield* int("statTtlMs"),
      writeFreshMs: yield* int("writeFreshMs"),
      pieceBytes: yield* int("pieceBytes"),
      readAhead: yield* int("readAhead"),
      workerTimeoutMs: yield* int("workerTimeoutMs"),
      maxListKeys: yield* int("maxListKeys"),
      clockSkewMs: yield* int("clockSkewMs"),
      tlsCert: yield* fromEnv(Config.string(GATEWAY_ENV.tlsCert)),
      tlsKey: yield* fromEnv(Config.string(GATEWAY_ENV.tlsKey))
    }
    const resolved = {} as Record<string, unknown>
    for (const key of Object.keys(GATEWAY_DEFAULTS) as Array<keyof typeof GATEWAY_DEFAULTS>) {
      resolved[key] = explicit[key] ?? env[key] ?? GATEWAY_DEFAULTS[key]
    }
    resolved.credentials = explicit.credentials ?? (yield* CredentialsConfig)
    const options = resolved as unknown as GatewayOptions
    for (const key of positive) {
      if (!(Number.isSafeInteger(options[key]) && options[key] > 0)) {
        return yield* Effect.fail(ConfigError.InvalidData([GATEWAY_ENV[key]], `${key} must be a positive integer`))
      }
    }
    if (!(Number.isSafeInteger(options.minBodyBytesPerSec) && options.minBodyBytesPerSec >= 0)) {
      return yield* Effect.fail(ConfigError.InvalidData([GATEWAY_ENV.minBodyBytesPerSec], "minBodyBytesPerSec must be zero (no floor) or a positive integer"))
    }
    if (!(options.statTtlMs >= 0) || !(options.writeFreshMs >= 0)) {
      return yield* Effect.fail(ConfigError.InvalidData([GATEWAY_ENV.statTtlMs], "TTLs must be zero or positive"))
    }
    if ((options.tlsCert === undefined) !== (options.tlsKey === undefined)) {
      return yield* Effect.fail(ConfigError.InvalidData([GATEWAY_ENV.tlsCert], "give both a TLS certificate and a key (--tls-cert and --tls-key), or neither"))
    }
    if (options.maxListKeys > 1000) {
      return yield* Effect.fail(ConfigError.InvalidData([GATEWAY_ENV.maxListKeys], "maxListKeys is at most 1000 (S3's page limit)"))
    }
    if (options.auth && options.credentials.s3 === undefined && options.credentials.azure === undefined) {
      return yield* Effect.fail(
        ConfigError.InvalidData(
          [GATEWAY_ENV.auth],
          "auth is on but no credentials are configured: set TALON_GATEWAY_ACCESS_KEY_ID/TALON_GATEWAY_SECRET_ACCESS_KEY (S3) and/or TALON_GATEWAY_AZURE_ACCOUNT/TALON_GATEWAY_AZURE_KEY (Azure), or turn auth off (--auth off) for a local demo"
        )
      )
    }
    return options
  })

/** `host:port` → parts; port 0 allowed. */
export const parseListen = (listen: string): { readonly host: string; readonly port: number } | undefined => {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(listen.trim())
  if (m === null) return undefined
  const port = Number(m[3])
  if (port > 65535) return undefined
  return { host: m[1] ?? (m[2] === "" ? "127.0.0.1" : m[2]!), port }
}
