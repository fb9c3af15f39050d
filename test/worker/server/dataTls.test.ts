/**
 * The data port over TLS (--data-tls, with the control TLS files): a client with the CA and a
 * certificate reads the right bytes (a whole block and a small range, pinned and not); a client
 * without the CA, one without a certificate (the worker demands one: mTLS) and a plain TCP
 * client are refused; a certificate rotated on disk is what new connections are shown.
 */
import * as fs from "node:fs"
import * as tls from "node:tls"
import { createHash } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Effect } from "effect"
import { type FetchResult, WorkerPool } from "../../../src/client/WorkerPool.js"
import { resolveWorkerSettings } from "../../../src/worker/config.js"
import { Backend, type ObjectId } from "../../../src/core/ids.js"
import type { ControlTlsFiles } from "../../../src/transport/controlTls.js"
import { makeCa, makeLeaf } from "../../support/controlPki.js"
import { pattern, startDirWorker } from "../support/dirBackend.js"
import { makeCleanup, tempDir } from "../support/harness.js"

const KiB = 1024
const object: ObjectId = { backend: Backend.S3, bucket: "bkt", objectPath: "tls.bin" }
const data = pattern(1024 * KiB + 123, 7)

const cleanup = makeCleanup()
let address = ""
let dir = ""
let ca = ""
let client: { certPath: string; keyPath: string }
let server: { certPath: string; keyPath: string }

beforeAll(async () => {
  dir = await tempDir(cleanup, "talon-data-tls-")
  ca = makeCa(dir, "ca")
  makeCa(dir, "other-ca")
  server = makeLeaf(dir, "ca", "worker")
  client = makeLeaf(dir, "ca", "client")
  const { w, put } = await startDirWorker(cleanup, {
    blockSize: 1024 * KiB,
    pageSize: 0,
    dataTls: true,
    controlTlsCertPath: server.certPath,
    controlTlsKeyPath: server.keyPath,
    controlTlsCaCertPath: ca
  })
  await put("tls.bin", data)
  address = `127.0.0.1:${w.worker.dataPort}`
})
afterAll(() => cleanup.run())

const poolWith = (files: ControlTlsFiles | undefined) => {
  const pool = new WorkerPool({ connectionsPerWorker: 2, requestTimeout: "10 seconds", connectTimeout: "5 seconds", maxRequestBytes: 2048 * KiB, tls: files })
  cleanup.add(async () => pool.close())
  return pool
}

const fetchRange = (pool: WorkerPool, offset: number, length: number, version?: string) =>
  new Promise<FetchResult>((resolve) => pool.fetch(address, object, offset, length, resolve, version))

const bytesOf = (r: FetchResult): Buffer => {
  if (!r.ok) throw new Error(`read failed: ${r.error.message}`)
  const out = Buffer.concat(r.payload.views)
  r.payload.release()
  return out
}

/** The serial of the certificate a new TLS connection to the data port is shown. */
const servedSerial = () =>
  new Promise<string>((resolve, reject) => {
    const [host, port] = address.split(":")
    const socket = tls.connect({
      host,
      port: Number(port),
      ca: fs.readFileSync(ca),
      cert: fs.readFileSync(client.certPath),
      key: fs.readFileSync(client.keyPath)
    })
    socket.once("secureConnect", () => {
      resolve(socket.getPeerCertificate().serialNumber)
      socket.destroy()
    })
    socket.once("error", reject)
  })

describe("data-plane TLS", () => {
  it("serves the right bytes over TLS: a whole block, its tail past the block, small and pinned ranges", async () => {
    const pool = poolWith({ ...client, caCertPath: ca })
    const version = createHash("md5").update(data).digest("hex")
    const reads = await Promise.all([
      fetchRange(pool, 0, 1024 * KiB),
      fetchRange(pool, 1024 * KiB, 123),
      fetchRange(pool, 4097, 300),
      fetchRange(pool, 9000, 4 * KiB, version)
    ])
    expect(bytesOf(reads[0]!).equals(data.subarray(0, 1024 * KiB))).toBe(true)
    expect(bytesOf(reads[1]!).equals(data.subarray(1024 * KiB))).toBe(true)
    expect(bytesOf(reads[2]!).equals(data.subarray(4097, 4397))).toBe(true)
    expect(bytesOf(reads[3]!).equals(data.subarray(9000, 9000 + 4 * KiB))).toBe(true)
  })

  it("refuses a client without the CA, one without a certificate, and plain TCP", async () => {
    const noCa = await fetchRange(poolWith({ ...client, caCertPath: `${dir}/other-ca.pem` }), 0, 100)
    expect(noCa.ok).toBe(false)
    if (!noCa.ok) expect(noCa.error.message).toMatch(/certificate|self.signed|verify/i)

    // No client certificate: the handshake completes, then the worker drops the connection unanswered.
    const noCert = await new Promise<string>((resolve) => {
      const [host, port] = address.split(":")
      const s = tls.connect({ host, port: Number(port), ca: fs.readFileSync(ca) })
      s.on("secureConnect", () => s.write(Buffer.alloc(32)))
      s.on("data", () => resolve("answered"))
      s.on("error", (e) => resolve(`error: ${e.message}`))
      s.on("close", () => resolve("closed"))
    })
    expect(noCert).not.toBe("answered")

    const plain = await fetchRange(poolWith(undefined), 0, 100)
    expect(plain.ok).toBe(false)
  })

  it("refuses to start without the certificate to present, or with several loops", async () => {
    const noCert = await Effect.runPromise(Effect.flip(resolveWorkerSettings({ dataTls: true })))
    expect(String(noCert)).toContain("needs --control-tls-cert-path and --control-tls-key-path")
    const loops = await Effect.runPromise(Effect.flip(resolveWorkerSettings({ dataTls: true, loops: 2, controlTlsCertPath: server.certPath, controlTlsKeyPath: server.keyPath })))
    expect(String(loops)).toContain("--loops 1")
  })

  it("shows new connections a certificate rotated on disk, without a restart", async () => {
    const before = await servedSerial()
    const next = makeLeaf(dir, "ca", "worker-next")
    fs.copyFileSync(next.keyPath, server.keyPath)
    fs.copyFileSync(next.certPath, server.certPath)
    let after = before
    // The server polls its files (once a second); a client waits for the change as an operator would.
    for (let i = 0; i < 100 && after === before; i++) {
      await new Promise((r) => setTimeout(r, 50))
      after = await servedSerial()
    }
    expect(after).not.toBe(before)
    // Reads over a fresh pool still verify against the same CA.
    const r = await fetchRange(poolWith({ ...client, caCertPath: ca }), 100, 1000)
    expect(bytesOf(r).equals(data.subarray(100, 1100))).toBe(true)
  })
})
