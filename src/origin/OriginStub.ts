/**
 * `OriginStub`: a local blob store speaking S3 and Azure Blob REST over a directory,
 * with injectable faults and request counters. Scoped: the server stops when the
 * layer's scope closes.
 */
import { type ConfigError, Context, Data, Duration, Effect, Layer } from "effect"
import { resolve } from "../config/Setting.js"
import { DEFAULT_UPLOAD_TTL_MS, OriginSchema } from "./config.js"
import { FileSystem } from "@effect/platform"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as path from "node:path"
import type { StubState } from "./context.js"
import { FaultState, noFaults, type Faults, type FaultsPatch } from "./faults.js"
import { serveOrigin } from "./server.js"
import { StatsCounter, type OriginStats } from "./stats.js"
import { sweepBlocks } from "./azureBlocks.js"
import { sweepUploads } from "./multipart.js"
import { cleanStaleTemps } from "./store.js"
import { TokenIssuer, type TokenSettings, type TokenSettingsPatch } from "./tokens.js"

/** Azurite's well-known development account; the stub accepts any credentials. */
export const AZURITE_ACCOUNT = "devstoreaccount1"
export const AZURITE_KEY =
  "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

export interface OriginStubConfig {
  readonly root: string
  /** Default 127.0.0.1. */
  readonly host?: string
  /** Default 0 (ephemeral). */
  readonly port?: number
  /** Merged over "no faults". */
  readonly faults?: FaultsPatch
  /** Multipart uploads never completed and blocks never committed are removed after this (default 24 h). */
  readonly uploadTtlMs?: number
}

export { DEFAULT_UPLOAD_TTL_MS }

export class OriginStubError extends Data.TaggedError("OriginStubError")<{ readonly message: string }> {}

export interface OriginStubShape {
  /** `http://host:port`: S3 endpoint (path-style), and the base of admin routes `/_talon/*`. */
  readonly url: string
  /** `http://host:port/devstoreaccount1`: what a `BlobServiceClient` takes. */
  readonly azureUrl: string
  readonly host: string
  readonly port: number
  readonly root: string
  readonly stats: () => Effect.Effect<OriginStats>
  readonly resetStats: () => Effect.Effect<void>
  readonly faults: () => Effect.Effect<Faults>
  /** Merges `patch` over the current faults; returns the result. Takes effect on the next request. */
  readonly setFaults: (patch: FaultsPatch) => Effect.Effect<Faults>
  /** How the emulated identity endpoints issue and honour tokens (tokens.ts); returns the result. */
  readonly setTokens: (patch: TokenSettingsPatch) => Effect.Effect<TokenSettings>
  /** Every token issued so far is refused from now on. */
  readonly expireTokens: () => Effect.Effect<void>
  readonly tokenStats: () => Effect.Effect<ReturnType<TokenIssuer["snapshot"]>>
}

const make = (config: OriginStubConfig): Effect.Effect<OriginStubShape, OriginStubError, import("effect").Scope.Scope> =>
  Effect.gen(function* () {
    const root = path.resolve(config.root)
    const host = config.host ?? "127.0.0.1"
    yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeDirectory(root, { recursive: true })).pipe(
      Effect.provide(NodeFileSystem.layer),
      Effect.mapError((e) => new OriginStubError({ message: `cannot create origin root ${root}: ${e.message}` }))
    )
    yield* Effect.promise(() => cleanStaleTemps(root).catch(() => 0))
    const ttl = config.uploadTtlMs ?? DEFAULT_UPLOAD_TTL_MS
    const sweep = () => Promise.all([sweepUploads(root, ttl), sweepBlocks(root, ttl)]).catch(() => undefined)
    yield* Effect.promise(sweep)
    // Abandoned uploads expire on a schedule as well as at start-up: a long-running stub must not fill its disk.
    yield* Effect.promise(sweep).pipe(
      Effect.delay(Duration.millis(Math.max(50, Math.min(60_000, Math.floor(ttl / 2))))),
      Effect.forever,
      Effect.forkScoped
    )
    const clock = yield* Effect.clock
    const state: StubState = {
      root,
      stats: new StatsCounter(),
      faults: new FaultState({ ...noFaults, ...config.faults }),
      tokens: new TokenIssuer(() => clock.unsafeCurrentTimeMillis()),
      url: ""
    }
    const server = yield* serveOrigin(state, host, config.port ?? 0).pipe(
      Effect.mapError(
        (e) =>
          new OriginStubError({
            message: `origin stub cannot listen on ${host}:${config.port ?? 0}: ${(e.cause as Error)?.message ?? String(e.cause)} (pick another --port or stop the process using it)`
          })
      )
    )
    return {
      url: server.url,
      azureUrl: `${server.url}/${AZURITE_ACCOUNT}`,
      host,
      port: server.port,
      root,
      stats: () => Effect.sync(() => state.stats.snapshot()),
      resetStats: () => Effect.sync(() => state.stats.clear()),
      faults: () => Effect.sync(() => state.faults.faults),
      setFaults: (patch) => Effect.sync(() => state.faults.update(patch)),
      setTokens: (patch) => Effect.sync(() => state.tokens.update(patch)),
      expireTokens: () => Effect.sync(() => state.tokens.expireAll()),
      tokenStats: () => Effect.sync(() => state.tokens.snapshot())
    }
  })

export class OriginStub extends Context.Tag("talon/OriginStub")<OriginStub, OriginStubShape>() {
  static readonly make = make
  static readonly layer = (config: OriginStubConfig): Layer.Layer<OriginStub, OriginStubError> =>
    Layer.scoped(OriginStub, make(config))
  /** Root, host and port from `TALON_ORIGIN_*` (see `OriginStubConfigFromEnv`); no faults. */
  static readonly layerConfig: Layer.Layer<OriginStub, OriginStubError | ConfigError.ConfigError> = Layer.unwrapEffect(
    Effect.map(Effect.suspend(() => OriginStubConfigFromEnv), (config) => OriginStub.layer(config))
  )
}

/** Root, host, port and upload TTL as `talon origin` resolves them (OriginSchema: TALON_ORIGIN_*, the config file, defaults). */
export const OriginStubConfigFromEnv: Effect.Effect<OriginStubConfig, ConfigError.ConfigError> = Effect.map(
  resolve(OriginSchema),
  (s) => ({ root: s.root, host: s.host, port: s.port, uploadTtlMs: s.uploadTtlMs })
)
