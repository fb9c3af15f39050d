/**
 * HTTPS on the admin endpoints (worker and coordinator): served from a certificate and key
 * given as settings, verified by a client that trusts only the test CA, refused to plain
 * HTTP, and re-read when the files change (a renewal from another CA is picked up without a
 * restart). A half-configured pair is refused at start with the setting to fix.
 */
import * as fs from "node:fs"
import * as https from "node:https"
import * as os from "node:os"
import * as path from "node:path"
import type { TLSSocket } from "node:tls"
import { Effect, Exit } from "effect"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { resolveCoordinatorOptions } from "../../src/coordinator/config.js"
import { issueCert } from "../support/tlsCerts.js"
import { makeDirBackend } from "../worker/support/dirBackend.js"
import { makeCleanup, startWorker, tempDir } from "../worker/support/harness.js"
import { testCoordinator } from "../coordinator/fixtures/harness.js"
import { eventuallyAsync } from "../support/eventually.js"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "talon-admin-tls-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))
const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const first = issueCert(dir, "first")
const second = issueCert(dir, "second")

/** GET over HTTPS trusting only `ca`: status, body and the issuer of the certificate served. */
const get = (address: string, p: string, ca: Buffer) =>
  new Promise<{ status: number; body: string; issuer: string }>((resolve, reject) => {
    const i = address.lastIndexOf(":")
    const req = https.get({ host: address.slice(0, i), port: Number(address.slice(i + 1)), path: p, ca, agent: false }, (res) => {
      const issuer = String((res.socket as TLSSocket).getPeerCertificate().issuer?.CN ?? "")
      let body = ""
      res.on("data", (d: Buffer) => (body += d.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body, issuer }))
    })
    req.on("error", reject)
  })

const plainRefused = async (address: string): Promise<boolean> => {
  try {
    const res = await fetch(`http://${address}/healthz`)
    return res.status >= 400
  } catch {
    return true
  }
}

/** Polls until the endpoint serves a certificate from `issuer` (the files are watched, polled each second). */
const servesFrom = (address: string, ca: Buffer, issuer: string) =>
  eventuallyAsync(
    async () => {
      const r = await get(address, "/healthz", ca)
      expect(r.issuer).toBe(issuer)
      return r
    },
    { what: `${address} serving a certificate from ${issuer}`, within: "20 seconds", every: "200 millis" }
  )

const pairFiles = (name: string, issued: typeof first) => {
  const cert = path.join(dir, `${name}-served.pem`)
  const key = path.join(dir, `${name}-served.key`)
  fs.writeFileSync(cert, issued.cert)
  fs.writeFileSync(key, issued.key)
  return { cert, key }
}

const renew = (files: { cert: string; key: string }, issued: typeof first) => {
  // Replace, as a certificate tool does (new inode), key first so the pair is never mismatched for long.
  for (const [file, bytes] of [[files.key, issued.key], [files.cert, issued.cert]] as const) {
    fs.writeFileSync(`${file}.new`, bytes)
    fs.renameSync(`${file}.new`, file)
  }
}

describe("admin endpoints over HTTPS", () => {
  it("worker: /healthz and /metrics over TLS, plain HTTP refused, a renewed pair picked up", async () => {
    const files = pairFiles("worker", first)
    const root = await tempDir(cleanup, "talon-origin-")
    const w = await startWorker(cleanup, makeDirBackend(root).layer, {
      cacheDirs: [await tempDir(cleanup, "talon-cache-")],
      adminTlsCert: files.cert,
      adminTlsKey: files.key
    })
    const address = `127.0.0.1:${w.worker.adminPort}`
    const health = await get(address, "/healthz", first.ca)
    expect(health).toMatchObject({ status: 200, body: "ok\n", issuer: "first test CA" })
    expect((await get(address, "/metrics", first.ca)).body).toContain("talon_worker_")
    expect(await plainRefused(address)).toBe(true)
    // A client that does not trust the CA is refused the handshake.
    await expect(get(address, "/healthz", second.ca)).rejects.toThrow()
    renew(files, second)
    expect((await servesFrom(address, second.ca, "second test CA")).status).toBe(200)
  }, 60_000)

  it("coordinator: /healthz and /api/v1/cluster over TLS, a renewed pair picked up", async () => {
    const files = pairFiles("coordinator", first)
    await Effect.runPromise(
      testCoordinator({ adminTlsCert: files.cert, adminTlsKey: files.key }, (c) =>
        Effect.promise(async () => {
          expect(await get(c.adminAddress, "/healthz", first.ca)).toMatchObject({ status: 200, body: "ok\n" })
          expect((await get(c.adminAddress, "/api/v1/cluster", first.ca)).status).toBe(200)
          expect(await plainRefused(c.adminAddress)).toBe(true)
          renew(files, second)
          expect((await servesFrom(c.adminAddress, second.ca, "second test CA")).status).toBe(200)
        })
      )
    )
  }, 60_000)

  it("a certificate without its key, or a key that is not the certificate's, is refused at start", async () => {
    const half = await Effect.runPromiseExit(resolveCoordinatorOptions({ adminTlsCert: path.join(dir, "first.pem") }))
    expect(Exit.isFailure(half) && String(half.cause)).toMatch(/TALON_COORDINATOR_ADMIN_TLS_KEY.*both a certificate and a key/s)
    const mismatched = await Effect.runPromiseExit(
      testCoordinator({ adminTlsCert: path.join(dir, "first.pem"), adminTlsKey: path.join(dir, "second.key") }, () => Effect.void)
    )
    expect(Exit.isFailure(mismatched) && String(mismatched.cause)).toMatch(/do not form a usable pair/)
  })
})
