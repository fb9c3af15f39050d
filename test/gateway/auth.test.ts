/**
 * Auth at the gateway: official SDK clients with the configured credentials are
 * served, wrong or missing signatures are refused with the provider's 403, skewed and
 * expired signatures too; the origin only ever sees the gateway's own identity. The
 * verifiers are also checked against independent signers (smithy's SigV4 as the S3
 * backend uses it, the backend's Shared Key) over random requests.
 */
import { GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client, type S3ServiceException } from "@aws-sdk/client-s3"
import { Sha256 } from "@aws-crypto/sha256-js"
import { BlobServiceClient, type RestError, StorageSharedKeyCredential } from "@azure/storage-blob"
import { describe, expect, it, layer } from "@effect/vitest"
import { SignatureV4 } from "@smithy/signature-v4"
import { Clock, Context, Effect, Layer, Redacted, TestClock, TestContext } from "effect"
import fc from "fast-check"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { sharedKeyAuthorization } from "../../src/backend/azureSharedKey.js"
import * as Router from "../../src/backend/Router.js"
import * as S3Backend from "../../src/backend/S3.js"
import { verifySharedKey, verifySigV4 } from "../../src/gateway/auth.js"
import { Gateway } from "../../src/gateway/Gateway.js"
import { OriginStub } from "../../src/origin/OriginStub.js"
import { raw, tempDir } from "../origin/fixtures/testOrigin.js"
import { failure, send } from "../support/checks.js"
import { blobServiceFor, s3ClientFor } from "../support/sdkSuite.js"
import { AZURE_KEY, authOn, gatewayEndpoint, gatewayFixture, S3_KEY, TestOriginStub } from "./fixtures/targets.js"

const BUCKET = "auth"

