/** `talon coordinator` in-process: help documents every option; flags beat the environment; it serves until interrupted. */
import * as net from "node:net"
import { Command } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Fiber } from "effect"
import { vi } from "vitest"
import { ControlChannel } from "../../src/transport/ControlChannel.js"
import { coordinator } from "../../src/coordinator/cli.js"
import { resolveCoordinatorOptions, resolveCoordinatorState, type CoordinatorOptions } from "../../src/coordinator/config.js"

const run = (args: ReadonlyArray<string>) =>
  Command.run(coordinator, { name: "talon", version: "test" })(["node", "talon", ...args]).pipe(
    Effect.provide(NodeContext.layer)
  )

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port
      s.close(() => resolve(port))
    })
  })

describe("talon coordinator", () => {
  it.live("--help explains every option and its environment variable", () =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      const spy = vi.spyOn(console, "log").mockImplementation((...a: Array<unknown>) => {
        lines.push(a.map(String).join(" "))
      })
      yield* Effect.ensuring(run(["--help"]), Effect.sync(() => spy.mockRestore()))
      const help = lines.join("\n")
      for (const flag of ["--listen", "--admin-listen", "--heartbeat-interval-ms", "--missed-heartbeats", "--read-timeout-ms"]) {
        expect(help).toContain(flag)
      }
      for (const env of ["LISTEN", "ADMIN_LISTEN", "HEARTBEAT_INTERVAL_MS", "MISSED_HEARTBEATS", "READ_TIMEOUT_MS", "CLUSTER_ID"]) {
        expect(help).toContain(`TALON_COORDINATOR_${env}`)
      }
      // The state store's settings have flags on the coordinator too.
      for (const [flag, env] of [
        ["--state", "TALON_STATE_BACKEND"],
        ["--etcd-endpoints", "TALON_ETCD_ENDPOINTS"],
        ["--etcd-prefix", "TALON_ETCD_PREFIX"],
        ["--unhealthy-after-ms", "TALON_STATE_UNHEALTHY_AFTER_MS"],
        ["--lease-ttl-ms", "TALON_STATE_LEASE_TTL_MS"],
        ["--cluster-token-check", "TALON_CLUSTER_TOKEN_CHECK"]
      ]) {
        expect(help).toContain(flag)
        expect(help).toContain(env)
      }
    })
  )

  it.effect("store timings: flag > TALON_STATE_* > derived from the heartbeat settings; etcd named by its endpoints", () =>
    Effect.gen(function* () {
      const resolve = (explicit: Partial<CoordinatorOptions>, env: ReadonlyArray<[string, string]> = []) =>
        Effect.withConfigProvider(
          Effect.flatMap(resolveCoordinatorOptions(explicit), resolveCoordinatorState),
          ConfigProvider.fromMap(new Map(env))
        )
      // 200 ms x 4 missed: out of placement after 800 ms, record gone after 1600 ms.
      const derived = yield* resolve({ heartbeatIntervalMs: 200, missedHeartbeats: 4 })
      expect(derived).toMatchObject({ backend: "memory", heartbeatIntervalMs: 200, unhealthyAfterMs: 800, leaseTtlMs: 1600 })
      const fromEnv = yield* resolve({ heartbeatIntervalMs: 200, missedHeartbeats: 4 }, [
        ["TALON_STATE_LEASE_TTL_MS", "5000"],
        ["TALON_ETCD_ENDPOINTS", "http://127.0.0.1:2379"]
      ])
      expect(fromEnv).toMatchObject({ backend: "etcd", unhealthyAfterMs: 800, leaseTtlMs: 5000, etcdEndpoints: ["http://127.0.0.1:2379"] })
      const flagged = yield* resolve({ heartbeatIntervalMs: 200, missedHeartbeats: 4, state: { leaseTtlMs: 9000 } }, [["TALON_STATE_LEASE_TTL_MS", "5000"]])
      expect(flagged.leaseTtlMs).toBe(9000)
      const bad = yield* Effect.flip(resolve({ heartbeatIntervalMs: 200, missedHeartbeats: 4, state: { leaseTtlMs: 500 } }))
      expect(String(bad)).toContain("heartbeat interval < unhealthy-after < lease TTL")
    })
  )

  it.effect("explicit option > TALON_COORDINATOR_* > default", () =>
    Effect.gen(function* () {
      const env = ConfigProvider.fromMap(
        new Map([
          ["TALON_COORDINATOR_LISTEN", "127.0.0.1:7100"],
          ["TALON_COORDINATOR_MISSED_HEARTBEATS", "5"]
        ])
      )
      const resolved = yield* Effect.withConfigProvider(resolveCoordinatorOptions({ listen: "127.0.0.1:7200" }), env)
      expect(resolved).toMatchObject({
        listen: "127.0.0.1:7200",
        missedHeartbeats: 5,
        adminListen: "127.0.0.1:8000",
        heartbeatIntervalMs: 1000
      })
      const bad = yield* Effect.flip(
        Effect.withConfigProvider(
          resolveCoordinatorOptions({}),
          ConfigProvider.fromMap(new Map([["TALON_COORDINATOR_HEARTBEAT_INTERVAL_MS", "0"]]))
        )
      )
      expect(String(bad)).toContain("positive")
    })
  )

  it.live("serves control and admin on the flagged addresses until interrupted, then releases them", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const control = yield* Effect.promise(freePort)
        const admin = yield* Effect.promise(freePort)
        const fiber = yield* Effect.fork(
          run(["--listen", `127.0.0.1:${control}`, "--admin-listen", `127.0.0.1:${admin}`]).pipe(
            Effect.withConfigProvider(ConfigProvider.fromMap(new Map()))
          )
        )
        const ch = yield* ControlChannel.make(`127.0.0.1:${control}`, { retries: 50, retryDelay: "100 millis" })
        const reply = yield* ch.request({ _tag: "MembershipQuery" })
        expect(reply).toEqual({ _tag: "MembershipList", nodes: [] })
        const health = yield* Effect.promise(() => fetch(`http://127.0.0.1:${admin}/healthz`))
        expect(health.status).toBe(200)
        yield* ch.close
        yield* Fiber.interrupt(fiber)
        // Both ports are free again: the command's layer closed its listeners.
        for (const port of [control, admin]) {
          const rebound = yield* Effect.promise(
            () =>
              new Promise<boolean>((resolve) => {
                const s = net.createServer()
                s.once("error", () => resolve(false))
                s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)))
              })
          )
          expect(rebound, `port ${port}`).toBe(true)
        }
      })
    )
  )
})
