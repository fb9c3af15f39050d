/**
 * The coordinator: membership served from the cluster state store through
 * the registry actor, the placement epoch derived from membership content,
 * object metadata through the backend, a control listener and an admin HTTP
 * server. Coordinators sharing a store (etcd) are active-active: each serves
 * every control operation, none leads. It is never on a read's data path:
 * clients compute placement locally and talk to workers directly.
 */
import { Clock, Context, Effect, Layer, Option, type ConfigError, Either, Stream, SubscriptionRef, type Scope } from "effect"
import type { ServeError } from "@effect/platform/HttpServerError"
import { BackendStore, type BackendError } from "../backend/BackendStore.js"
import type { NodeInfo } from "../core/ids.js"
import { objectIdToPath, validateObjectId } from "../core/objectId.js"
import { Maglev } from "../placement/index.js"
import type { ControlMessage } from "../protocol/index.js"
import { DEFAULT_CAPS } from "../protocol/frame.js"
import { parseHostPort } from "../transport/address.js"
import { controlTlsFilesOf } from "../transport/controlTls.js"
import { serveAdmin } from "./CoordinatorAdminHttp.js"
import { makeUi, sampleIntervalFor } from "./ui/overview.js"
import { traced } from "../transport/tracing.js"
import { tracesLayer } from "../config/traces.js"
import type { ClusterMember, ClusterStatus } from "../protocol/clusterStatus.js"
import { COORDINATOR_CAPS, serveControl, type ControlListenError, type ControlServer } from "./ControlServer.js"
import { resolveCoordinatorOptions, resolveCoordinatorState, type CoordinatorOptions } from "./config.js"
import { parseListPrefix } from "./prefix.js"
import { objectListingPage } from "./objectListing.js"
import { renderMetrics } from "./metrics.js"
import { CoordinatorTalonMetrics } from "./talonMetrics.js"
import { Heartbeat, makeRegistry, Register, ReportStatus, type Registry } from "./registry/Registry.js"
import { roleName, zoneOf, type RegistryNode, type RegistryView } from "./registry/view.js"
import { keepCoordinatorRecord } from "./selfRecord.js"
import { ClusterStateStore, type ClusterStateStoreShape } from "./state/ClusterStateStore.js"
import { epochForWire } from "./state/epoch.js"
import { makeWorkerProxy } from "./workerProxy.js"
/**
 * Talon's listing bounds: the control protocol has no cursor, so the coordinator drains the
 * origin's pages itself, up to 10,000 objects and one control frame. Past either bound the
 * reply is a refusal, never a partial list: a mount showing a truncated directory would look
 * healthy and be wrong.
 */
export const MAX_LIST_ENTRIES = 10_000
/** Objects asked for per origin page (S3's own ceiling). */
const LIST_PAGE_KEYS = 1000
/** Guards against an origin whose pages never end; generous beside 10,000 / 1000 so short pages still complete. */
const MAX_LIST_PAGES = 200
/** The encoded ObjectList must fit the control frame cap both sides enforce (Talon's 1 MiB). */
const MAX_LIST_PAYLOAD = DEFAULT_CAPS.control

export interface CoordinatorShape {
  readonly options: CoordinatorOptions
  /** Bound control `host:port` (port 0 resolved). */
  readonly controlAddress: string
  /** Bound admin HTTP `host:port`. */
  readonly adminAddress: string
  /** Answers one control message exactly as the control listener does. */
  readonly handle: (message: ControlMessage) => Effect.Effect<ControlMessage>
  readonly cluster: Effect.Effect<ClusterStatus>
  /** The placement epoch as the wire carries it (see `epochForWire`). */
  readonly epoch: Effect.Effect<number>
  /** Healthy, ready members now. */
  readonly members: Effect.Effect<ReadonlyArray<NodeInfo>>
  /** Whether the state store is followed (what /readyz reports). */
  readonly ready: Effect.Effect<boolean>
  readonly registry: Registry
}

export type CoordinatorStartError = ControlListenError | ServeError | ConfigError.ConfigError

const ack = (ok: boolean, detail: string | null = null): ControlMessage => ({ _tag: "Ack", ok, detail })

const backendDetail = (e: BackendError): string =>
  e._tag === "BackendNotFound" ? `not found: ${e.message}` : e.message

