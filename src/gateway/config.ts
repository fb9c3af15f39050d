/**
 * Gateway settings, one declaration each (src/config/Setting.ts): explicit option >
 * `TALON_GATEWAY_*` (environment, then config file) > default.
 * Credentials the gateway checks incoming requests against come from the
 * environment only (never flags); the origin identity the gateway signs with is
 * the backend's (`TALON_S3_*`, `TALON_AZURE_*`).
 */
import { type ConfigError, Effect, Either, type Redacted } from "effect"
import * as K from "../config/kinds.js"
import * as S from "../config/declare.js"
import { component, defaultsOf, envNamesOf, invalid, resolve } from "../config/Setting.js"
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
  /** Admin HTTP `host:port` (/healthz, /readyz, /metrics); "" serves none. */
  readonly adminListen: string
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
  readonly keepAliveTimeoutMs: number
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
  /** Cache route: worker bodies relayed to clients by splice(2) when the addon, the platform and both sockets allow. */
  readonly remoteSplice: boolean
  /** Who answers GET/HEAD of local hits: the hand-made HTTP/1.1 front (`raw`), or node:http for every request (`node`). */
  readonly front: "raw" | "node"
  /** Largest listing page asked of the origin. */
  readonly maxListKeys: number
  /** Allowed clock difference for signed requests. */
  readonly clockSkewMs: number
  /** PEM certificate (chain) and key files: serve HTTPS instead of HTTP (reloaded on SIGHUP or change). */
  readonly tlsCert: string | undefined
  readonly tlsKey: string | undefined
  /** Principals (Talon's identity and authorization files, principals.ts): several keys, each with its grants. */
  readonly s3ClientIdentitiesPath: string | undefined
  readonly azureClientIdentitiesPath: string | undefined
  readonly authorizationPath: string | undefined
  /** How often the identity and authorization files are re-read. */
  readonly authReloadMs: number
  /** Where the per-request audit lines go: `stdout` or a file; unset = none. */
  readonly auditLog: string | undefined
}

const listenKind: K.Kind<string> = {
  ...K.listenAddress,
  parse: (t) =>
    parseListen(t) === undefined
      ? Either.left(`expected host:port with a port in 0..65535 (0 = any free port), got ${JSON.stringify(t)}`)
      : Either.right(t.trim())
}

const optionalListenKind: K.Kind<string> = {
  ...listenKind,
  parse: (t) => (t.trim() === "" ? Either.right("") : listenKind.parse(t)),
  show: (t) => (t === "" ? '""' : t)
}

type GatewaySettings = Omit<GatewayOptions, "credentials">

