/**
 * Cluster membership of a worker: Register with the coordinator (ready only
 * after the first Ack{ok:true}), then Heartbeat{node, blockCount} on an
 * interval. A heartbeat answered Ack{ok:false} (the coordinator restarted and
 * forgot us) or lost with the connection makes the next tick re-register.
 * With no coordinator configured the worker is standalone and ready at once.
 */
import { Context, Duration, Effect, Layer, Schedule } from "effect"
import { ControlChannel } from "../../transport/ControlChannel.js"
import { NodeRole, type NodeInfo } from "../../core/ids.js"
import type { ControlMessage } from "../../protocol/index.js"
import { WorkerConfig } from "../config.js"
import { DataServer } from "../server/DataServer.js"
import { BlockStore } from "../store/BlockStore.js"
import { WorkerReadiness } from "./Readiness.js"

export interface MembershipShape {
  /** What this worker registers as. */
  readonly node: NodeInfo
  /** Coordinator address, or undefined when standalone. */
  readonly coordinator: string | undefined
}

export class Membership extends Context.Tag("talon/worker/Membership")<Membership, MembershipShape>() {
  static readonly layer = Layer.scoped(
    Membership,
    Effect.gen(function* () {
      const cfg = yield* WorkerConfig
      const server = yield* DataServer
      const store = yield* BlockStore
      const state = yield* WorkerReadiness
      const node: NodeInfo = {
        id: cfg.id !== "" ? cfg.id : `worker-${server.address}`,
        address: cfg.advertiseAddress !== "" ? cfg.advertiseAddress : server.address,
        role: NodeRole.Worker
      }
      state.nodeId = node.id
      if (cfg.coordinator === "") {
        state.ready = true
        state.detail = "standalone (no coordinator configured)"
        yield* Effect.logInfo(`worker ${node.id} standalone: no coordinator, ready`)
        return { node, coordinator: undefined }
      }
      const channel = yield* ControlChannel.make(cfg.coordinator, {
        requestTimeout: Duration.millis(Math.max(1000, cfg.heartbeatIntervalMs * 2)),
        retries: 0
      })
      state.detail = `registering with the coordinator at ${cfg.coordinator}`

      const expectAck = (what: string, reply: ControlMessage) =>
        reply._tag === "Ack"
          ? reply.ok
            ? Effect.void
            : Effect.fail(`${what} refused by the coordinator: ${reply.detail ?? "no detail"}`)
          : Effect.fail(`${what}: the coordinator answered ${reply._tag}, expected Ack`)

      const register = channel.request({ _tag: "Register", node }).pipe(
        Effect.mapError((e) => e.message),
        Effect.flatMap((reply) => expectAck("Register", reply)),
        Effect.tap(() =>
          Effect.suspend(() => {
            const first = !state.ready
            state.ready = true
            state.registered = true
            state.detail = `registered with ${cfg.coordinator} as ${node.id}`
            return Effect.logInfo(`worker ${node.id} ${first ? "registered" : "re-registered"} with ${cfg.coordinator} (data ${node.address})`)
          })
        )
      )

      const heartbeat = Effect.suspend(() =>
        channel.request({ _tag: "Heartbeat", node: node.id, blockCount: store.blockCount })
      ).pipe(
        Effect.mapError((e) => e.message),
        Effect.flatMap((reply) => expectAck("Heartbeat", reply))
      )

      let lastProblem = ""
      const tick = Effect.suspend(() => (state.registered ? heartbeat : register)).pipe(
        Effect.tap(() => Effect.sync(() => (lastProblem = ""))),
        Effect.catchAll((problem) =>
          Effect.suspend(() => {
            // Whatever went wrong, the next tick registers again: Register is idempotent.
            state.registered = false
            if (!state.ready) state.detail = `not registered yet: ${problem}`
            if (problem === lastProblem) return Effect.void
            lastProblem = problem
            return Effect.logWarning(`worker ${node.id}: ${problem}; will register again`)
          })
        )
      )
      yield* Effect.forkScoped(Effect.repeat(tick, Schedule.spaced(Duration.millis(cfg.heartbeatIntervalMs))))
      return { node, coordinator: cfg.coordinator }
    })
  )
}
