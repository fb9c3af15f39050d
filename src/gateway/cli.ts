/**
 * `talon gateway`: S3 and Azure Blob endpoints over the cache (or straight to the
 * origin) until interrupted. Flags override `TALON_GATEWAY_*`, which override the
 * defaults. Credentials clients must sign with come from the environment only
 * (`TALON_GATEWAY_ACCESS_KEY_ID`/`_SECRET_ACCESS_KEY`, `TALON_GATEWAY_AZURE_ACCOUNT`/
 * `_KEY`); the origin and the gateway's identity there from `TALON_S3_*` /
 * `TALON_AZURE_*`; the cluster client from `TALON_CLIENT_*`.
 */
import { Command, Options } from "@effect/cli"
import { Config, type ConfigError, Console, Data, Effect, Layer, Option } from "effect"
import * as Router from "../backend/Router.js"
import type { TalonClientOptions } from "../client/config.js"
import { CredentialsConfig, type GatewayOptions, type RouteName } from "./config.js"
import { Gateway, type GatewayShape } from "./Gateway.js"

export class GatewayConfigError extends Data.TaggedError("GatewayConfigError")<{ readonly message: string }> {}

const opt = <A>(o: Options.Options<A>, description: string) => o.pipe(Options.withDescription(description), Options.optional)

export const gatewayOptions = {
  listen: opt(Options.text("listen"), "host:port to serve S3 and Azure on (env TALON_GATEWAY_LISTEN, default 127.0.0.1:9000)."),
  route: opt(
    Options.choice("route", ["cache", "origin"]),
    "cache: reads through the Talon cluster, falling back to the origin per block; origin: straight to the origin (env TALON_GATEWAY_ROUTE, default cache)."
  ),
  coordinator: opt(
    Options.text("coordinator"),
    "Coordinator control address for the cache route (env TALON_GATEWAY_COORDINATOR, then TALON_CLIENT_COORDINATOR, default 127.0.0.1:7000)."
  ),
  auth: opt(
    Options.choice("auth", ["on", "off"]),
    "Verify SigV4 / Shared Key against TALON_GATEWAY_* credentials; off serves anyone (local demos only) (env TALON_GATEWAY_AUTH, default on)."
  ),
  blockSize: opt(Options.integer("block-size"), "Cache block size in bytes; must equal the workers' (env TALON_CLIENT_BLOCK_SIZE, default 256 MiB)."),
  maxConcurrentRequests: opt(
    Options.integer("max-concurrent-requests"),
    "Requests served at once; more get 503 SlowDown/ServerBusy (env TALON_GATEWAY_MAX_CONCURRENT_REQUESTS, default 256)."
  ),
  maxBodyBytes: opt(Options.integer("max-body-bytes"), "Largest upload accepted (env TALON_GATEWAY_MAX_BODY_BYTES, default 64 MiB)."),
  responseTimeoutMs: opt(
    Options.integer("response-timeout-ms"),
    "Deadline for a response head (env TALON_GATEWAY_RESPONSE_TIMEOUT_MS, default 30000)."
  ),
  workerTimeoutMs: opt(
    Options.integer("worker-timeout-ms"),
    "A block piece not served by the cache in this time comes from the origin (env TALON_GATEWAY_WORKER_TIMEOUT_MS, default 5000)."
  ),
  readAhead: opt(Options.integer("read-ahead"), "Block pieces fetched ahead per response (env TALON_GATEWAY_READ_AHEAD, default 4)."),
  tlsCert: opt(
    Options.text("tls-cert"),
    "PEM certificate (chain) file: serve HTTPS; re-read on SIGHUP or when the file changes (env TALON_GATEWAY_TLS_CERT; needs --tls-key)."
  ),
  tlsKey: opt(Options.text("tls-key"), "PEM private key file for --tls-cert (env TALON_GATEWAY_TLS_KEY).")
}

type Flags = {
  readonly [K in keyof typeof gatewayOptions]: Option.Option<
    (typeof gatewayOptions)[K] extends Options.Options<Option.Option<infer A>> ? A : never
  >
}

const some = <A>(o: Option.Option<A>): A | undefined => Option.getOrUndefined(o)

