/**
 * The coordinator's control listener over mTLS with a trust domain: a client with the right
 * certificate is served; one without a certificate, with a certificate of another CA, with an
 * expired one, or with an identity outside the trust domain is refused and the refusal
 * logged; a certificate rotated on disk is served to new connections without a restart.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Logger, Schedule } from "effect"
import * as fs from "node:fs"
import * as tls from "node:tls"
import { TalonClient } from "../../src/client/TalonClient.js"
import { makeCoordinator } from "../../src/coordinator/Coordinator.js"
import { parseHostPort } from "../../src/transport/address.js"
import { ControlChannel } from "../../src/transport/ControlChannel.js"
import type { ControlTlsFiles } from "../../src/transport/controlTls.js"
import { makeCa, makeLeaf } from "../support/controlPki.js"
import { scopedTempDir } from "../support/scopedTempDir.js"

const DOMAIN = "talon.test"
const id = (role: string, node: string, domain = DOMAIN) => `spiffe://${domain}/talon/default/${role}/${node}`

/** The serial of the certificate a new connection to `address` is shown. */
const servedSerial = (address: string, ca: string, client: { certPath: string; keyPath: string }) =>
  Effect.async<string, Error>((resume) => {
    const hp = parseHostPort(address)!
    const socket = tls.connect({ host: hp.host, port: hp.port, ca: fs.readFileSync(ca), cert: fs.readFileSync(client.certPath), key: fs.readFileSync(client.keyPath), checkServerIdentity: () => undefined })
    socket.once("secureConnect", () => {
      const serial = socket.getPeerCertificate().serialNumber
      socket.destroy()
      resume(Effect.succeed(serial))
    })
    socket.once("error", (e) => resume(Effect.fail(e)))
  })

describe("control-plane TLS", () => {
  it.scopedLive("mTLS with a trust domain: the right client works, the wrong ones are refused and logged, rotation needs no restart", () =>
    Effect.gen(function* () {
      const dir = yield* scopedTempDir("talon-control-tls-")
      const ca = makeCa(dir, "ca")
      const otherCa = makeCa(dir, "other-ca")
      const server = makeLeaf(dir, "ca", "coordinator", { spiffe: id("coordinator", "c1") })
      const worker = makeLeaf(dir, "ca", "worker", { spiffe: id("worker", "w1") })
      const foreign = makeLeaf(dir, "other-ca", "foreign", { spiffe: id("worker", "w2") })
      const expired = makeLeaf(dir, "ca", "expired", { spiffe: id("worker", "w3"), days: -1 })
      const outsider = makeLeaf(dir, "ca", "outsider", { spiffe: id("worker", "w4", "elsewhere.test") })

      const logs: Array<string> = []
      const capture = Logger.make(({ message }) => void logs.push(String(Array.isArray(message) ? message.join(" ") : message)))
      const coordinator = yield* makeCoordinator({
        listen: "127.0.0.1:0",
        adminListen: "127.0.0.1:0",
        controlTlsCertPath: server.certPath,
        controlTlsKeyPath: server.keyPath,
        controlTlsCaCertPath: ca,
        controlTlsTrustDomain: DOMAIN
      }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, capture)))

      const ask = (files: ControlTlsFiles) =>
        Effect.gen(function* () {
          const channel = yield* ControlChannel.make(coordinator.controlAddress, { tls: files, retries: 0, requestTimeout: "3 seconds" })
          return yield* Effect.either(channel.request({ _tag: "MembershipQuery" }))
        }).pipe(Effect.scoped)
      const as = (leaf: { certPath: string; keyPath: string }): ControlTlsFiles => ({ ...leaf, caCertPath: ca, trustDomain: DOMAIN })

      // The right certificate: served, and the client checked the coordinator's identity too.
      const ok = yield* ask(as(worker))
      expect(Either.isRight(ok) && ok.right._tag).toBe("MembershipList")
      // A client that trusts another CA refuses the coordinator.
      const distrust = yield* ask({ ...worker, caCertPath: otherCa })
      expect(Either.isLeft(distrust)).toBe(true)

      // A TalonClient with its certificate settings asks over TLS: the coordinator's own answer comes back.
      const viaClient = yield* Effect.flip(
        Effect.flatMap(TalonClient, (c) => c.list("s3://bkt/")).pipe(
          Effect.provide(
            TalonClient.layer({
              coordinator: coordinator.controlAddress,
              controlTlsCertPath: worker.certPath,
              controlTlsKeyPath: worker.keyPath,
              controlTlsCaCertPath: ca,
              controlTlsTrustDomain: DOMAIN
            })
          )
        )
      )
      expect(viaClient.message).toContain("no live worker to answer ListObjects")

      // Plain TCP and TLS without a client certificate get nothing.
      const noCert = yield* Effect.async<string>((resume) => {
        const hp = parseHostPort(coordinator.controlAddress)!
        const s = tls.connect({ host: hp.host, port: hp.port, ca: fs.readFileSync(ca), checkServerIdentity: () => undefined })
        s.on("secureConnect", () => s.write(Buffer.alloc(32)))
        s.on("data", () => resume(Effect.succeed("answered")))
        s.on("error", (e) => resume(Effect.succeed(`error: ${e.message}`)))
        s.on("close", () => resume(Effect.succeed("closed")))
      })
      expect(noCert).not.toBe("answered")

      for (const [name, leaf] of [["foreign", foreign], ["expired", expired], ["outsider", outsider]] as const) {
        const refused = yield* ask(as(leaf))
        expect(Either.isLeft(refused), name).toBe(true)
      }
      yield* Effect.sync(() => logs.filter((l) => l.startsWith("refused a control connection")).length).pipe(
        Effect.filterOrFail((n) => n >= 4),
        Effect.retry({ times: 100, schedule: Schedule.spaced("20 millis") }),
        Effect.orDie
      )
      const refusals = logs.filter((l) => l.startsWith("refused a control connection")).join("\n")
      expect(refusals).toContain("it presented no client certificate")
      expect(refusals).toMatch(/failed verification \((UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)\)/)
      expect(refusals).toContain("failed verification (CERT_HAS_EXPIRED)")
      expect(refusals).toContain("spiffe://elsewhere.test/talon/default/worker/w4 is not spiffe://talon.test/talon/<cluster>/<role>/<node>")

      // Rotation: a new certificate written over the old files is what new connections see.
      const before = yield* servedSerial(coordinator.controlAddress, ca, worker)
      const next = makeLeaf(dir, "ca", "coordinator-next", { spiffe: id("coordinator", "c1") })
      fs.copyFileSync(next.keyPath, server.keyPath)
      fs.copyFileSync(next.certPath, server.certPath)
      const after = yield* servedSerial(coordinator.controlAddress, ca, worker).pipe(
        Effect.filterOrFail((serial) => serial !== before),
        Effect.retry({ times: 60, schedule: Schedule.spaced("100 millis") })
      )
      expect(after).not.toBe(before)
      const still = yield* ask(as(worker))
      expect(Either.isRight(still)).toBe(true)
    })
  )
})