const clusterMember = (m: RegistryNode, now: number): ClusterMember => ({
  id: m.status.node.id,
  address: m.status.node.address,
  role: roleName(m.status.node.role),
  incarnationId: m.status.incarnationId,
  heartbeatSeq: m.status.heartbeatSeq,
  health: m.health,
  zone: zoneOf(m),
  registeredAt: new Date(m.status.startedAtUnixMs).toISOString(),
  lastHeartbeatAt: new Date(m.updatedAtUnixMs).toISOString(),
  lastHeartbeatAgeMs: Math.max(0, now - m.updatedAtUnixMs),
  blockCount: m.status.metrics.blockCount,
  residentBytes: m.status.metrics.residentBytes,
  capacityBytes: m.status.metrics.capacityBytes,
  ready: m.status.ready
})

const notReady = (view: RegistryView): ControlMessage =>
  ack(false, `coordinator not ready: the cluster state store is unavailable (${view.error ?? "no snapshot yet"}); ask another coordinator`)

/** A coordinator with its own state store, built from the options (memory unless etcd is configured). */
export const makeCoordinator = (
  explicit: Partial<CoordinatorOptions> = {}
): Effect.Effect<CoordinatorShape, CoordinatorStartError, Scope.Scope> =>
  Effect.gen(function* () {
    const options = yield* resolveCoordinatorOptions(explicit)
    const settings = yield* resolveCoordinatorState(options)
    const layer = settings.backend === "etcd" ? ClusterStateStore.Etcd(settings) : ClusterStateStore.Memory(settings)
    const store = Context.get(yield* Layer.build(layer), ClusterStateStore)
    return yield* makeCoordinatorOn(store, options)
  })

