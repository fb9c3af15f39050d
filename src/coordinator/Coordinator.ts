/**
 * The coordinator: membership with liveness, the placement epoch, object
 * metadata through the backend, a control listener and an admin HTTP server.
 * It is never on a read's data path: clients compute placement locally from the
 * membership list and talk to workers directly.
 */
import { Clock, Context, Effect, Layer, type ConfigError, Either, Schedule } from "effect"
import type { ServeError } from "@effect/platform/HttpServerError"
import { BackendStore, type BackendError } from "../backend/BackendStore.js"
import { NodeRole, type NodeInfo } from "../core/ids.js"
import { objectIdToPath, validateObjectId } from "../core/objectId.js"
import { Maglev } from "../placement/index.js"
import type { ControlMessage } from "../protocol/index.js"
import { parseHostPort } from "../transport/address.js"
import { serveAdmin } from "./AdminHttp.js"
import type { ClusterStatus } from "../protocol/clusterStatus.js"
import { COORDINATOR_CAPS, serveControl, type ControlListenError, type ControlServer } from "./ControlServer.js"
import { livenessWindowMs, resolveCoordinatorOptions, type CoordinatorOptions } from "./config.js"
import { MembershipTable, type MemberState } from "./Membership.js"
import { parseListPrefix } from "./prefix.js"
import { renderMetrics } from "./metrics.js"

/** Upper bound on entries one ListObjects reply carries (it must fit one control frame). */
export const MAX_LIST_ENTRIES = 1000

export interface CoordinatorShape {
  readonly options: CoordinatorOptions
  /** Bound control `host:port` (port 0 resolved). */
  readonly controlAddress: string
  /** Bound admin HTTP `host:port`. */
  readonly adminAddress: string
  /** Answers one control message exactly as the control listener does. */
  readonly handle: (message: ControlMessage) => Effect.Effect<ControlMessage>
  readonly cluster: Effect.Effect<ClusterStatus>
  readonly epoch: Effect.Effect<number>
  /** Healthy members now (sweeps expired ones first). */
  readonly members: Effect.Effect<ReadonlyArray<NodeInfo>>
}

export type CoordinatorStartError = ControlListenError | ServeError | ConfigError.ConfigError

const ack = (ok: boolean, detail: string | null = null): ControlMessage => ({ _tag: "Ack", ok, detail })

const backendDetail = (e: BackendError): string =>
  e._tag === "BackendNotFound" ? `not found: ${e.message}` : e.message

/** Members the table holds at most, so a stream of made-up registrations cannot grow it without bound. */
const MAX_MEMBERS = 10_000

/** Longest node id or address a Register may carry (ids and addresses end up in every membership reply). */
const MAX_NODE_FIELD = 512

/** Why a Register cannot be accepted, or undefined: only dialable members may reach clients' placement. */
const invalidRegistration = (node: NodeInfo): string | undefined => {
  if (node.id.length === 0 || node.id.length > MAX_NODE_FIELD) {
    return `Register refused: the node id must be 1 to ${MAX_NODE_FIELD} characters (got ${node.id.length})`
  }
  if (node.address.length > MAX_NODE_FIELD || parseHostPort(node.address) === undefined) {
    return `Register refused: address ${JSON.stringify(node.address.slice(0, 80))} is not a dialable host:port (port 1-65535)`
  }
  return undefined
}

const roleName = (role: NodeRole) => (role === NodeRole.Worker ? "worker" : "coordinator") as "worker" | "coordinator"