layer(gatewayFixture("origin"), { excludeTestServices: true })("gateway auth (origin route)", (it) => {
  const setup = Effect.gen(function* () {
    const gw = yield* Gateway
    const origin = yield* TestOriginStub
    yield* Effect.promise(() => raw(origin.url, "PUT", `/${BUCKET}`))
    yield* Effect.promise(() => raw(origin.url, "PUT", `/${BUCKET}/k.txt`, {}, "hello"))
    return { gw, origin }
  })

  it.effect("S3: the configured key is served; a wrong secret, an unknown key and no signature get 403", () =>
    Effect.gen(function* () {
      const { gw } = yield* setup
      const good = s3ClientFor(gatewayEndpoint(gw))
      const out = yield* send(() => good.send(new GetObjectCommand({ Bucket: BUCKET, Key: "k.txt" })))
      expect(yield* send(() => out.Body!.transformToString())).toBe("hello")

      const client = (accessKeyId: string, secretAccessKey: string) =>
        new S3Client({ endpoint: gw.url, forcePathStyle: true, region: "us-east-1", credentials: { accessKeyId, secretAccessKey }, maxAttempts: 1 })
      const badSecret = yield* failure<S3ServiceException>(() =>
        client(S3_KEY.accessKeyId, "not-the-secret").send(new GetObjectCommand({ Bucket: BUCKET, Key: "k.txt" }))
      )
      expect(badSecret.$metadata.httpStatusCode).toBe(403)
      expect(badSecret.name).toBe("SignatureDoesNotMatch")
      expect(badSecret.$metadata.requestId).toMatch(/^[0-9A-F]{16}$/)
      const badKey = yield* failure<S3ServiceException>(() =>
        client("someone-else", S3_KEY.secretAccessKey).send(new PutObjectCommand({ Bucket: BUCKET, Key: "k.txt", Body: "evil" }))
      )
      expect(badKey.$metadata.httpStatusCode).toBe(403)
      expect(badKey.name).toBe("InvalidAccessKeyId")
      // HEAD has no body: the status says it.
      const badHead = yield* failure<S3ServiceException>(() =>
        client(S3_KEY.accessKeyId, "wrong").send(new HeadObjectCommand({ Bucket: BUCKET, Key: "k.txt" }))
      )
      expect(badHead.$metadata.httpStatusCode).toBe(403)

      const unsigned = yield* Effect.promise(() => raw(gw.url, "GET", `/${BUCKET}/k.txt`))
      expect(unsigned.status).toBe(403)
      expect(unsigned.body.toString()).toContain("<Code>AccessDenied</Code>")
      expect(unsigned.body.toString()).toContain(`<RequestId>${unsigned.headers["x-amz-request-id"]}</RequestId>`)
      // The refused write did not happen.
      const still = yield* send(() => good.send(new GetObjectCommand({ Bucket: BUCKET, Key: "k.txt" })))
      expect(yield* send(() => still.Body!.transformToString())).toBe("hello")
    })
  )

  it.effect("S3: a request signed 20 minutes ago is refused with RequestTimeTooSkewed", () =>
    Effect.gen(function* () {
      const { gw } = yield* setup
      const sign = S3Backend.makeS3Signer(S3Backend.localOptions(gw.url, S3_KEY))
      const old = yield* send(() => sign({ method: "GET", bucket: BUCKET, key: "k.txt", query: {}, headers: {} }, new Date(Date.now() - 20 * 60_000)))
      const r = yield* send(() => raw(gw.url, "GET", old.path, old.headers))
      expect(r.status).toBe(403)
      expect(r.body.toString()).toContain("<Code>RequestTimeTooSkewed</Code>")
      const now = yield* send(() => sign({ method: "GET", bucket: BUCKET, key: "k.txt", query: {}, headers: {} }))
      const ok = yield* send(() => raw(gw.url, "GET", now.path, now.headers))
      expect(ok.status).toBe(200)
      expect(ok.body.toString()).toBe("hello")
    })
  )

  it.effect("S3: a presigned URL is served until it expires; a tampered one is refused", () =>
    Effect.gen(function* () {
      const { gw } = yield* setup
      const port = Number(new URL(gw.url).port)
      const signer = new SignatureV4({ credentials: S3_KEY, region: "us-east-1", service: "s3", sha256: Sha256, uriEscapePath: false })
      const presign = (date: Date, expiresIn: number) =>
        signer.presign(
          { method: "GET", protocol: "http:", hostname: "127.0.0.1", port, path: `/${BUCKET}/k.txt`, query: {}, headers: { host: `127.0.0.1:${port}`, "x-amz-content-sha256": "UNSIGNED-PAYLOAD" } },
          { signingDate: date, expiresIn }
        )
      const target = (req: { query?: Record<string, unknown> }) =>
        `/${BUCKET}/k.txt?` + Object.entries(req.query ?? {}).map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`).join("&")
      const fresh = yield* send(() => presign(new Date(), 300))
      const ok = yield* send(() => raw(gw.url, "GET", target(fresh)))
      expect(ok.status).toBe(200)
      expect(ok.body.toString()).toBe("hello")
      const tampered = yield* send(() => raw(gw.url, "GET", target(fresh).replace("k.txt", "K.txt")))
      expect(tampered.status).toBe(403)
      expect(tampered.body.toString()).toContain("<Code>SignatureDoesNotMatch</Code>")
      const expired = yield* send(() => presign(new Date(Date.now() - 600_000), 60))
      const late = yield* send(() => raw(gw.url, "GET", target(expired)))
      expect(late.status).toBe(403)
      expect(late.body.toString()).toContain("Request has expired")
    })
  )

  it.effect("S3: a presigned lifetime over 7 days and a signature that leaves out host are refused", () =>
    Effect.gen(function* () {
      const { gw } = yield* setup
      const port = Number(new URL(gw.url).port)
      const signer = new SignatureV4({ credentials: S3_KEY, region: "us-east-1", service: "s3", sha256: Sha256, uriEscapePath: false })
      const target = (req: { query?: Record<string, unknown> }) =>
        `/${BUCKET}/k.txt?` + Object.entries(req.query ?? {}).map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`).join("&")
      const request = (headers: Record<string, string>) =>
        ({ method: "GET", protocol: "http:", hostname: "127.0.0.1", port, path: `/${BUCKET}/k.txt`, query: {}, headers: { ...headers, "x-amz-content-sha256": "UNSIGNED-PAYLOAD" } })
      const week = 7 * 24 * 3600
      const atLimit = yield* send(() => signer.presign(request({ host: `127.0.0.1:${port}` }), { expiresIn: week }))
      const ok = yield* send(() => raw(gw.url, "GET", target(atLimit)))
      expect(ok.status, ok.body.toString()).toBe(200)
      expect(ok.body.toString()).toBe("hello")
      // smithy will not presign past a week, so the lifetime is edited (the check comes before the signature's).
      const long = yield* send(() => raw(gw.url, "GET", target(atLimit).replace(`X-Amz-Expires=${week}`, `X-Amz-Expires=${week + 1}`)))
      expect(long.status).toBe(400)
      expect(long.body.toString()).toContain("<Code>AuthorizationQueryParametersError</Code>")
      expect(long.body.toString()).toContain("7 days")
      // The same request signed without host in SignedHeaders: valid HMAC, refused anyway.
      const hostless = yield* send(() => signer.presign(request({}), { expiresIn: 300 }))
      expect(String(hostless.query?.["X-Amz-SignedHeaders"])).not.toContain("host")
      const noHost = yield* send(() => raw(gw.url, "GET", target(hostless)))
      expect(noHost.status).toBe(403)
      expect(noHost.body.toString()).toContain("must sign the &apos;host&apos; header")
    })
  )

  it.effect("Azure: the configured account key is served; a wrong key and no signature get 403 AuthenticationFailed", () =>
    Effect.gen(function* () {
      const { gw } = yield* setup
      const good = blobServiceFor(gatewayEndpoint(gw)).getContainerClient(BUCKET).getBlockBlobClient("k.txt")
      expect((yield* send(() => good.downloadToBuffer())).toString()).toBe("hello")
      const wrongKey = new BlobServiceClient(
        gw.azureUrl(AZURE_KEY.account),
        new StorageSharedKeyCredential(AZURE_KEY.account, Buffer.from("another key entirely, 32 bytes!!").toString("base64")),
        { retryOptions: { maxTries: 1 } }
      )
      const refused = yield* failure<RestError>(() => wrongKey.getContainerClient(BUCKET).getBlockBlobClient("k.txt").download())
      expect(refused.statusCode).toBe(403)
      expect(refused.code).toBe("AuthenticationFailed")
      const upload = yield* failure<RestError>(() => wrongKey.getContainerClient(BUCKET).getBlockBlobClient("k.txt").upload("evil", 4))
      expect(upload.statusCode).toBe(403)
      const unsigned = yield* send(() => raw(gw.url, "GET", `/${AZURE_KEY.account}/${BUCKET}/k.txt`, { "x-ms-version": "2021-12-02" }))
      expect(unsigned.status).toBe(403)
      expect(unsigned.headers["x-ms-error-code"]).toBe("AuthenticationFailed")
      expect(unsigned.headers["x-ms-version"]).toBe("2021-12-02")
      expect((yield* send(() => good.downloadToBuffer())).toString()).toBe("hello")
    })
  )
})