/** A coordinator serving from `store` (shared, e.g., by several coordinators in one process). */
export const makeCoordinatorOn = (
  untimedStore: ClusterStateStoreShape,
  explicit: Partial<CoordinatorOptions> = {}
): Effect.Effect<CoordinatorShape, CoordinatorStartError, Scope.Scope> =>
  Effect.gen(function* () {
    const options = yield* resolveCoordinatorOptions(explicit)
    // Object metadata from the origin only when this coordinator was given its credentials and asked to use them.
    const provided = Option.getOrUndefined(yield* Effect.serviceOption(BackendStore))
    const backend = options.objectMetadata === "workers" ? undefined : provided
    if (options.objectMetadata === "origin" && backend === undefined) {
      return yield* Effect.dieMessage(
        "--object-metadata origin needs origin credentials (TALON_S3_* or TALON_AZURE_*); set them, or use --object-metadata workers to ask a live worker"
      )
    }
    const startedAt = yield* Clock.currentTimeMillis
    const talon = new CoordinatorTalonMetrics()
    const store = talon.store(untimedStore)
    const registry = yield* makeRegistry(store, { clusterId: options.clusterId })
    const view = SubscriptionRef.get(registry.view)

    // Serve once the first snapshot is in, or start unready if the store does not answer in time.
    const first = yield* registry.view.changes.pipe(
      Stream.filter((v) => v.ready),
      Stream.take(1),
      Stream.runDrain,
      Effect.timeout(store.settings.requestTimeoutMs * 2),
      Effect.either
    )
    if (Either.isLeft(first)) {
      yield* Effect.logWarning(`coordinator starting unready: the ${store.backend} state store gave no snapshot yet; /readyz reports 503 until it does`)
    }

    // One Maglev table per epoch: rebuilt only when the placement set changes.
    let placement: { epoch: bigint; table: Maglev } | undefined
    const placementOf = (v: RegistryView) => {
      if (placement === undefined || placement.epoch !== v.epoch) {
        placement = { epoch: v.epoch, table: Maglev.build([...v.placement], { epoch: epochForWire(v.epoch) }) }
      }
      return placement.table
    }

    const asked = <A extends { ok: boolean; detail: string | null }, E extends { message: string }>(reply: Effect.Effect<A, E>) =>
      reply.pipe(
        Effect.map((a): ControlMessage => ack(a.ok, a.detail)),
        Effect.catchAll((e) => Effect.succeed(ack(false, `membership registry: ${e.message}`)))
      )

    const handle = talon.instrument((message: ControlMessage): Effect.Effect<ControlMessage> =>
      traced("talon.coordinator.control", { "talon.control.message": message._tag })(Effect.gen(function* () {
        switch (message._tag) {
          case "Register":
            return yield* asked(registry.actor.ask(new Register({ node: message.node })))
          case "Heartbeat":
            return yield* asked(registry.actor.ask(new Heartbeat({ node: message.node, blockCount: message.blockCount })))
          case "NodeStatusHeartbeat":
            return yield* asked(registry.actor.ask(new ReportStatus({ status: message.status })))
          case "MembershipQuery": {
            const v = yield* view
            if (!v.ready) return notReady(v)
            return { _tag: "MembershipList", nodes: v.members.map((m) => m.status.node) }
          }
          case "MembershipQueryV2": {
            const v = yield* view
            if (!v.ready) return notReady(v)
            return { _tag: "MembershipListV2", nodes: v.members.map((m) => ({ info: m.status.node, zone: zoneOf(m) })) }
          }
          case "PlacementLookup": {
            const v = yield* view
            if (!v.ready) return notReady(v)
            const owners = [...placementOf(v).rank(message.block, message.k)]
            return { _tag: "PlacementResponse", owners, epoch: epochForWire(v.epoch) }
          }
          case "StatObject": {
            // Never forward a name that could leave its bucket to the origin.
            const checked = validateObjectId(message.object)
            if (Either.isLeft(checked)) return ack(false, `invalid object: ${checked.left.message}`)
            if (backend === undefined) {
              const v = yield* view
              return v.ready ? yield* proxy.ask(message) : notReady(v)
            }
            return yield* backend.stat(message.object).pipe(
              Effect.map((stat): ControlMessage => ({ _tag: "ObjectStat", size: stat.size, version: stat.version })),
              Effect.catchAll((e) => Effect.succeed(ack(false, backendDetail(e))))
            )
          }
          case "ListObjects":
            return yield* listObjects(message.prefix)
          default:
            return ack(false, `the coordinator does not handle ${message._tag} messages`)
        }
      })))

    // Without credentials every stat and listing goes through a live worker (Talon's design).
    const proxy = yield* makeWorkerProxy({
      workers: Effect.map(view, (v) => v.members.map((m) => m.status.node)),
      tls: options.dataTls ? controlTlsFilesOf(options) : undefined
    })
    const listViaWorker = (prefix: string): Effect.Effect<ControlMessage> =>
      Effect.gen(function* () {
        const v = yield* view
        if (!v.ready) return notReady(v)
        const reply = yield* proxy.ask({ _tag: "ListObjects", prefix })
        // Workers spell paths as Talon does (`s3/bucket/key`); this coordinator answers `/s3/bucket/key` in either mode.
        return reply._tag === "ObjectList"
          ? { _tag: "ObjectList", entries: reply.entries.map((e) => (e.path.startsWith("/") ? e : { path: `/${e.path}`, size: e.size })) }
          : reply
      })

    const listObjects = (prefix: string): Effect.Effect<ControlMessage> => {
      const parsed = parseListPrefix(prefix)
      if (Either.isLeft(parsed)) return Effect.succeed(ack(false, parsed.left))
      if (backend === undefined) return listViaWorker(prefix)
      const { backend: tag, bucket, keyPrefix } = parsed.right
      const entries: Array<{ path: string; size: number }> = []
      // Control payload so far: envelope, tag and vec length, then per entry two length prefixes, the path and the size.
      let payload = 32
      const tooMany = (why: string) => `listing ${JSON.stringify(prefix)} ${why}; narrow the prefix`
      const page = (token: string | undefined, pages: number): Effect.Effect<string | undefined, BackendError> =>
        backend
          .list(bucket, {
            backend: tag,
            prefix: keyPrefix,
            maxKeys: LIST_PAGE_KEYS,
            ...(token === undefined ? {} : { token })
          })
          .pipe(
            Effect.flatMap((result) => {
              for (const o of result.objects) {
                if (entries.length >= MAX_LIST_ENTRIES) return Effect.succeed(tooMany(`has more than ${MAX_LIST_ENTRIES} objects`))
                const path = objectIdToPath({ backend: tag, bucket, objectPath: o.key })
                payload += 16 + Buffer.byteLength(path)
                if (payload > MAX_LIST_PAYLOAD) return Effect.succeed(tooMany(`does not fit one ${MAX_LIST_PAYLOAD}-byte control reply`))
                entries.push({ path, size: o.size })
              }
              if (result.nextToken === undefined) return Effect.succeed(undefined)
              if (pages >= MAX_LIST_PAGES) return Effect.succeed(tooMany(`did not end within ${MAX_LIST_PAGES} origin pages`))
              return page(result.nextToken, pages + 1)
            })
          )
      return page(undefined, 1).pipe(
        Effect.map((refused): ControlMessage => (refused === undefined ? { _tag: "ObjectList", entries } : ack(false, refused))),
        Effect.catchAll((e) => Effect.succeed(ack(false, backendDetail(e))))
      )
    }

    const listen = parseHostPort(options.listen, { allowPortZero: true })
    const adminListen = parseHostPort(options.adminListen, { allowPortZero: true })
    if (listen === undefined || adminListen === undefined) {
      return yield* Effect.dieMessage(
        `coordinator listen addresses must be host:port (got ${options.listen} and ${options.adminListen})`
      )
    }
    const control: ControlServer = yield* serveControl({
      host: listen.host,
      port: listen.port,
      caps: COORDINATOR_CAPS,
      readTimeoutMs: options.readTimeoutMs,
      handle,
      tls: controlTlsFilesOf(options)
    })

    const cluster: Effect.Effect<ClusterStatus> = Effect.map(view, (v) => ({
      clusterId: options.clusterId,
      ready: v.ready,
      ...(v.error === undefined ? {} : { notReadyReason: v.error }),
      stateBackend: store.backend,
      epoch: epochForWire(v.epoch),
      epochHex: v.epoch.toString(16).padStart(16, "0"),
      controlAddress: control.address,
      heartbeatIntervalMs: options.heartbeatIntervalMs,
      livenessWindowMs: store.settings.unhealthyAfterMs,
      members: v.members.map((m) => clusterMember(m, v.observedAtUnixMs)),
      coordinators: v.coordinators.map((m) => clusterMember(m, v.observedAtUnixMs)),
      outOfPlacement: v.outOfPlacement.map((m) => clusterMember(m, v.observedAtUnixMs))
    }))

    const metrics = Effect.map(Effect.zip(view, Clock.currentTimeMillis), ([v, now]) =>
      talon.render({
        view: v,
        nowMs: now,
        controlRequests: control.stats.requests,
        connections: control.stats.connections,
        uptimeSeconds: (now - startedAt) / 1000
      }) +
      renderMetrics({
        view: v,
        epoch: epochForWire(v.epoch),
        counters: registry.counters,
        control: control.stats,
        uptimeSeconds: (now - startedAt) / 1000
      })
    )

    const ready = Effect.map(view, (v) => v.ready)
    const ui = yield* makeUi(view, cluster, sampleIntervalFor(options.heartbeatIntervalMs), options.adminToken)
    const adminAddress = yield* serveAdmin(
      adminListen.host,
      adminListen.port,
      {
        cluster,
        metrics,
        ready,
        listObjects: (query) =>
          backend === undefined
            ? Effect.succeed({
                status: 503 as const,
                error:
                  "this coordinator holds no origin credentials, so it cannot page through the origin's listing; list over the control port (ListObjects goes through a worker) or run the coordinator with --object-metadata origin and credentials"
              })
            : objectListingPage(backend, query, control.address),
        management: Effect.map(Effect.zip(view, Clock.currentTimeMillis), ([v, nowMs]) => ({ clusterId: options.clusterId, backend: store.backend, view: v, nowMs })),
        ui,
        token: options.adminToken
      },
      options.adminTlsCert === undefined ? undefined : { cert: options.adminTlsCert, key: options.adminTlsKey ?? "" }
    )

    // Its own leased record, so every coordinator's cluster view lists every live coordinator.
    yield* keepCoordinatorRecord(store, registry.view, { clusterId: options.clusterId, controlAddress: control.address, adminAddress })

    yield* Effect.logInfo(
      `coordinator control on ${control.address}, admin http://${adminAddress}, cluster ${options.clusterId} on the ${store.backend} state store, object metadata from ${backend === undefined ? "live workers" : "the origin"}`
    )

    return {
      options,
      controlAddress: control.address,
      adminAddress,
      handle,
      cluster,
      epoch: Effect.map(view, (v) => epochForWire(v.epoch)),
      members: Effect.map(view, (v) => v.members.map((m) => m.status.node)),
      ready,
      registry
    } satisfies CoordinatorShape
  })

export class Coordinator extends Context.Tag("talon/Coordinator")<Coordinator, CoordinatorShape>() {
  /** A coordinator bound for the layer's lifetime, with its own state store; a `BackendStore` in context answers StatObject/ListObjects itself (see `objectMetadata`). */
  static readonly layer = (options: Partial<CoordinatorOptions> = {}) =>
    Layer.scoped(Coordinator, makeCoordinator(options)).pipe(Layer.provide(tracesLayer("talon-coordinator")))

  /** A coordinator on the `ClusterStateStore` the layer is given (several may share one). */
  static readonly layerWithoutDependencies = (options: Partial<CoordinatorOptions> = {}) =>
    Layer.scoped(Coordinator, Effect.flatMap(ClusterStateStore, (store) => makeCoordinatorOn(store, options)))
}
