/**
 * etcd over TLS with client certificates: a real etcd (Debian etcd-server) started with its own
 * certificates and --client-cert-auth; a coordinator with the CA and a client certificate
 * follows it and is ready, one without a client certificate never is.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { makeCoordinator } from "../../../src/coordinator/Coordinator.js"
import { makeCa, makeLeaf } from "../../support/controlPki.js"
import { scopedTempDir } from "../../support/scopedTempDir.js"
import { etcdAvailable, etcdBin, freePort } from "./etcdHarness.js"

const startEtcd = (dir: string, files: { cert: string; key: string; ca: string }) =>
  Effect.gen(function* () {
    const [client, peer] = yield* Effect.promise(() => Promise.all([freePort(), freePort()]))
    const url = `https://127.0.0.1:${client}`
    const proc = yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn(
          etcdBin!,
          [
            "--name", "tls0",
            "--data-dir", path.join(dir, "etcd"),
            "--listen-client-urls", url,
            "--advertise-client-urls", url,
            "--listen-peer-urls", `http://127.0.0.1:${peer}`,
            "--initial-advertise-peer-urls", `http://127.0.0.1:${peer}`,
            "--initial-cluster", `tls0=http://127.0.0.1:${peer}`,
            "--cert-file", files.cert,
            "--key-file", files.key,
            "--trusted-ca-file", files.ca,
            "--client-cert-auth",
            "--log-level", "error"
          ],
          { stdio: "ignore" }
        )
      ),
      (p) =>
        Effect.async<void>((resume) => {
          if (p.exitCode !== null) return resume(Effect.void)
          p.once("exit", () => resume(Effect.void))
          p.kill("SIGKILL")
        })
    )
    return { url, proc }
  })

describe.runIf(etcdAvailable())("etcd over TLS", () => {
  it.scopedLive("a coordinator with the CA and a client certificate is served; without the certificate it is not", () =>
    Effect.gen(function* () {
      const dir = yield* scopedTempDir("talon-etcd-tls-")
      const ca = makeCa(dir, "ca")
      const server = makeLeaf(dir, "ca", "etcd")
      const client = makeLeaf(dir, "ca", "coordinator")
      const etcd = yield* startEtcd(dir, { cert: server.certPath, key: server.keyPath, ca })
      const state = { backend: "etcd" as const, etcdEndpoints: [etcd.url], etcdCaCertPath: ca, requestTimeoutMs: 1000 }

      const good = yield* makeCoordinator({
        listen: "127.0.0.1:0",
        adminListen: "127.0.0.1:0",
        state: { ...state, etcdClientCertPath: client.certPath, etcdClientKeyPath: client.keyPath }
      })
      // etcd may still be starting: the coordinator turns ready once it follows the store.
      yield* good.ready.pipe(Effect.filterOrFail((r) => r), Effect.retry({ times: 150, schedule: Schedule.spaced("100 millis") }), Effect.orDie)
      const members = yield* good.handle({ _tag: "MembershipQuery" })
      expect(members._tag).toBe("MembershipList")

      const refused = yield* makeCoordinator({ listen: "127.0.0.1:0", adminListen: "127.0.0.1:0", state })
      expect(yield* refused.ready).toBe(false)
      const answer = yield* refused.handle({ _tag: "MembershipQuery" })
      expect(answer._tag === "Ack" && answer.detail).toMatch(/coordinator not ready: the cluster state store is unavailable/)
    })
  )
})
