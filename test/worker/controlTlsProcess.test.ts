/**
 * A real `talon worker` process joins a coordinator over control mTLS with a trust domain and
 * serves its data port over TLS; a TalonClient with its own certificate reads through both:
 * the coordinator (no origin credentials) answers the stat by asking the worker over TLS, the
 * client reads the bytes from the worker over TLS. A client without a certificate is refused.
 */
import { Effect, Exit, Scope } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { createTalonClient } from "../../src/client/TalonClient.js"
import { makeCoordinator } from "../../src/coordinator/Coordinator.js"
import { makeCa, makeLeaf } from "../support/controlPki.js"
import { eventuallyAsync } from "../support/eventually.js"
import { pattern } from "./support/dirBackend.js"
import { makeCleanup, tempDir } from "./support/harness.js"
import { putObjectAt, startOriginStub } from "./support/originFiles.js"
import { spawnWorker, stubCredentials } from "./support/workerProcess.js"

const DOMAIN = "talon.test"
const id = (role: string, node: string) => `spiffe://${DOMAIN}/talon/default/${role}/${node}`

const cleanup = makeCleanup()
afterAll(() => cleanup.run())

describe("talon worker over control mTLS (process)", () => {
  it("joins over mTLS and serves a TalonClient's stat and read over TLS", async () => {
    const dir = await tempDir(cleanup, "talon-tls-process-")
    const ca = makeCa(dir, "ca")
    const coordinatorLeaf = makeLeaf(dir, "ca", "coordinator", { spiffe: id("coordinator", "c1") })
    const workerLeaf = makeLeaf(dir, "ca", "worker", { spiffe: id("worker", "w1") })
    const clientLeaf = makeLeaf(dir, "ca", "client", { spiffe: id("client", "reader") })

    const stub = await startOriginStub(cleanup, "talon-stub-")
    const data = pattern(300 * 1024 + 5, 11)
    await putObjectAt(stub.root, "tls-bucket", "obj.bin", data)

    const scope = Effect.runSync(Scope.make())
    cleanup.add(() => Effect.runPromise(Scope.close(scope, Exit.void)))
    const coordinator = await Effect.runPromise(
      makeCoordinator({
        listen: "127.0.0.1:0",
        adminListen: "127.0.0.1:0",
        heartbeatIntervalMs: 200,
        objectMetadata: "workers",
        controlTlsCertPath: coordinatorLeaf.certPath,
        controlTlsKeyPath: coordinatorLeaf.keyPath,
        controlTlsCaCertPath: ca,
        controlTlsTrustDomain: DOMAIN,
        dataTls: true
      }).pipe(Scope.extend(scope))
    )

    const cache = await tempDir(cleanup, "talon-cache-")
    const worker = spawnWorker(
      cleanup,
      [
        "--id", "w1",
        "--coordinator", coordinator.controlAddress,
        "--data-addr", "127.0.0.1:0",
        "--admin-addr", "127.0.0.1:0",
        "--cache-dir", cache,
        "--block-size", "128K",
        "--page-size", "32K",
        "--capacity", "16M",
        "--heartbeat-interval-ms", "200",
        "--control-tls-cert-path", workerLeaf.certPath,
        "--control-tls-key-path", workerLeaf.keyPath,
        "--control-tls-ca-cert-path", ca,
        "--control-tls-trust-domain", DOMAIN,
        "--data-tls"
      ],
      { TALON_S3_ENDPOINT: stub.url, ...stubCredentials }
    )
    await worker.waitFor(/worker data listener on 127\.0\.0\.1:\d+ \(portable plane, pipelined mode, TLS\)/)
    await worker.waitFor(/worker w1 joined \(cluster default, data 127\.0\.0\.1:\d+, coordinator /)

    const tlsOptions = {
      controlTlsCertPath: clientLeaf.certPath,
      controlTlsKeyPath: clientLeaf.keyPath,
      controlTlsCaCertPath: ca,
      controlTlsTrustDomain: DOMAIN
    }
    const client = createTalonClient({ coordinator: coordinator.controlAddress, blockSize: 128 * 1024, dataTls: true, ...tlsOptions })
    cleanup.add(() => client.close())
    const uri = "s3://tls-bucket/obj.bin"
    // "joined" is logged on the join's reply; the coordinator's membership view (the workers it
    // forwards stats to) takes the member in just after, so the first stat may come too early.
    const stat = await eventuallyAsync(() => client.stat(uri), { what: "the coordinator answering the stat through its worker", within: "20 seconds", every: "100 millis" })
    expect(stat.size).toBe(data.length)
    const bytes = await client.read(uri, 1000, 200_000)
    expect(Buffer.from(bytes).equals(data.subarray(1000, 201_000))).toBe(true)

    // Without a client certificate the client dials plain TCP, which the TLS listener refuses.
    const anonymous = createTalonClient({ coordinator: coordinator.controlAddress, blockSize: 128 * 1024, controlTimeoutMs: 2000, ...tlsOptions, controlTlsCertPath: undefined, controlTlsKeyPath: undefined })
    cleanup.add(() => anonymous.close())
    await expect(anonymous.stat(uri)).rejects.toThrow()

    worker.child.kill("SIGTERM")
    expect(await worker.exited).toBe(0)
  }, 120_000)
})
