/**
 * `talon gateway`: S3 and Azure Blob endpoints over the cache (or straight to the
 * origin) until interrupted. Flags override `TALON_GATEWAY_*`, which override the
 * config file, then the defaults. Credentials clients must sign with come from the environment only
 * (`TALON_GATEWAY_ACCESS_KEY_ID`/`_SECRET_ACCESS_KEY`, `TALON_GATEWAY_AZURE_ACCOUNT`/
 * `_KEY`); the origin and the gateway's identity there from `TALON_S3_*` /
 * `TALON_AZURE_*`; the cluster client from `TALON_CLIENT_*`.
 */
import { Command } from "@effect/cli"
import { type ConfigError, Console, Data, Effect, Layer } from "effect"
import * as Router from "../backend/Router.js"
import { ClientSchema, type TalonClientOptions } from "../client/config.js"
import * as HeapTrim from "../core/heapTrim.js"
import { explicitFrom, flaggedKeys, flagOf, flagsOf } from "../config/cli.js"
import { resolve } from "../config/Setting.js"
import { CredentialsConfig, type GatewayCommandSettings, type GatewayOptions, GatewayCommandSchema, GatewaySchema } from "./config.js"

type GatewaySchemaKeys = typeof GatewaySchema.settings
import { Gateway, type GatewayShape } from "./Gateway.js"
import type { ColocatedWorker } from "./localBlocks.js"

export class GatewayConfigError extends Data.TaggedError("GatewayConfigError")<{ readonly message: string }> {}

/** Every gateway setting, the route and the client's block size as flags, generated from their declarations. */
export const gatewayOptions = {
  ...flagsOf(GatewaySchema, flaggedKeys(GatewaySchema)),
  ...flagsOf(GatewayCommandSchema, flaggedKeys(GatewayCommandSchema)),
  blockSize: flagOf(ClientSchema.settings.blockSize)
}

type Flags = Command.Command.ParseConfig<typeof gatewayOptions>

/** What `talon gateway` runs: the layer for the given flags, plus what to print once it listens. */
export const gatewayLayerFromFlags = (flags: Flags, colocated?: () => Promise<ColocatedWorker>) =>
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
    const { route, coordinator, colocate } = yield* resolve(
      GatewayCommandSchema,
      explicitFrom<GatewayCommandSettings, keyof GatewayCommandSettings>(flags, ["route", "coordinator", "colocate"])
    )
    const explicit: Partial<GatewayOptions> = explicitFrom<GatewayOptions, keyof GatewaySchemaKeys>(flags, flaggedKeys(GatewaySchema))
    const client: Partial<TalonClientOptions> = {
      ...(coordinator !== undefined ? { coordinator } : {}),
      ...explicitFrom<TalonClientOptions, "blockSize">(flags, ["blockSize"])
    }
    const layer = Gateway.layerDeployment({ gateway: explicit, route, router, client })
    if (!colocate) return { route, router, layer }
    if (colocated === undefined) {
      return yield* Effect.fail(new GatewayConfigError({ message: "--colocate needs the worker, which this entry point does not load; run it as `talon gateway --colocate`" }))
    }
    // The worker's graph is loaded only for a co-located gateway.
    const start = yield* Effect.promise(colocated)
    return { route, router, layer: layer.pipe(Layer.provide(start(router))) }
  })

/** What a running gateway prints: where it listens, whether auth is on (loudly when off), how to point clients at it. */
export const gatewayBanner = (gw: GatewayShape, router: Router.RouterOptions): ReadonlyArray<string> => {
  const lines = [`talon gateway listening on ${gw.url} (${gw.route} route)`]
  if (gw.adminUrl !== undefined) lines.push(`  admin ${gw.adminUrl} (/healthz, /readyz, /metrics)`)
  if (gw.colocated) lines.push("  co-located: blocks resident in this process's worker go to clients by sendfile")
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

/** `talon gateway`; `colocated` loads what `--colocate` starts (the command line supplies it). */
export const gatewayCommand = (colocated?: () => Promise<ColocatedWorker>) =>
  Command.make("gateway", gatewayOptions, (flags) =>
    Effect.gen(function* () {
      const { router, layer } = yield* gatewayLayerFromFlags(flags, colocated)
      // One heap trim once start-up is over (not after load: see HeapTrim.trimOnceWhenQuiet).
      return yield* announce(router).pipe(Effect.provide(Layer.fresh(Layer.merge(layer, HeapTrim.startupLayer()))))
    })
  ).pipe(
    Command.withDescription(
      "Serve S3 and Azure Blob endpoints that read through the Talon cache (or straight from the origin); point unmodified SDKs at it."
    )
  )

export const gateway = gatewayCommand()