/** An HTTP proxy in front of the origin that records each request's Authorization header. */
const recordingProxy = (target: string) =>
  Effect.acquireRelease(
    Effect.promise(
      () =>
        new Promise<{ url: string; seen: Array<string>; server: http.Server }>((resolve) => {
          const seen: Array<string> = []
          const to = new URL(target)
          const server = http.createServer((req, res) => {
            seen.push(String(req.headers.authorization ?? ""))
            const up = http.request(
              { host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers },
              (r) => {
                res.writeHead(r.statusCode ?? 502, r.headers)
                r.pipe(res)
              }
            )
            req.pipe(up)
          })
          server.listen(0, "127.0.0.1", () =>
            resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server })
          )
        })
    ),
    ({ server }) => Effect.promise(() => new Promise<void>((done) => { server.close(() => done()); server.closeAllConnections() }))
  )

describe("gateway origin identity", () => {
  it.scopedLive("the origin sees the gateway's own credentials, never the client's", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const origin = yield* OriginStub.make({ root: dir })
      const proxy = yield* recordingProxy(origin.url)
      yield* Effect.promise(() => raw(origin.url, "PUT", `/${BUCKET}`))
      const gw = yield* Layer.build(
        Gateway.layerDeployment({ gateway: { listen: "127.0.0.1:0", ...authOn }, route: "origin", router: Router.localOptions(proxy.url) })
      ).pipe(Effect.map((ctx) => Context.get(ctx, Gateway)))
      const s3 = s3ClientFor(gatewayEndpoint(gw))
      yield* send(() => s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: "id.txt", Body: "who am i" })))
      const got = yield* send(() => s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: "id.txt" })))
      expect(yield* send(() => got.Body!.transformToString())).toBe("who am i")
      const blob = blobServiceFor(gatewayEndpoint(gw)).getContainerClient(BUCKET).getBlockBlobClient("id2.txt")
      yield* send(() => blob.upload("azure", 5))
      expect((yield* send(() => blob.downloadToBuffer())).toString()).toBe("azure")

      expect(proxy.seen.length).toBeGreaterThanOrEqual(4)
      for (const a of proxy.seen) {
        expect(a).not.toContain(S3_KEY.accessKeyId)
        expect(a).not.toContain(AZURE_KEY.account)
        expect(a).toMatch(/^(AWS4-HMAC-SHA256 Credential=talon\/|SharedKey devstoreaccount1:)/)
      }
      expect(proxy.seen.some((a) => a.startsWith("AWS4"))).toBe(true)
      expect(proxy.seen.some((a) => a.startsWith("SharedKey"))).toBe(true)
    })
  )
})

const headersOf = (h: Record<string, string>) => Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]))

