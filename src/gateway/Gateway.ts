/**
 * `Gateway`: S3 and Azure Blob front ends over a `Route` (cache or origin), on one
 * HTTP port. Scoped: the server stops when the layer's scope closes.
 *
 *   Gateway.layer(options)  needs  Route | BackendStore | OriginHttp
 *   Route.Cache             needs  TalonClient | BackendStore
 *   Route.Origin            needs  BackendStore
 *   Gateway.layerOrigin(router)  gives  BackendStore | OriginHttp   (the gateway's origin identity)
 */
import { type ConfigError, Context, Data, Effect, Layer, Option, type Scope } from "effect"
import { BackendStore } from "../backend/BackendStore.js"
import * as Router from "../backend/Router.js"
import { TalonClient } from "../client/TalonClient.js"
import type { TalonClientOptions } from "../client/config.js"
import type { ReadAheadStats } from "../client/ReadAheadCache.js"
import type { ZoneStats } from "../client/zones.js"
import { type GatewayOptions, parseListen, resolveGatewayOptions, type RouteName } from "./config.js"
import type { GatewayCounters, Services } from "./context.js"
import * as OriginHttpModule from "./OriginHttp.js"
import { OriginHttp } from "./OriginHttp.js"
import { Route, type RouteCounters, type RouteShape } from "./Route.js"
import type { RemoteBodies } from "./remoteBody.js"
import { makeSpliceRelay } from "./spliceRelay.js"
import { CacheRoute, type CacheRouteOptions, OriginRoute } from "./routes.js"
import { describeAuth, listen } from "./server.js"
import { readinessReasons, serveGatewayAdmin } from "./admin.js"
import { GatewayMetrics } from "./metrics.js"
import { OriginStatCache } from "./originStatCache.js"
import { LocalBlocks, type LocalBlocksShape } from "./localBlocks.js"
import { TlsLoadError } from "../http/tls.js"
import { NodeFileSystem } from "@effect/platform-node"
import { openAuditLog } from "./audit.js"
import { makePrincipalStore } from "./principalStore.js"
import { currentSpans } from "./spans.js"
import { otlpEndpoint, tracesLayer } from "../config/traces.js"

export class GatewayError extends Data.TaggedError("GatewayError")<{ readonly message: string }> {}

export interface GatewayStats extends GatewayCounters, RouteCounters {
  readonly route: RouteName
  /** Cache route: what its client read ahead of sequential responses (see ReadAheadCache.ts). */
  readonly readAhead?: ReadAheadStats
  /** Cache route: its client's reads by zone (same, cross with bytes, unknown; see client/zones.ts). */
  readonly zones?: ZoneStats
}

export interface GatewayShape {
  /** `http://host:port`: the S3 endpoint (path-style, or `<bucket>.localhost:port`). */
  readonly url: string
  /** `http://host:port/<account>`: what a `BlobServiceClient` takes. */
  readonly azureUrl: (account: string) => string
  readonly host: string
  readonly port: number
  readonly route: RouteName
  readonly options: GatewayOptions
  /** One line saying which credentials are checked (never the secrets). */
  readonly authSummary: string
  readonly stats: () => GatewayStats
  /** `http://host:port` of the admin port (/healthz, /readyz, /metrics), when it serves one. */
  readonly adminUrl: string | undefined
  /** Whether a worker in this process sends its resident blocks to clients by sendfile. */
  readonly colocated: boolean
  /** Whether workers' bodies are relayed to clients by splice (remoteBody.ts). */
  readonly splice: boolean
}

/**
 * The splice relay when the settings, the route and the platform allow it; a reason when it was
 * wanted and cannot run (the gateway says so once); undefined when not wanted.
 */
const remoteBodiesFor = (options: GatewayOptions, route: RouteShape): RemoteBodies | string | undefined => {
  if (!options.remoteSplice || route.remote === undefined) return undefined
  const relay = makeSpliceRelay({ tenant: route.remote.tenant, connectTimeoutMs: route.remote.workerTimeoutMs })
  return typeof relay === "string" ? relay : { relay, placement: route.remote, pieceBytes: options.pieceBytes, readAhead: options.readAhead }
}

const make = (explicit: Partial<GatewayOptions> = {}): Effect.Effect<
  GatewayShape,
  GatewayError | ConfigError.ConfigError,
  Scope.Scope | Route | BackendStore | OriginHttp