export const GatewaySchema = component<GatewaySettings>({
  name: "gateway",
  summary: "`talon gateway`: S3 and Azure Blob endpoints over the cache.",
  prefix: "TALON_GATEWAY",
  settings: {
    listen: S.of(listenKind, "127.0.0.1:9000", "host:port to serve S3 and Azure on", { example: "0.0.0.0:9000", aliases: ["TALON_GATEWAY_BIND"] }),
    adminListen: S.of(
      optionalListenKind,
      "",
      "Admin HTTP host:port serving /healthz, /readyz (503 while the origin or, on the cache route, every worker is unreachable) and /metrics; empty serves none",
      { example: "0.0.0.0:9001", shownDefault: "none" }
    ),
    auth: S.of(K.onOff, true, "Verify SigV4 / Shared Key against the TALON_GATEWAY_* credentials; off serves anyone (local demos only)", {
      example: "off"
    }),
    region: S.text("us-east-1", "Region the S3 front end answers GetBucketLocation with and expects in SigV4 scopes", {
      example: "eu-west-1",
      check: notBlank
    }),
    maxConcurrentRequests: S.integer(256, "Requests served at once; more get 503 SlowDown/ServerBusy", positiveInteger),
    maxBodyBytes: S.size(
      64 * 1024 * 1024,
      "Largest single PutObject / Put Blob body accepted (streamed to the origin; multipart parts and blocks are capped at 5 GiB)",
      positiveInteger
    ),
    maxConcurrentUploads: S.integer(64, "Uploads (requests with a body) served at once, apart from reads, so slow uploaders cannot take every slot", positiveInteger),
    bodyIdleMs: S.integer(20_000, "A request body with no byte for this long is cut off (RequestTimeout), in ms", positiveInteger),
    minBodyBytesPerSec: S.integer(4096, "After the first idle window, a request body slower than this on average is cut off (0 = no floor)", nonNegativeInteger),
    requestTimeoutMs: S.integer(300_000, "Time to receive a whole request (head and body), in ms", positiveInteger),
    responseTimeoutMs: S.integer(30_000, "Deadline from a request's arrival to its response head; 503 after it, in ms", positiveInteger),
    idleTimeoutMs: S.integer(
      120_000,
      "A connection with no traffic either way for this long is closed (a stalled reader, an idle keep-alive), in ms",
      positiveInteger
    ),
    keepAliveTimeoutMs: S.integer(
      60_000,
      "An idle keep-alive connection waits this long for the client's next request before the gateway closes it, in ms (a client reusing a connection as it closes sees a reset; short timeouts make that race common under load)",
      positiveInteger
    ),
    statTtlMs: S.integer(1000, "How long an origin stat (size, version) is trusted, in ms", nonNegativeInteger),
    writeFreshMs: S.integer(
      5000,
      "After a write through the gateway, reads of that object bypass the cache this long, so version caches downstream cannot serve the old bytes, in ms",
      nonNegativeInteger
    ),
    pieceBytes: S.size(1024 * 1024, "Cache route: bytes per block-piece request (aligned within the object)", positiveInteger),
    readAhead: S.integer(4, "Cache route: block pieces fetched ahead of the one being written, per response", positiveInteger),
    workerTimeoutMs: S.integer(5000, "Cache route: a piece not served by the cache in this time comes from the origin, in ms", positiveInteger),
    remoteSplice: S.of(K.onOff, true, "Cache route: relay the workers' bodies to clients socket-to-socket by splice(2) (Linux, plain TCP both ways, the talon_splice addon built); off: through the cluster client's buffers", { example: "off" }),
    front: S.oneOf(
      ["raw", "node"],
      "Who answers plain-HTTP S3 GET/HEAD of an object: raw, a hand-made HTTP/1.1 front (HEADs; GETs in a co-located gateway, local hits as one sendfile of head and body, other reads through the route) that hands any other request to node:http; node, node:http for every request",
      { example: "node" }
    ),
    maxListKeys: S.integer(1000, "Largest listing page asked of the origin (S3's limit is 1000)", {
      check: (n) => (Number.isSafeInteger(n) && n > 0 && n <= 1000 ? undefined : "must be in 1..1000 (S3's page limit)")
    }),
    clockSkewMs: S.integer(15 * 60 * 1000, "Allowed clock difference for signed requests, in ms", {
      check: positiveInteger,
      aliases: ["TALON_GATEWAY_S3_MAX_CLOCK_SKEW_MS", "TALON_GATEWAY_AZURE_MAX_CLOCK_SKEW_MS"]
    }),
    tlsCert: S.unset(K.text, "PEM certificate (chain) file: serve HTTPS; re-read on SIGHUP or when the file changes (needs --tls-key)", {
      shownDefault: "none: plain HTTP",
      example: "/etc/talon/gateway.pem",
      aliases: ["TALON_GATEWAY_TLS_CERT_PATH"]
    }),
    tlsKey: S.unset(K.text, "PEM private key file for --tls-cert", { example: "/etc/talon/gateway-key.pem", aliases: ["TALON_GATEWAY_TLS_KEY_PATH"] }),
    s3ClientIdentitiesPath: S.unset(K.text, "JSON file of S3 client identities (Talon's shape: access key, secret, principal, provider account); with --authorization-path it replaces TALON_GATEWAY_ACCESS_KEY_ID", {
      example: "/etc/talon/s3-identities.json"
    }),
    azureClientIdentitiesPath: S.unset(K.text, "JSON file of Azure client identities (account key, principal, provider account = the account clients sign as); needs --authorization-path", {
      example: "/etc/talon/azure-identities.json"
    }),
    authorizationPath: S.unset(K.text, "JSON file of grants (principal, protocol, provider account, bucket, key prefix, operations): default deny for identity-file principals", {
      example: "/etc/talon/authorization.json"
    }),
    authReloadMs: S.integer(1000, "How often the identity and authorization files are re-read (a change applies without a restart; a broken file keeps the last good one), in ms", positiveInteger),
    auditLog: S.unset(K.text, "Audit log: one JSON line per request (principal, operation, bucket, key, status, bytes, decision) to stdout or appended to this file", {
      shownDefault: "none",
      example: "stdout"
    })
  },
  refused: [
    { env: "TALON_GATEWAY_S3_REGION", use: "Talon's is the origin's region; here that is TALON_S3_REGION (TALON_GATEWAY_REGION is the region clients sign for)" },
    { env: "TALON_GATEWAY_S3_ENDPOINT", use: "Talon's is the origin's endpoint; here that is TALON_S3_ENDPOINT" },
    { env: "TALON_GATEWAY_AZURE_ENDPOINT", use: "Talon's is the origin's endpoint; here that is TALON_AZURE_ENDPOINT" }
  ],
  check: (o) =>
    (o.tlsCert === undefined) !== (o.tlsKey === undefined)
      ? { key: o.tlsCert === undefined ? "tlsCert" : "tlsKey", message: "give both a TLS certificate and a key (--tls-cert and --tls-key), or neither" }
      : (o.s3ClientIdentitiesPath !== undefined || o.azureClientIdentitiesPath !== undefined) && o.authorizationPath === undefined
        ? { key: "authorizationPath", message: "is missing: identity files need a grant file (--authorization-path); without grants every principal would be refused" }
        : o.authorizationPath !== undefined && o.s3ClientIdentitiesPath === undefined && o.azureClientIdentitiesPath === undefined
          ? { key: "authorizationPath", message: "names grants but no identity file gives principals: add --s3-client-identities-path and/or --azure-client-identities-path" }
          : undefined
})