describe("signature verifiers against independent signers", () => {
  const segment = fc.string({ minLength: 1, maxLength: 12, unit: fc.constantFrom("a", "Z", "0", " ", "+", "%", "=", "&", "~", "ü", "日", "🚀", "!", "*", "(") })
  const key = fc.array(segment, { minLength: 1, maxLength: 4 }).map((parts) => parts.join("/"))
  const query = fc.dictionary(fc.constantFrom("prefix", "marker", "max-keys", "delimiter", "x-id"), segment, { maxKeys: 3 })

  it.effect("SigV4: smithy-signed requests verify, and fail under any other secret", () =>
    Effect.promise(() =>
      fc.assert(
        fc.asyncProperty(key, query, fc.constantFrom("GET", "HEAD", "PUT", "DELETE"), async (k, q, method) => {
          const options = S3Backend.localOptions("http://127.0.0.1:9000", S3_KEY)
          const req = await S3Backend.makeS3Signer(options)({ method, bucket: "bucket", key: k, query: q, headers: {} })
          const at = req.path.indexOf("?")
          const received = {
            method,
            rawPath: at < 0 ? req.path : req.path.slice(0, at),
            rawQuery: at < 0 ? "" : req.path.slice(at + 1),
            headers: headersOf(req.headers)
          }
          const expectation = {
            accessKeyId: S3_KEY.accessKeyId,
            secretAccessKey: Redacted.make(S3_KEY.secretAccessKey),
            region: "us-east-1",
            nowMs: Date.now(),
            clockSkewMs: 900_000
          }
          expect(verifySigV4(received, expectation)).toEqual({ ok: true })
          const wrong = verifySigV4(received, { ...expectation, secretAccessKey: Redacted.make("other") })
          expect(wrong.ok ? "ok" : wrong.code).toBe("SignatureDoesNotMatch")
        }),
        { numRuns: 60 }
      )
    )
  )

  // The verifier keeps signing keys per secret, day, region and service: these check that a warm
  // cache never lets a wrong signature, another key's signature or another day's scope through.
  const signedAt = (secret: { accessKeyId: string; secretAccessKey: string }, at: Date, headers: Record<string, string> = {}) =>
    S3Backend.makeS3Signer(S3Backend.localOptions("http://127.0.0.1:9000", secret))({ method: "GET", bucket: "bucket", key: "a/b c.bin", query: {}, headers }, at).then((req) => {
      const q = req.path.indexOf("?")
      return { method: "GET", rawPath: q < 0 ? req.path : req.path.slice(0, q), rawQuery: q < 0 ? "" : req.path.slice(q + 1), headers: headersOf(req.headers) }
    })
  const expecting = (secret: { accessKeyId: string; secretAccessKey: string }, nowMs: number) => ({
    accessKeyId: secret.accessKeyId,
    secretAccessKey: Redacted.make(secret.secretAccessKey),
    region: "us-east-1",
    nowMs,
    clockSkewMs: 900_000
  })
  const codeOf = (r: ReturnType<typeof verifySigV4>) => (r.ok ? "ok" : r.code)
  const tamper = (req: Awaited<ReturnType<typeof signedAt>>, edit: (auth: string) => string) => ({ ...req, headers: { ...req.headers, authorization: edit(req.headers.authorization as string) } })

  it.effect("SigV4 with a warm signing key: a changed signature, range or header is refused; an upper-case signature is the same", () =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const req = yield* Effect.promise(() => signedAt(S3_KEY, new Date(now), { range: "bytes=0-65535" }))
      const expect_ = expecting(S3_KEY, now)
      expect(codeOf(verifySigV4(req, expect_))).toBe("ok")
      expect(codeOf(verifySigV4(req, expect_))).toBe("ok")
      const flipped = tamper(req, (a) => a.replace(/Signature=([0-9a-f])/, (_m, c: string) => `Signature=${c === "0" ? "1" : "0"}`))
      expect(codeOf(verifySigV4(flipped, expect_))).toBe("SignatureDoesNotMatch")
      expect(codeOf(verifySigV4(tamper(req, (a) => a.slice(0, -1)), expect_))).toBe("SignatureDoesNotMatch")
      expect(codeOf(verifySigV4(tamper(req, (a) => `${a}00`), expect_))).toBe("SignatureDoesNotMatch")
      expect(codeOf(verifySigV4(tamper(req, (a) => a.replace(/Signature=(.*)$/, (_m, sig: string) => `Signature=${sig.toUpperCase()}`)), expect_))).toBe("ok")
      expect(codeOf(verifySigV4({ ...req, headers: { ...req.headers, range: "bytes=0-65536" } }, expect_))).toBe("SignatureDoesNotMatch")
      expect(codeOf(verifySigV4({ ...req, rawPath: req.rawPath.replace("a/", "A/") }, expect_))).toBe("SignatureDoesNotMatch")
    })
  )

  it.effect("SigV4 with two keys in turn: each verifies under its own secret only", () =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const second = { accessKeyId: "SECONDKEYEXAMPLE", secretAccessKey: "second-secret-of-forty-characters-000000" }
      for (let i = 0; i < 3; i++) {
        const one = yield* Effect.promise(() => signedAt(S3_KEY, new Date(now)))
        const two = yield* Effect.promise(() => signedAt(second, new Date(now)))
        expect(codeOf(verifySigV4(one, expecting(S3_KEY, now)))).toBe("ok")
        expect(codeOf(verifySigV4(two, expecting(second, now)))).toBe("ok")
        expect(codeOf(verifySigV4(two, { ...expecting(second, now), secretAccessKey: Redacted.make(S3_KEY.secretAccessKey) }))).toBe("SignatureDoesNotMatch")
        expect(codeOf(verifySigV4(one, expecting(second, now)))).toBe("InvalidAccessKeyId")
      }
    })
  )

  it.effect("SigV4 across midnight (TestClock): the new day's scope verifies, yesterday's signature past the skew is refused", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.UTC(2026, 11, 4, 23, 59, 58))
      const before = yield* Clock.currentTimeMillis
      const late = yield* Effect.promise(() => signedAt(S3_KEY, new Date(before)))
      expect(late.headers["x-amz-date"]).toBe("20261204T235958Z")
      expect(codeOf(verifySigV4(late, expecting(S3_KEY, before)))).toBe("ok")
      yield* TestClock.adjust("4 seconds")
      const after = yield* Clock.currentTimeMillis
      const early = yield* Effect.promise(() => signedAt(S3_KEY, new Date(after)))
      expect(early.headers.authorization).toContain("/20261205/us-east-1/s3/aws4_request")
      expect(codeOf(verifySigV4(early, expecting(S3_KEY, after)))).toBe("ok")
      // Yesterday's request is still inside the skew window, under yesterday's key.
      expect(codeOf(verifySigV4(late, expecting(S3_KEY, after)))).toBe("ok")
      // A signature computed with the old day's key but claiming the new day's scope does not verify.
      const mixed = { ...late, headers: { ...late.headers, authorization: (late.headers.authorization as string).replace("/20261204/", "/20261205/"), "x-amz-date": "20261205T000002Z" } }
      expect(codeOf(verifySigV4(mixed, expecting(S3_KEY, after)))).toBe("SignatureDoesNotMatch")
      yield* TestClock.adjust("20 minutes")
      expect(codeOf(verifySigV4(late, expecting(S3_KEY, yield* Clock.currentTimeMillis)))).toBe("RequestTimeTooSkewed")
    }).pipe(Effect.provide(TestContext.TestContext))
  )

  it.effect("Shared Key: the backend's signatures verify, and fail for another key or a changed header", () =>
    Effect.sync(() =>
      fc.assert(
        fc.property(key, query, fc.constantFrom("GET", "HEAD", "PUT", "DELETE"), (k, q, method) => {
          const path = `/${AZURE_KEY.account}/container/${k.split("/").map(encodeURIComponent).join("/")}`
          const headers: Record<string, string> = { "x-ms-date": new Date().toUTCString(), "x-ms-version": "2021-12-02" }
          if (method === "GET") headers["x-ms-range"] = "bytes=0-9"
          headers.authorization = sharedKeyAuthorization(AZURE_KEY.account, AZURE_KEY.key, { method, path, query: q, headers })
          const rawQuery = Object.entries(q).map(([n, v]) => `${encodeURIComponent(n)}=${encodeURIComponent(v)}`).join("&")
          const expectation = { account: AZURE_KEY.account, key: Redacted.make(AZURE_KEY.key), nowMs: Date.now(), clockSkewMs: 900_000 }
          expect(verifySharedKey({ method, rawPath: path, rawQuery, headers }, expectation)).toEqual({ ok: true })
          const otherKey = verifySharedKey(
            { method, rawPath: path, rawQuery, headers },
            { ...expectation, key: Redacted.make(Buffer.from("x".repeat(32)).toString("base64")) }
          )
          expect(otherKey.ok).toBe(false)
          const changed = verifySharedKey({ method, rawPath: path, rawQuery, headers: { ...headers, "x-ms-version": "2020-01-01" } }, expectation)
          expect(changed.ok).toBe(false)
        }),
        { numRuns: 100 }
      )
    )
  )
})
