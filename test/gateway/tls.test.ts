/**
 * The gateway over HTTPS: a self-signed CA issues the gateway's certificate (for
 * 127.0.0.1), the official S3 and Azure SDKs trusting only that CA read and write through
 * it; a client without the CA is refused. A renewed certificate (from another CA) written
 * over the files is picked up without a restart; a broken pair sent with SIGHUP is refused
 * and the one in use keeps serving.
 */
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3"
import { BlobServiceClient, StorageSharedKeyCredential, type StoragePipelineOptions } from "@azure/storage-blob"
import { expect, layer } from "@effect/vitest"
import { NodeHttpHandler } from "@smithy/node-http-handler"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as https from "node:https"
import * as os from "node:os"
import * as path from "node:path"
import { Gateway } from "../../src/gateway/Gateway.js"
import { issueCert } from "../support/tlsCerts.js"
import { eventually } from "../support/eventually.js"
import { AZURE_KEY, gatewayFixture, S3_KEY } from "./fixtures/targets.js"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "talon-tls-"))
const issue = (name: string) => issueCert(dir, name)
const first = issue("first")
const second = issue("second")
const certFile = path.join(dir, "gateway.pem")
const keyFile = path.join(dir, "gateway.key")
fs.writeFileSync(certFile, first.cert)
fs.writeFileSync(keyFile, first.key)

const s3With = (url: string, ca: Buffer) =>
  new S3Client({
    endpoint: url,
    forcePathStyle: true,
    region: "us-east-1",
    credentials: S3_KEY,
    maxAttempts: 1,
    requestHandler: new NodeHttpHandler({ httpsAgent: new https.Agent({ ca, keepAlive: false }) })
  })

/** Which CA the gateway's certificate now chains to, by a fresh handshake. */
const issuer = (url: string) =>
  new Promise<string>((resolve, reject) => {
    const u = new URL(url)
    const req = https.request({ host: u.hostname, port: u.port, method: "GET", path: "/", rejectUnauthorized: false, agent: false }, (res) => {
      const cert = (res.socket as import("node:tls").TLSSocket).getPeerCertificate()
      res.resume()
      resolve(String(cert.issuer.CN ?? ""))
    })
    req.on("error", reject)
    req.end()
  })

/** Counts the "TLS reload refused" lines the gateway writes to stderr while `effect` runs. */
const countingRefusals = <A, E, R>(effect: (refusals: () => number) => Effect.Effect<A, E, R>) =>
  Effect.suspend(() => {
    let refusals = 0
    const original = process.stderr.write
    process.stderr.write = ((chunk: string | Uint8Array, ...rest: Array<never>) => {
      if (String(chunk).includes("TLS reload refused")) refusals++
      return original.call(process.stderr, chunk, ...rest)
    }) as typeof process.stderr.write
    return Effect.ensuring(
      effect(() => refusals),
      Effect.sync(() => (process.stderr.write = original))
    )
  })

layer(gatewayFixture("origin", { gateway: { tlsCert: certFile, tlsKey: keyFile } }), { excludeTestServices: true, timeout: "60 seconds" })(
  "gateway over HTTPS",
  (it) => {
    it.effect("the SDKs trusting the test CA read and write; a client without it is refused; renewals load without a restart", () =>
      Effect.gen(function* () {
        const gw = yield* Gateway
        expect(gw.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/)
        const s3 = s3With(gw.url, first.ca)
        const body = randomBytes(300_000)
        yield* Effect.promise(() => s3.send(new CreateBucketCommand({ Bucket: "tls" })))
        yield* Effect.promise(() => s3.send(new PutObjectCommand({ Bucket: "tls", Key: "obj.bin", Body: body })))
        const got = yield* Effect.promise(() => s3.send(new GetObjectCommand({ Bucket: "tls", Key: "obj.bin" })).then(async (o) => Buffer.from(await o.Body!.transformToByteArray())))
        expect(got.equals(body)).toBe(true)

        // tlsOptions reaches the SDK's core pipeline (its typings for the storage options omit it).
        const pipeline: StoragePipelineOptions = { retryOptions: { maxTries: 1 }, ...{ tlsOptions: { ca: first.ca.toString() } } }
        const azure = new BlobServiceClient(gw.azureUrl(AZURE_KEY.account), new StorageSharedKeyCredential(AZURE_KEY.account, AZURE_KEY.key), pipeline)
        const blob = azure.getContainerClient("tls").getBlockBlobClient("azure.bin")
        yield* Effect.promise(() => blob.uploadData(body))
        expect((yield* Effect.promise(() => blob.downloadToBuffer())).equals(body)).toBe(true)

        // Without the CA: a certificate error, not an answer.
        const untrusted = yield* Effect.promise(() =>
          new S3Client({ endpoint: gw.url, forcePathStyle: true, region: "us-east-1", credentials: S3_KEY, maxAttempts: 1 })
            .send(new GetObjectCommand({ Bucket: "tls", Key: "obj.bin" }))
            .then(() => "served", (e: Error) => e.message)
        )
        expect(untrusted).toMatch(/certificate/i)

        // Renewal: the second CA's certificate written over the files is served from then on.
        expect(yield* Effect.promise(() => issuer(gw.url))).toBe("first test CA")
        fs.writeFileSync(keyFile, second.key)
        fs.writeFileSync(certFile, second.cert)
        yield* eventually(Effect.promise(async () => expect(await issuer(gw.url)).toBe("second test CA")), { what: "the renewed certificate served", within: "30 seconds", every: "100 millis" })
        const renewed = s3With(gw.url, second.ca)
        const again = yield* Effect.promise(() => renewed.send(new GetObjectCommand({ Bucket: "tls", Key: "obj.bin" })).then(async (o) => Buffer.from(await o.Body!.transformToByteArray())))
        expect(again.equals(body)).toBe(true)

        // A broken pair (the first key with the second certificate) is refused, on SIGHUP and when the
        // file watch sees the key change: still the second.
        yield* countingRefusals((refusals) =>
          Effect.gen(function* () {
            fs.writeFileSync(keyFile, first.key)
            process.kill(process.pid, "SIGHUP")
            yield* eventually(Effect.sync(() => expect(refusals()).toBeGreaterThanOrEqual(2)), { what: "the SIGHUP and file-change reloads refused" })
          })
        )
        expect(yield* Effect.promise(() => issuer(gw.url))).toBe("second test CA")
        fs.rmSync(dir, { recursive: true, force: true })
      })
    )
  }
)