/** What `talon gateway` runs: the layer for the given flags, plus what to print once it listens. */
export const gatewayLayerFromFlags = (flags: Flags) =>
  Effect.gen(function* () {
    const router = yield* Router.RouterConfig
    if (router.s3 === undefined && router.azure === undefined) {
      return yield* Effect.fail(
        new GatewayConfigError({
          message:
            "the gateway has no origin: set TALON_S3_ENDPOINT/TALON_S3_ACCESS_KEY_ID/TALON_S3_SECRET_ACCESS_KEY and/or TALON_AZURE_ACCOUNT/TALON_AZURE_KEY (for the local stub: TALON_S3_ENDPOINT=http://127.0.0.1:9100 TALON_S3_ACCESS_KEY_ID=talon TALON_S3_SECRET_ACCESS_KEY=talon, TALON_AZURE_ACCOUNT=devstoreaccount1 TALON_AZURE_ENDPOINT=http://127.0.0.1:9100/devstoreaccount1 TALON_AZURE_KEY=<Azurite key>)"
        })
      )
    }
    const route: RouteName =
      some(flags.route) ?? Option.getOrElse(yield* Config.option(Config.literal("cache", "origin")("TALON_GATEWAY_ROUTE")), () => "cache" as const)
    const coordinator =
      some(flags.coordinator) ?? Option.getOrUndefined(yield* Config.option(Config.string("TALON_GATEWAY_COORDINATOR")))
    const explicit: Partial<GatewayOptions> = Object.fromEntries(
      Object.entries({
        listen: some(flags.listen),
        auth: Option.map(flags.auth, (a) => a === "on").pipe(Option.getOrUndefined),
        maxConcurrentRequests: some(flags.maxConcurrentRequests),
        maxBodyBytes: some(flags.maxBodyBytes),
        responseTimeoutMs: some(flags.responseTimeoutMs),
        workerTimeoutMs: some(flags.workerTimeoutMs),
        readAhead: some(flags.readAhead),
        tlsCert: some(flags.tlsCert),
        tlsKey: some(flags.tlsKey)
      }).filter(([, v]) => v !== undefined)
    )
    const client: Partial<TalonClientOptions> = Object.fromEntries(
      Object.entries({ coordinator, blockSize: some(flags.blockSize) }).filter(([, v]) => v !== undefined)
    )
    return { route, router, layer: Gateway.layerWith({ gateway: explicit, route, router, client }) }
  })

/** What a running gateway prints: where it listens, whether auth is on (loudly when off), how to point clients at it. */
export const gatewayBanner = (gw: GatewayShape, router: Router.RouterOptions): ReadonlyArray<string> => {
  const lines = [`talon gateway listening on ${gw.url} (${gw.route} route)`]
  lines.push(
    gw.options.auth
      ? `  ${gw.authSummary}`
      : "  !!! AUTH IS OFF: anyone who can reach this port can read and write through it (local demo only) !!!"
  )
  const s3Key = gw.options.credentials.s3?.accessKeyId ?? "<any>"
  const azAccount = gw.options.credentials.azure?.account ?? "devstoreaccount1"
  if (router.s3 !== undefined) {
    lines.push(`  AWS CLI: aws --endpoint-url ${gw.url} s3 ls s3://<bucket>/   (access key ${s3Key})`)
    lines.push(`  S3 SDK:  new S3Client({ endpoint: "${gw.url}", forcePathStyle: true, region: "${gw.options.region}" })`)
  }
  if (router.azure !== undefined) {
    lines.push(`  Azure:   new BlobServiceClient("${gw.azureUrl(azAccount)}", new StorageSharedKeyCredential("${azAccount}", key))`)
  }
  return lines
}

/** True when `TALON_GATEWAY_*` credentials are set: `talon up` turns auth on only then. */
export const gatewayCredentialsConfigured: Effect.Effect<boolean, ConfigError.ConfigError> = Effect.map(
  CredentialsConfig,
  (c) => c.s3 !== undefined || c.azure !== undefined
)

const announce = (router: Router.RouterOptions) =>
  Effect.gen(function* () {
    const gw = yield* Gateway
    for (const line of gatewayBanner(gw, router)) yield* Console.log(line)
    return yield* Effect.never
  })

export const gateway = Command.make("gateway", gatewayOptions, (flags) =>
  Effect.gen(function* () {
    const { router, layer } = yield* gatewayLayerFromFlags(flags as Flags)
    return yield* announce(router).pipe(Effect.provide(Layer.fresh(layer)))
  })
).pipe(
  Command.withDescription(
    "Serve S3 and Azure Blob endpoints that read through the Talon cache (or straight from the origin); point unmodified SDKs at it."
  )
)