export const makeCoordinator = (
  explicit: Partial<CoordinatorOptions> = {}
): Effect.Effect<CoordinatorShape, CoordinatorStartError, BackendStore | import("effect").Scope.Scope> =>
  Effect.gen(function* () {
    const options = yield* resolveCoordinatorOptions(explicit)
    const backend = yield* BackendStore
    const startedAt = yield* Clock.currentTimeMillis
    const table = new MembershipTable(livenessWindowMs(options), options.epochBase ?? startedAt)
    const now = Clock.currentTimeMillis

    // One Maglev table per epoch: rebuilt only when healthy membership changes.
    let placement: { epoch: number; table: Maglev } | undefined
    const placementAt = (at: number) => {
      const workers = table
        .healthy(at)
        .map((m) => m.info)
        .filter((n) => n.role === NodeRole.Worker)
      if (placement === undefined || placement.epoch !== table.epoch) {
        placement = { epoch: table.epoch, table: Maglev.build(workers, { epoch: table.epoch }) }
      }
      return placement
    }

    const handle = (message: ControlMessage): Effect.Effect<ControlMessage> =>
      Effect.gen(function* () {
        const at = yield* now
        switch (message._tag) {
          case "Register": {
            const refused = invalidRegistration(message.node)
            if (refused !== undefined) return ack(false, refused)
            if (table.size >= MAX_MEMBERS && table.isNew(message.node.id, at)) {
              return ack(false, `Register refused: the coordinator already tracks ${MAX_MEMBERS} nodes; retry after some expire`)
            }
            table.register(message.node, at)
            return ack(true)
          }
          case "Heartbeat":
            return table.heartbeat(message.node, message.blockCount, at)
              ? ack(true)
              : ack(false, `node ${message.node} is not registered (expired or the coordinator restarted); register again`)
          case "MembershipQuery":
            return { _tag: "MembershipList", nodes: table.healthy(at).map((m) => m.info) }
          case "MembershipQueryV2":
            // Zones are not tracked (Register carries none), so every entry's zone is None.
            return { _tag: "MembershipListV2", nodes: table.healthy(at).map((m) => ({ info: m.info, zone: null })) }
          case "PlacementLookup": {
            const { epoch, table: maglev } = placementAt(at)
            const owners = [...maglev.rank(message.block, message.k)]
            return { _tag: "PlacementResponse", owners, epoch }
          }
          case "StatObject": {
            // Never forward a name that could leave its bucket to the origin.
            const checked = validateObjectId(message.object)
            if (Either.isLeft(checked)) return ack(false, `invalid object: ${checked.left.message}`)
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
      })

    const listObjects = (prefix: string): Effect.Effect<ControlMessage> => {
      const parsed = parseListPrefix(prefix)
      if (Either.isLeft(parsed)) return Effect.succeed(ack(false, parsed.left))
      const { backend: tag, bucket, keyPrefix } = parsed.right
      const entries: Array<{ path: string; size: number }> = []
      const page = (token: string | undefined): Effect.Effect<void, BackendError> =>
        backend
          .list(bucket, {
            backend: tag,
            prefix: keyPrefix,
            maxKeys: MAX_LIST_ENTRIES - entries.length,
            ...(token === undefined ? {} : { token })
          })
          .pipe(
            Effect.flatMap((result) => {
              for (const o of result.objects) {
                if (entries.length >= MAX_LIST_ENTRIES) break
                entries.push({ path: objectIdToPath({ backend: tag, bucket, objectPath: o.key }), size: o.size })
              }
              return result.nextToken !== undefined && entries.length < MAX_LIST_ENTRIES
                ? page(result.nextToken)
                : Effect.void
            })
          )
      return page(undefined).pipe(
        Effect.as<ControlMessage>({ _tag: "ObjectList", entries }),
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
      handle
    })

    const memberView = (m: MemberState, at: number) => ({
      id: m.info.id,
      address: m.info.address,
      role: roleName(m.info.role),
      registeredAt: new Date(m.registeredAt).toISOString(),
      lastHeartbeatAt: new Date(m.lastHeartbeat).toISOString(),
      lastHeartbeatAgeMs: at - m.lastHeartbeat,
      blockCount: m.blockCount
    })

    const cluster: Effect.Effect<ClusterStatus> = Effect.map(now, (at) => {
      const members = table.healthy(at).map((m) => memberView(m, at))
      return {
        epoch: table.epoch,
        controlAddress: control.address,
        heartbeatIntervalMs: options.heartbeatIntervalMs,
        livenessWindowMs: livenessWindowMs(options),
        members
      }
    })

    const metrics = Effect.map(now, (at) =>
      renderMetrics({
        members: table.healthy(at),
        epoch: table.epoch,
        counters: table.counters,
        control: control.stats,
        uptimeSeconds: (at - startedAt) / 1000,
        now: at
      })
    )

    const adminAddress = yield* serveAdmin(
      adminListen.host,
      adminListen.port,
      { cluster, metrics, ready: Effect.succeed(true) },
      options.adminTlsCert === undefined ? undefined : { cert: options.adminTlsCert, key: options.adminTlsKey ?? "" }
    )

    // Expire silent workers even when nobody is asking, so the epoch and metrics move on time.
    yield* Effect.forkScoped(
      Effect.repeat(
        Effect.flatMap(now, (at) => Effect.sync(() => table.sweep(at))),
        Schedule.spaced(Math.max(10, Math.floor(options.heartbeatIntervalMs / 2)))
      )
    )

    yield* Effect.logInfo(`coordinator control on ${control.address}, admin http://${adminAddress}`)

    return {
      options,
      controlAddress: control.address,
      adminAddress,
      handle,
      cluster,
      epoch: Effect.map(now, (at) => {
        table.sweep(at)
        return table.epoch
      }),
      members: Effect.map(now, (at) => table.healthy(at).map((m) => m.info))
    } satisfies CoordinatorShape
  })

export class Coordinator extends Context.Tag("talon/Coordinator")<Coordinator, CoordinatorShape>() {
  /** A coordinator bound for the layer's lifetime; needs a `BackendStore` for StatObject/ListObjects. */
  static readonly layer = (options: Partial<CoordinatorOptions> = {}) =>
    Layer.scoped(Coordinator, makeCoordinator(options))
}