export const GATEWAY_DEFAULTS: GatewaySettings = defaultsOf(GatewaySchema)

export const GATEWAY_ENV = envNamesOf(GatewaySchema)

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
  prefix: "TALON_GATEWAY",
  settings: {
    accessKeyId: S.unset(K.text, "S3 front end: the access key clients sign with (with TALON_GATEWAY_SECRET_ACCESS_KEY)", {
      flag: false,
      example: "AKIAEXAMPLE"
    }),
    secretAccessKey: S.unset(K.secret, "S3 front end: the secret of TALON_GATEWAY_ACCESS_KEY_ID", { flag: false, example: "<secret>" }),
    azureAccount: S.unset(K.text, "Azure front end: the account name clients sign as (with TALON_GATEWAY_AZURE_KEY)", {
      flag: false,
      example: "devstoreaccount1"
    }),
    azureKey: S.unset(K.secret, "Azure front end: the base64 Shared Key of TALON_GATEWAY_AZURE_ACCOUNT", { flag: false, example: "<base64 key>" })
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
  readonly colocate: boolean
}

export const GatewayCommandSchema = component<GatewayCommandSettings>({
  name: "gateway route",
  summary: "Where `talon gateway` reads from.",
  prefix: "TALON_GATEWAY",
  settings: {
    route: S.oneOf(["cache", "origin"], "cache: reads through the Talon cluster, falling back to the origin per block; origin: straight to the origin", {
      example: "origin"
    }),
    coordinator: S.unset(K.coordinatorList(), "Coordinator control address(es) of the cache route, comma-separated for failover", {
      shownDefault: "TALON_CLIENT_COORDINATOR, else 127.0.0.1:7000",
      example: "10.0.0.1:7000,10.0.0.2:7000"
    }),
    colocate: S.toggle("Run a cache worker in this process (its settings from TALON_WORKER_*) and send the blocks resident in it to clients by sendfile; other reads take the route")
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
    if (settings.auth && credentials.s3 === undefined && credentials.azure === undefined && settings.authorizationPath === undefined) {
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
