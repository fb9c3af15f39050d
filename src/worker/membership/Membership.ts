/**
 * Cluster membership of a worker: a NodeStatusHeartbeat (control tag 9,
 * Talon's status with a random incarnation per start and a rising sequence)
 * every heartbeat interval. The coordinator setting may list several
 * coordinators: heartbeats go to one, and when it fails (unreachable, timed
 * out, or it refused the status) the same status goes to the next in the
 * list, which then stays the target. Any coordinator of the cluster writes
 * the same store, so it does not matter which one hears it.
 *
 * Readiness (a SubscriptionRef, see Readiness.ts) turns ready at the first
 * accepted status and stays ready while no coordinator answers: the data
 * plane does not depend on the coordinator. With no coordinator configured
 * the worker is standalone and ready at once. Each status reports that
 * readiness (so the first, sent before any coordinator accepted one, says not
 * ready, and the one right after acceptance says ready) and the admin address.
 */
import { Clock, Context, Duration, Effect, Either, Layer, Schedule } from "effect"
import { ControlChannel } from "../../transport/ControlChannel.js"
import { controlTlsFilesOf } from "../../transport/controlTls.js"
import { formatHostPort, parseHostPortList } from "../../transport/address.js"
import { NodeRole, type NodeInfo } from "../../core/ids.js"
import type { NodeStatus } from "../../protocol/status.js"
import { signStatus } from "../../protocol/statusProof.js"
import { WorkerConfig } from "../config.js"
import { WorkerMetrics } from "../metrics.js"
import { DataServer } from "../server/DataServer.js"
import { BlockStore } from "../store/BlockStore.js"
import { AdminHttp } from "../admin/WorkerAdminHttp.js"
import { WorkerReadiness } from "./Readiness.js"
import { newIdentity, workerStatus, type WorkerIdentity } from "./status.js"
import { describeProblems, watchCacheHealth } from "./health.js"

export interface MembershipShape {
  /** What this worker reports as. */
  readonly node: NodeInfo
  /** The coordinators heartbeats may go to, in failover order (empty when standalone). */
  readonly coordinators: ReadonlyArray<string>
  /** The coordinator list as configured (comma-separated), or undefined when standalone. */
  readonly coordinator: string | undefined
  readonly identity: WorkerIdentity | undefined
}

