/**
 * The S3 backend on temporary credentials from the origin stub's emulated STS
 * (AssumeRoleWithWebIdentity from a projected token file) and IMDSv2: fetched, used, replaced
 * when the origin refuses them, refused grants named clearly, and no secret in any log line.
 */
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { describe, expect, it, layer } from "@effect/vitest"
import { Chunk, Config, ConfigProvider, Effect, Layer, Logger, LogLevel, Stream } from "effect"
import type { AwsIdentity } from "../../src/backend/awsIdentity.js"
import * as S3 from "../../src/backend/S3.js"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import { OriginStub, type OriginStubShape } from "../../src/origin/index.js"
import { tempDir } from "./servers.js"

const bucket = "talon-aws"
const fastPolicy = { timeoutMs: 5_000, retries: 2, retryBaseMs: 1, retryMaxMs: 5, maxSockets: 8 }

const stubLayer = Layer.unwrapScoped(
  Effect.gen(function* () {
    const root = yield* tempDir("talon-aws-stub-")
    yield* Effect.promise(() => fs.mkdir(path.join(root, bucket)))
    return OriginStub.layer({ root, port: 0 })
  })
).pipe(Layer.orDie)

const id = (objectPath: string): ObjectId => ({ backend: Backend.S3, bucket, objectPath })
const collect = <E>(stream: Stream.Stream<Uint8Array, E>) =>
  Effect.map(Stream.runCollect(stream), (chunks) => Buffer.concat(Chunk.toArray(chunks)))

const captureLogs = <A, E, R>(effect: Effect.Effect<A, E, R>, lines: Array<string>) =>
  effect.pipe(
    Effect.provide(Logger.replace(Logger.defaultLogger, Logger.make(({ message, cause }) => void lines.push(`${JSON.stringify(message)} ${String(cause)}`)))),
    Logger.withMinimumLogLevel(LogLevel.All)
  )

const storeWith = (stub: OriginStubShape, identity: AwsIdentity) =>
  S3.make({ ...S3.localOptions(stub.url), accessKeyId: "", secretAccessKey: S3.localOptions(stub.url).secretAccessKey, policy: fastPolicy, identity })

const webIdentity = (stub: OriginStubShape) =>
  Effect.gen(function* () {
    const dir = yield* tempDir("talon-irsa-")
    const tokenFile = path.join(dir, "token")
    yield* Effect.promise(() => fs.writeFile(tokenFile, "eyJhbGciOiJSUzI1NiJ9.projected-service-account-token.sig\n"))
    return { _tag: "WebIdentity", roleArn: "arn:aws:iam::123456789012:role/talon-cache", tokenFile, sessionName: "talon-test", stsEndpoint: `${stub.url}/_talon/sts` } as const
  })

layer(stubLayer, { excludeTestServices: true, timeout: "30 seconds" })("S3 on workload identity", (it) => {
  for (const flow of ["sts", "imds"] as const) {
    it.effect(`${flow}: credentials are fetched once, used, replaced after the origin refuses them, and never logged`, () =>
      Effect.scoped(
        Effect.gen(function* () {
          const stub = yield* OriginStub
          yield* stub.setTokens({ ttlSeconds: 3600, honourSeconds: 3600, refuse: false })
          const identity: AwsIdentity = flow === "sts" ? yield* webIdentity(stub) : { _tag: "Imds", endpoint: stub.url }
          const lines: Array<string> = []
          // The signer fetches credentials on the runtime the store was made in: capture from there.
          const store = yield* captureLogs(storeWith(stub, identity), lines)
          const before = (yield* stub.tokenStats()).issued[flow]
          yield* captureLogs(store.put(id(`${flow}/a.txt`), Buffer.from("temporary")), lines)
          expect((yield* captureLogs(collect(store.getRange(id(`${flow}/a.txt`), 0, 4)), lines)).toString()).toBe("temp")
          expect((yield* stub.tokenStats()).issued[flow]).toBe(before + 1)

          // Revoked early: the stub answers ExpiredToken; the backend fetches new credentials and the retry succeeds.
          yield* stub.expireTokens()
          const rejectedBefore = (yield* stub.tokenStats()).rejected
          expect((yield* captureLogs(store.stat(id(`${flow}/a.txt`)), lines)).size).toBe(9)
          const after = yield* stub.tokenStats()
          expect(after.rejected).toBe(rejectedBefore + 1)
          expect(after.issued[flow]).toBe(before + 2)

          expect(lines.length).toBeGreaterThan(0)
          for (const line of lines) {
            expect(line).not.toContain("stub-session-")
            expect(line).not.toContain("stub-secret-")
          }
        })
      )
    )

    it.effect(`${flow}: a refused grant fails the request with a message naming the source`, () =>
      Effect.scoped(
        Effect.gen(function* () {
          const stub = yield* OriginStub
          const identity: AwsIdentity = flow === "sts" ? yield* webIdentity(stub) : { _tag: "Imds", endpoint: stub.url }
          const store = yield* storeWith(stub, identity)
          yield* stub.setTokens({ refuse: true })
          const error = yield* Effect.flip(store.stat(id("nothing"))).pipe(Effect.ensuring(stub.setTokens({ refuse: false })))
          expect(error.message).toContain(flow === "sts" ? "could not get credentials from STS AssumeRoleWithWebIdentity" : "could not get credentials from EC2 instance metadata (IMDSv2)")
          expect(error.message).toContain(flow === "sts" ? "AccessDenied" : "HTTP 404")
        })
      )
    )
  }

  it.effect("session credentials that keep failing end in ExpiredToken naming the source", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const stub = yield* OriginStub
        const store = yield* storeWith(stub, { _tag: "Imds", endpoint: stub.url })
        yield* stub.setTokens({ honourSeconds: 0 })
        const error = yield* Effect.flip(store.stat(id("x"))).pipe(Effect.ensuring(stub.setTokens({ honourSeconds: 3600 })))
        expect(error.message).toContain("S3 refused the temporary credentials from EC2 instance metadata (IMDSv2)")
        expect(error.message).toMatch(/ExpiredToken|HTTP 400 without a reason/)
      })
    )
  )
})

describe("S3Config identity", () => {
  it("static keys first, then a web identity, then IMDS when asked", async () => {
    const read = (env: Record<string, string>) =>
      Effect.runPromise(Config.option(S3.S3Config).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))))
    expect((await read({}))._tag).toBe("None")
    const irsa = { AWS_ROLE_ARN: "arn:aws:iam::123456789012:role/r", AWS_WEB_IDENTITY_TOKEN_FILE: "/var/run/token", AWS_REGION: "eu-west-1" }
    expect(await read(irsa)).toMatchObject({
      value: { identity: { _tag: "WebIdentity", roleArn: irsa.AWS_ROLE_ARN, tokenFile: "/var/run/token", stsEndpoint: "https://sts.eu-west-1.amazonaws.com" } }
    })
    expect(await read({ ...irsa, AWS_ACCESS_KEY_ID: "k", AWS_SECRET_ACCESS_KEY: "s" })).toMatchObject({ value: { identity: undefined, accessKeyId: "k" } })
    expect(await read({ TALON_S3_AUTH: "imds", AWS_EC2_METADATA_SERVICE_ENDPOINT: "http://127.0.0.1:1338" })).toMatchObject({
      value: { identity: { _tag: "Imds", endpoint: "http://127.0.0.1:1338" } }
    })
  })
})