> =>
  Effect.gen(function* () {
    const options = yield* resolveGatewayOptions(explicit)
    const listenOn = parseListen(options.listen)
    if (listenOn === undefined) {
      return yield* Effect.fail(new GatewayError({ message: `gateway listen address ${JSON.stringify(options.listen)} is not host:port` }))
    }
    const route = yield* Route
    const backend = yield* BackendStore
    const origin = yield* OriginHttp
    const runtime = yield* Effect.runtime<never>()
    const principals =
      options.authorizationPath === undefined
        ? undefined
        : yield* makePrincipalStore(
            { s3Identities: options.s3ClientIdentitiesPath, azureIdentities: options.azureClientIdentitiesPath, authorization: options.authorizationPath },
            options.authReloadMs
          ).pipe(
            Effect.provide(NodeFileSystem.layer),
            Effect.mapError((e) => new GatewayError({ message: e.message }))
          )
    const audit = options.auditLog === undefined ? undefined : yield* openAuditLog(options.auditLog).pipe(Effect.mapError((e) => new GatewayError({ message: e.message })))
    const local = Option.getOrUndefined(yield* Effect.serviceOption(LocalBlocks))
    const clock = yield* Effect.clock
    const remote = remoteBodiesFor(options, route)
    if (typeof remote === "string") yield* Effect.logWarning(`gateway: worker bodies go through the cluster client's buffers: ${remote}`)
    if (typeof remote === "object") yield* Effect.addFinalizer(() => Effect.sync(() => remote.relay.close()))
    const services: Services = {
      ...(local === undefined ? {} : { local }),
      ...(typeof remote === "object" ? { remote } : {}),
      principals,
      audit,
      options,
      backend,
      route,
      origin,
      stats: new OriginStatCache(backend, runtime, options.statTtlMs, options.writeFreshMs, () => clock.unsafeCurrentTimeMillis()),
      runtime,
      now: () => clock.unsafeCurrentTimeMillis(),
      counters: { requests: 0, rejectedBusy: 0, bytesOut: 0, errors: 0, aborted: 0, localBodies: 0, localBytes: 0, remoteBodies: 0, remoteBytes: 0, rawFront: 0 },
      metrics: new GatewayMetrics(),
      // Made only when this gateway exports traces (the layer below installed the OTLP tracer).
      spans: (yield* otlpEndpoint) === undefined ? undefined : yield* currentSpans,
      url: ""
    }
    const server = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => listen(services, listenOn.host, listenOn.port),
        catch: (e) =>
          new GatewayError({
            message:
              e instanceof TlsLoadError
                ? `gateway cannot serve HTTPS: ${e.message}`
                : `gateway cannot listen on ${options.listen}: ${(e as Error).message} (pick another --listen or stop the process using it)`
          })
      }),
      (s) => Effect.promise(() => s.close())
    )
    let adminUrl: string | undefined
    if (options.adminListen !== "") {
      const at = parseListen(options.adminListen)!
      const metrics = services.metrics!
      const address = yield* serveGatewayAdmin(at.host, at.port, { reasons: readinessReasons(route, origin), metrics: () => metrics.render() }).pipe(
        Effect.mapError((e) => new GatewayError({ message: e.message }))
      )
      adminUrl = `http://${address}`
    }
    return {
      url: server.url,
      adminUrl,
      azureUrl: (account) => `${server.url}/${account}`,
      host: server.host,
      port: server.port,
      route: route.name,
      options,
      authSummary: describeAuth(services),
      colocated: local !== undefined,
      splice: typeof remote === "object",
      stats: () => ({ route: route.name, ...services.counters, ...route.counters, ...(route.readAhead === undefined ? {} : { readAhead: route.readAhead() }), ...(route.zones === undefined ? {} : { zones: route.zones() }) })
    } satisfies GatewayShape
  })

export class Gateway extends Context.Tag("talon/Gateway")<Gateway, GatewayShape>() {
  static readonly make = make
  static readonly layer = (options: Partial<GatewayOptions> = {}) =>
    Layer.scoped(Gateway, make(options)).pipe(Layer.provide(tracesLayer("talon-gateway")))

  /** The gateway's side of the origin: `BackendStore` and the listing/bucket calls, one identity. */
  static readonly layerOrigin = (router: Router.RouterOptions): Layer.Layer<BackendStore | OriginHttp> =>
    Layer.merge(Router.layer(router), OriginHttpModule.layer(router))

  /**
   * Everything a deployment needs but the cluster: the gateway over `route`, its origin
   * identity from `router`, and (cache route) a `TalonClient` for `client`.
   */
  static readonly layerDeployment = (args: {
    readonly gateway?: Partial<GatewayOptions>
    readonly route: RouteName
    readonly router: Router.RouterOptions
    readonly client?: Partial<TalonClientOptions>
    readonly cache?: Partial<CacheRouteOptions>
    /** A worker in this process whose resident blocks the gateway sends by sendfile (co-located mode). */
    readonly local?: LocalBlocksShape
  }): Layer.Layer<Gateway, GatewayError | ConfigError.ConfigError> => {
    const origin = Gateway.layerOrigin(args.router)
    const routeLayer =
      args.route === "cache"
        ? CacheRoute({
            pieceBytes: args.cache?.pieceBytes ?? args.gateway?.pieceBytes,
            readAhead: args.cache?.readAhead ?? args.gateway?.readAhead,
            workerTimeoutMs: args.cache?.workerTimeoutMs ?? args.gateway?.workerTimeoutMs
          }).pipe(Layer.provide(TalonClient.layer(args.client ?? {})))
        : OriginRoute
    const gateway = Gateway.layer(args.gateway).pipe(Layer.provide(routeLayer), Layer.provide(origin))
    return args.local === undefined ? gateway : gateway.pipe(Layer.provide(Layer.succeed(LocalBlocks, args.local)))
  }
}

/** Route layers, by name as the CLI spells them. */
export const RouteLayers = { Cache: CacheRoute, Origin: OriginRoute } as const