export class Membership extends Context.Tag("talon/worker/Membership")<Membership, MembershipShape>() {
  static readonly layer = Layer.scoped(
    Membership,
    Effect.gen(function* () {
      const [cfg, server, store, stats, readiness, admin] = yield* Effect.all([WorkerConfig, DataServer, BlockStore, WorkerMetrics, WorkerReadiness, AdminHttp])
      const node: NodeInfo = {
        id: cfg.id !== "" ? cfg.id : `worker-${server.address}`,
        address: cfg.advertiseAddress !== "" ? cfg.advertiseAddress : server.address,
        role: NodeRole.Worker
      }
      const list = cfg.coordinator.trim() === "" ? [] : (parseHostPortList(cfg.coordinator) ?? [])
      const coordinators = list.map((hp) => formatHostPort(hp.host, hp.port))
      const identity = newIdentity(cfg.clusterId, node, cfg.zone, yield* Clock.currentTimeMillis)
      const gauges = () => {
        const s = store.stats()
        return { blockCount: store.blockCount, residentBytes: s.residentBytes, capacityBytes: s.perDir.reduce((n, d) => n + d.capacity, 0) }
      }
      if (coordinators.length === 0) {
        yield* readiness.update({ nodeId: node.id, ready: true, detail: "standalone (no coordinator configured)" })
        // No cache-dir probes run without a coordinator to tell: health stays Talon's `unknown`.
        yield* admin.statusFrom(
          Effect.map(Clock.currentTimeMillis, (now) =>
            workerStatus(identity, 0, now, stats, gauges(), { ready: readiness.ready, adminAddress: admin.address, health: "unknown" })
          )
        )
        yield* Effect.logInfo(`worker ${node.id} standalone: no coordinator, ready`)
        return { node, coordinators, coordinator: undefined, identity: undefined }
      }
      const cacheHealth = yield* watchCacheHealth(cfg.cacheDirs, cfg.heartbeatIntervalMs, (health, probes) =>
        health === "healthy"
          ? Effect.logInfo(`worker ${node.id} healthy again: every cache dir passes its write probe; it rejoins placement`)
          : Effect.logWarning(`worker ${node.id} ${health}: ${describeProblems(probes)}; it reports ${health} and stays out of placement until the probe passes`)
      )
      const timeout = Duration.millis(Math.max(1000, cfg.heartbeatIntervalMs * 2))
      const controlTls = controlTlsFilesOf(cfg)
      const channels: Array<ControlChannel> = []
      for (const address of coordinators) channels.push(yield* ControlChannel.make(address, { requestTimeout: timeout, retries: 0, tls: controlTls }))
      yield* readiness.update({ nodeId: node.id, detail: `sending status to ${coordinators.join(", ")}` })

      const send = (channel: ControlChannel, status: NodeStatus): Effect.Effect<void, string> =>
        channel.request({ _tag: "NodeStatusHeartbeat", status }).pipe(
          Effect.mapError((e) => e.message),
          Effect.flatMap((reply) =>
            reply._tag !== "Ack"
              ? Effect.fail(`${channel.address} answered ${reply._tag}, expected Ack`)
              : reply.ok
                ? Effect.void
                : Effect.fail(`${channel.address} refused the status: ${reply.detail ?? "no detail"}`)
          )
        )

      let target = 0
      let seq = 0
      let lastProblem = ""
      /** The status to the current target, then to each other coordinator in turn until one accepts it. */
      const beat: Effect.Effect<void> = Effect.gen(function* () {
        stats.cacheDirsFailingProbe = cacheHealth.probes().filter((p) => p.problem !== undefined).length
        const built = workerStatus(identity, ++seq, yield* Clock.currentTimeMillis, stats, gauges(), {
          ready: readiness.ready,
          adminAddress: admin.address,
          health: cacheHealth.current()
        })
        // With a cluster token every status carries its HMAC (src/protocol/statusProof.ts), never the token.
        const signed = cfg.clusterToken === undefined ? Either.right(built) : signStatus(built, cfg.clusterToken)
        if (Either.isLeft(signed)) return yield* Effect.logError(`worker ${node.id}: status not sent: ${signed.left}`)
        const status = signed.right
        const problems: Array<string> = []
        for (let i = 0; i < channels.length; i++) {
          const index = (target + i) % channels.length
          const channel = channels[index]!
          const sent = yield* Effect.either(send(channel, status))
          if (sent._tag === "Left") {
            problems.push(sent.left)
            continue
          }
          const before = readiness.current
          if (index !== target || !before.registered) {
            const verb = !before.ready ? "joined" : index !== target ? `failed over to ${channel.address}` : "rejoined"
            yield* Effect.logInfo(`worker ${node.id} ${verb} (cluster ${identity.clusterId}, data ${node.address}, coordinator ${channel.address})`)
          }
          target = index
          lastProblem = ""
          stats.heartbeatsAccepted++
          yield* readiness.update({
            ready: true,
            registered: true,
            coordinator: channel.address,
            detail:
              status.health === "healthy"
                ? `member of cluster ${identity.clusterId} as ${node.id} via ${channel.address}`
                : `registered in cluster ${identity.clusterId} as ${node.id} via ${channel.address}, reporting ${status.health} (out of placement): ${cacheHealth.problems()}`
          })
          // Accepted while reporting not ready (the first status): say ready now rather than a
          // heartbeat later, so placement does not wait an interval for this worker.
          if (status.ready !== readiness.ready) return yield* beat
          return
        }
        const problem = problems.join("; ")
        stats.heartbeatsFailed++
        const current = readiness.current
        yield* readiness.update({
          registered: false,
          detail: current.ready ? `serving; no coordinator accepted the last status: ${problem}` : `not a member yet: ${problem}`
        })
        if (problem !== lastProblem) {
          lastProblem = problem
          yield* Effect.logWarning(`worker ${node.id}: no coordinator accepted its status (${problem}); retrying every ${cfg.heartbeatIntervalMs} ms`)
        }
      })
      // /api/v1/status: what the next heartbeat would say, at the sequence of the last one sent.
      yield* admin.statusFrom(
        Effect.map(Clock.currentTimeMillis, (now) =>
          workerStatus(identity, seq, now, stats, gauges(), { ready: readiness.ready, adminAddress: admin.address, health: cacheHealth.current() })
        )
      )
      yield* Effect.forkScoped(Effect.repeat(beat, Schedule.spaced(Duration.millis(cfg.heartbeatIntervalMs))))
      return { node, coordinators, coordinator: coordinators.join(","), identity }
    })
  )
}
